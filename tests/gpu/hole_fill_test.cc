// HoleFillCpu, the harmonic fill the CUDA one is held to (tests/gpu/device/
// hole_fill_device_test.cc): what it must solve, its pyramid, and the simulated device.
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "gpu/compute_backend.h"
#include "gpu/ops.h"
#include "tests/support/test_support.h"

namespace framemill::gpu {
namespace {

cv::Mat Disc(cv::Size size, cv::Point centre, int radius) {
  cv::Mat hole = cv::Mat::zeros(size, CV_8U);
  cv::circle(hole, centre, radius, 255, cv::FILLED);
  return hole;
}

TEST(HoleFillTest, AFlatImageIsFilledWithItsColourAndNothingKnownChanges) {
  cv::Mat image(97, 131, CV_8UC3, cv::Scalar(12, 200, 77));
  const cv::Mat hole = Disc(image.size(), {60, 40}, 30);
  image.setTo(cv::Scalar(0, 0, 0), hole);  // what the hole held must not matter
  const cv::Mat out = HoleFillCpu({image, hole}, HoleFillSpec{});
  EXPECT_EQ(cv::norm(out, cv::Mat(image.size(), CV_8UC3, cv::Scalar(12, 200, 77)), cv::NORM_INF), 0);
}

// A plane is harmonic: the fill must give it back, to within the rounding and what 16 steps
// a level leave unconverged. 200 px across a hole of 81 px diameter.
TEST(HoleFillTest, AGradientIsContinuedAcrossTheHole) {
  cv::Mat image(160, 240, CV_8UC3);
  for (int y = 0; y < image.rows; ++y)
    for (int x = 0; x < image.cols; ++x)
      image.at<cv::Vec3b>(y, x) = {uint8_t(x), uint8_t(y + 40), uint8_t(200 - x / 2 - y / 2)};
  const cv::Mat hole = Disc(image.size(), {120, 80}, 40);
  cv::Mat damaged = image.clone();
  damaged.setTo(cv::Scalar(255, 0, 255), hole);
  const cv::Mat out = HoleFillCpu({damaged, hole}, HoleFillSpec{});
  cv::Mat diff;
  cv::absdiff(out, image, diff);
  double worst = 0;
  cv::minMaxLoc(diff.reshape(1), nullptr, &worst);
  EXPECT_LE(worst, 3) << "a plane's fill strays";
  EXPECT_LE(cv::mean(diff, hole)[0], 1.0);
}

TEST(HoleFillTest, LevelsHalveUntilNothingIsUnknown) {
  const cv::Mat hole = Disc({101, 37}, {50, 18}, 12);
  const std::vector<cv::Size> sizes = HoleFillLevels(hole);
  ASSERT_GE(sizes.size(), 3u);
  EXPECT_EQ(sizes[0], cv::Size(101, 37));
  EXPECT_EQ(sizes[1], cv::Size(51, 19));
  EXPECT_EQ(sizes[2], cv::Size(26, 10));
  // A disc of radius 12 is gone once a pixel covers 32: 5 halvings at most.
  EXPECT_LE(sizes.size(), 6u);
  EXPECT_EQ(HoleFillLevels(cv::Mat::zeros(8, 8, CV_8U)).size(), 1u) << "no hole: one level";
}

TEST(HoleFillTest, UnusableTasksAreRefused) {
  const cv::Mat image(20, 20, CV_8UC3, cv::Scalar::all(9));
  EXPECT_EQ(CheckHoleFillTask({image, cv::Mat(20, 20, CV_8U, cv::Scalar(1))}, {}).code(),
            Status::Code::kInvalidArgument)
      << "a hole over everything leaves nothing to fill from";
  EXPECT_EQ(CheckHoleFillTask({image, cv::Mat::zeros(20, 21, CV_8U)}, {}).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(CheckHoleFillTask({cv::Mat(20, 20, CV_8UC1), cv::Mat::zeros(20, 20, CV_8U)}, {}).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(CheckHoleFillTask({image, cv::Mat::zeros(20, 20, CV_8U)}, HoleFillSpec{-1}).code(),
            Status::Code::kInvalidArgument);
  EXPECT_TRUE(CheckHoleFillTask({image, Disc({20, 20}, {3, 3}, 2)}, {}).ok());
}

// On a real photo: the simulated device computes the twin's fill and charges its bytes.
TEST(HoleFillTest, TheSimulatedDeviceFillsAsTheTwinAndRunsOutOfMemoryLikeADevice) {
  const cv::Mat photo = cv::imread(testing::SampleData("fruits.jpg"));
  ASSERT_FALSE(photo.empty());
  const HoleFillTask task{photo, Disc(photo.size(), {200, 150}, 60)};
  auto roomy = MakeSimBackend(1024);
  auto got = roomy->HoleFillBatch({task}, HoleFillSpec{});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(cv::norm(got->front(), HoleFillCpu(task, HoleFillSpec{}), cv::NORM_INF), 0);
  auto tight = MakeSimBackend(1);
  EXPECT_EQ(tight->HoleFillBatch({task}, HoleFillSpec{}).status().code(), Status::Code::kOutOfMemory);
}

}  // namespace
}  // namespace framemill::gpu
