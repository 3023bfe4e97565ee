// Face quality's parts on real pixels: sharpness falls with blur and with upscaling a small
// face, is blind to contrast, and the product is clipped to [0, 1].
#include "analysis/face_quality.h"

#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace framemill {
namespace {

// Messi's face in opencv-doc's messi5.jpg (the faces stage finds it about here).
cv::Mat MessiFace() {
  cv::Mat img = cv::imread("/usr/share/doc/opencv-doc/examples/data/messi5.jpg");
  if (img.empty()) return img;
  return img(cv::Rect(200, 70, 60, 60)).clone();
}

TEST(FaceQualityTest, SharpnessFallsWithBlurAndSmallnessAndIgnoresContrast) {
  const cv::Mat face = MessiFace();
  if (face.empty()) GTEST_SKIP() << "install opencv-doc";
  const double sharp = FaceSharpness(face);
  cv::Mat blurred, small, dim;
  cv::GaussianBlur(face, blurred, cv::Size(0, 0), 2.0);
  cv::resize(face, small, cv::Size(16, 16), 0, 0, cv::INTER_AREA);
  face.convertTo(dim, -1, 0.5, 40);  // half the contrast
  EXPECT_GT(sharp, 0.05);
  EXPECT_LT(FaceSharpness(blurred), 0.5 * sharp);
  EXPECT_LT(FaceSharpness(small), 0.5 * sharp) << "a 16 px face upscaled to 64 has lost its detail";
  EXPECT_NEAR(FaceSharpness(dim), sharp, 0.1 * sharp);
  EXPECT_EQ(FaceSharpness(cv::Mat(40, 40, CV_8UC3, cv::Scalar(90, 90, 90))), 0.0);
  EXPECT_EQ(FaceSharpness(cv::Mat()), 0.0);
}

TEST(FaceQualityTest, TheScoreIsTheProductOfTheScaledParts) {
  const FaceQualityScales s;  // full at 48 px and sharpness 0.15
  FaceQuality q = ScoreFaceQuality(96, 0.30, 0.8, 1.0, s);
  EXPECT_DOUBLE_EQ(q.score, 0.8) << "size and sharpness past their scales do not limit";
  q = ScoreFaceQuality(24, 0.075, 1.0, 0.5, s);
  EXPECT_DOUBLE_EQ(q.score, 0.5 * 0.5 * 0.5);
  EXPECT_DOUBLE_EQ(q.size_px, 24);
  EXPECT_DOUBLE_EQ(ScoreFaceQuality(100, 1, 1.7, -0.2, s).score, 0.0) << "parts are clipped to [0, 1]";
}

}  // namespace
}  // namespace framemill
