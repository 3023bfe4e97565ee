// The CUDA hole fill against its CPU twin (HoleFillCpu): the same float operations in the
// same order, each rounded on its own, so the filled images must be equal, not close.
// Textured images made here (this binary links no image codecs, so that it travels).
#include <gtest/gtest.h>

#include <opencv2/imgproc.hpp>

#include "gpu/compute_backend.h"
#include "gpu/ops.h"
#include "tests/gpu/device/texture.h"

namespace framemill::gpu {
namespace {

// A hole of each kind the inpaint stage meets: an ellipse (a person's mask), thick
// strokes, a box, and scattered pixels; on an image of odd size.
HoleFillTask FillTask(cv::Size size, int seed, int kind) {
  HoleFillTask t{MultiScaleTexture(size, seed, 3, {2, 7, 23}), cv::Mat::zeros(size, CV_8U)};
  const cv::Point centre(size.width / 2, size.height / 2);
  if (kind == 0) {
    cv::ellipse(t.hole, centre, cv::Size(size.width / 5, size.height / 3), 20, 0, 360, 255, cv::FILLED);
  } else if (kind == 1) {
    cv::line(t.hole, {3, 5}, {size.width - 9, size.height - 4}, 255, 11);
    cv::line(t.hole, {size.width / 3, size.height - 2}, {size.width - 1, 0}, 255, 7);
  } else if (kind == 2) {
    cv::rectangle(t.hole, cv::Rect(0, size.height / 4, size.width / 2, size.height / 2), 255, cv::FILLED);
  } else {
    cv::RNG rng(seed);
    for (int i = 0; i < size.area() / 20; ++i)
      t.hole.at<uint8_t>(rng.uniform(0, size.height), rng.uniform(0, size.width)) = 255;
  }
  return t;
}

TEST(CudaHoleFillTest, MatchesTheCpuTwinExactly) {
  std::string why;
  if (CudaDevices(&why).empty()) GTEST_SKIP() << "no CUDA device: " << why;
  auto gpu = MakeCudaBackend(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  // Odd and even sizes, both parities of the step count, several tasks a batch.
  for (int iterations : {0, 1, 16, 33}) {
    const HoleFillSpec spec{iterations};
    std::vector<HoleFillTask> tasks;
    for (int kind = 0; kind < 4; ++kind) tasks.push_back(FillTask({333 + 64 * kind, 187 + 51 * kind}, kind + 1, kind));
    tasks.push_back(FillTask({1, 9}, 7, 3));
    tasks.back().hole.at<uint8_t>(4, 0) = 255;
    auto got = (*gpu)->HoleFillBatch(tasks, spec);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), tasks.size());
    for (size_t i = 0; i < tasks.size(); ++i) {
      const cv::Mat want = HoleFillCpu(tasks[i], spec);
      EXPECT_EQ(cv::norm((*got)[i], want, cv::NORM_INF), 0) << "iterations " << iterations << " task " << i;
      cv::Mat known = tasks[i].hole == 0;
      EXPECT_EQ(cv::norm((*got)[i], tasks[i].image, cv::NORM_INF, known), 0) << "known pixels changed";
    }
  }
}

TEST(CudaHoleFillTest, AMemoryLimitGivesOutOfMemory) {
  std::string why;
  if (CudaDevices(&why).empty()) GTEST_SKIP() << "no CUDA device: " << why;
  auto gpu = MakeCudaBackend(0);
  ASSERT_TRUE(gpu.ok());
  (*gpu)->SetMemoryLimit(1 << 20);
  const HoleFillTask t = FillTask({1280, 720}, 3, 0);
  EXPECT_EQ((*gpu)->HoleFillBatch({t}, HoleFillSpec{}).status().code(), Status::Code::kOutOfMemory);
}

}  // namespace
}  // namespace framemill::gpu
