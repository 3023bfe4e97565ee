// The pixel check that confirms a near-duplicate pair (analysis/same_picture.h), on real photos.
#include "analysis/same_picture.h"

#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "tests/support/test_support.h"

namespace framemill {
namespace {

cv::Mat Read(const std::string& path) { return cv::imread(path, cv::IMREAD_COLOR); }

// The copies the issue names: resized, JPEG at quality 30, cropped by 10%, turned 3 degrees,
// brightened.
std::vector<std::pair<std::string, cv::Mat>> Copies(const cv::Mat& im) {
  const int w = im.cols, h = im.rows;
  cv::Mat half, q30, rot, bright;
  cv::resize(im, half, cv::Size(w / 2, h / 2), 0, 0, cv::INTER_AREA);
  std::vector<uchar> buf;
  cv::imencode(".jpg", im, buf, {cv::IMWRITE_JPEG_QUALITY, 30});
  q30 = cv::imdecode(buf, cv::IMREAD_COLOR);
  cv::warpAffine(im, rot, cv::getRotationMatrix2D(cv::Point2f(w / 2.f, h / 2.f), 3, 1), im.size(), cv::INTER_LINEAR,
                 cv::BORDER_REFLECT);
  im.convertTo(bright, -1, 1.0, 30);
  return {{"half", half}, {"q30", q30}, {"crop", im(cv::Rect(w / 20, h / 20, w - w / 10, h - h / 10)).clone()},
          {"rot", rot}, {"bright", bright}};
}

TEST(SamePictureTest, EveryKindOfCopyIsTheSamePicture) {
  for (const char* name : {"messi5.jpg", "fruits.jpg", "building.jpg", "leuvenA.jpg"}) {
    const cv::Mat im = Read(testing::SampleData(name));
    for (const auto& [kind, copy] : Copies(im)) {
      const SamePictureResult r = SamePicture(im, copy);
      EXPECT_TRUE(r.same) << name << " " << kind << ": " << r.inliers << " of " << r.matches;
    }
  }
}

// Pictures of one kind that an embedding puts close (two textures, two street scenes, a
// stereo pair's two views are the same scene but not a copy... kept out) are not copies.
TEST(SamePictureTest, TexturesAndScenesOfOneKindAreNot) {
  const std::string sk = "/usr/lib/python3/dist-packages/skimage/data/";
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {sk + "gravel.png", sk + "grass.png"},
      {sk + "brick.png", sk + "gravel.png"},
      {testing::SampleData("building.jpg"), testing::SampleData("leuvenA.jpg")},
      {testing::SampleData("apple.jpg"), testing::SampleData("orange.jpg")},
      {testing::SampleData("messi5.jpg"), testing::SampleData("basketball1.png")}};
  for (const auto& [a, b] : pairs) {
    const SamePictureResult r = SamePicture(Read(a), Read(b));
    EXPECT_FALSE(r.same) << a << " / " << b << ": " << r.inliers << " of " << r.matches;
  }
  EXPECT_FALSE(SamePicture(cv::Mat(), Read(testing::SampleData("apple.jpg"))).same);
}

}  // namespace
}  // namespace framemill
