// The CUDA patch search against its CPU twin (PatchMatchCpu): integer costs and the same
// candidates in the same order, so the fields must be equal, not close. Textured images
// made here (this binary links no image codecs, so that it travels to a GPU machine).
#include <gtest/gtest.h>

#include <opencv2/imgproc.hpp>

#include "gpu/compute_backend.h"
#include "gpu/ops.h"
#include "tests/gpu/device/texture.h"

namespace framemill::gpu {
namespace {

cv::Mat PatchTexture(cv::Size size, int seed) { return MultiScaleTexture(size, seed, 3, {2, 7, 23}); }

// A hole in the middle: active where patches touch it, sources where they do not, every
// start the first source (the worst start there is).
PatchMatchTask PatchTask(cv::Size size, int seed, int r) {
  PatchMatchTask t;
  t.image = PatchTexture(size, seed);
  cv::Mat hole = cv::Mat::zeros(size, CV_8U);
  cv::ellipse(hole, cv::Point(size.width / 2, size.height / 2), cv::Size(size.width / 6, size.height / 5), 20,
              0, 360, 255, cv::FILLED);
  const cv::Mat k = cv::getStructuringElement(cv::MORPH_RECT, cv::Size(2 * r + 1, 2 * r + 1));
  cv::dilate(hole, t.active, k);
  cv::Mat known = hole == 0;
  cv::erode(known, t.source, k, cv::Point(-1, -1), 1, cv::BORDER_CONSTANT, cv::Scalar(0));
  std::vector<cv::Point> sources;
  cv::findNonZero(t.source, sources);
  t.nnf = cv::Mat(size, CV_32SC2, cv::Scalar(sources[0].x, sources[0].y));
  return t;
}

TEST(CudaPatchMatchTest, MatchesTheCpuTwinExactly) {
  std::string why;
  if (CudaDevices(&why).empty()) GTEST_SKIP() << "no CUDA device: " << why;
  auto gpu = MakeCudaBackend(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  // Odd sizes, both parities of the iteration count, two patch sizes, two tasks a batch.
  for (int iterations : {1, 4, 5}) {
    PatchMatchSpec spec;
    spec.iterations = iterations;
    spec.radius = iterations == 5 ? 2 : 3;
    spec.seed = 11u * iterations;
    const std::vector<PatchMatchTask> tasks = {PatchTask({333, 187}, 1, spec.radius),
                                               PatchTask({96, 211}, 2, spec.radius)};
    auto got = (*gpu)->PatchMatchBatch(tasks, spec);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), tasks.size());
    for (size_t i = 0; i < tasks.size(); ++i) {
      const PatchMatchResult want = PatchMatchCpu(tasks[i], spec);
      EXPECT_EQ(cv::norm((*got)[i].nnf.reshape(1), want.nnf.reshape(1), cv::NORM_INF), 0)
          << "iterations " << iterations << " task " << i;
      EXPECT_EQ(cv::norm((*got)[i].cost, want.cost, cv::NORM_INF), 0)
          << "iterations " << iterations << " task " << i;
    }
  }
}

TEST(CudaPatchMatchTest, AMemoryLimitGivesOutOfMemory) {
  std::string why;
  if (CudaDevices(&why).empty()) GTEST_SKIP() << "no CUDA device: " << why;
  auto gpu = MakeCudaBackend(0);
  ASSERT_TRUE(gpu.ok());
  (*gpu)->SetMemoryLimit(1 << 20);
  const PatchMatchTask t = PatchTask({1280, 720}, 3, 3);
  EXPECT_EQ((*gpu)->PatchMatchBatch({t}, PatchMatchSpec{}).status().code(), Status::Code::kOutOfMemory);
}

}  // namespace
}  // namespace framemill::gpu
