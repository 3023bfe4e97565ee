// The CUDA dense flow against its CPU twin (DenseFlowCpu), on textured frames made here
// (this binary links no image codecs, so that it travels to a GPU machine).
#include <gtest/gtest.h>

#include <random>

#include <opencv2/imgproc.hpp>

#include "gpu/compute_backend.h"
#include "gpu/ops.h"
#include "tests/gpu/device/texture.h"

namespace framemill::gpu {
namespace {

cv::Mat FlowTexture(cv::Size size, int seed) { return MultiScaleTexture(size, seed, 1, {2, 6, 18}); }

cv::Mat Moved(const cv::Mat& m, double dx, double dy, double zoom) {
  const cv::Point2f c(m.cols / 2.f, m.rows / 2.f);
  cv::Mat a = cv::getRotationMatrix2D(c, 0.3, zoom);
  a.at<double>(0, 2) += dx, a.at<double>(1, 2) += dy;
  cv::Mat out;
  cv::warpAffine(m, out, a, m.size(), cv::INTER_LINEAR, cv::BORDER_REFLECT);
  return out;
}

TEST(CudaDenseFlowTest, MatchesTheCpuTwin) {
  std::string why;
  if (CudaDevices(&why).empty()) GTEST_SKIP() << "no CUDA device: " << why;
  auto gpu = MakeCudaBackend(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  // An odd size (pyramid levels of odd sizes), and the analysis size of the motion stage.
  for (cv::Size size : {cv::Size(333, 187), cv::Size(320, 180)}) {
    const cv::Mat a = FlowTexture(size, size.width);
    const std::vector<FlowPair> pairs = {{a, Moved(a, 3.5, -1.5, 1.01)}, {a, Moved(a, -0.4, 0.2, 1.0)}};
    auto got = (*gpu)->DenseFlowBatch(pairs, FlowSpec{});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i) {
      const cv::Mat want = DenseFlowCpu(pairs[i], FlowSpec{});
      ASSERT_EQ((*got)[i].size(), want.size());
      cv::Mat diff;
      cv::absdiff((*got)[i], want, diff);
      double worst = 0;
      cv::minMaxLoc(diff.reshape(1), nullptr, &worst);
      EXPECT_LT(worst, 1e-3) << size << " pair " << i;           // px
      EXPECT_LT(cv::mean(diff.reshape(1))[0], 1e-5) << size << " pair " << i;
    }
  }
}

TEST(CudaDenseFlowTest, AMemoryLimitGivesOutOfMemory) {
  std::string why;
  if (CudaDevices(&why).empty()) GTEST_SKIP() << "no CUDA device: " << why;
  auto gpu = MakeCudaBackend(0);
  ASSERT_TRUE(gpu.ok());
  (*gpu)->SetMemoryLimit(1 << 20);
  const cv::Mat a = FlowTexture({1280, 720}, 3);
  EXPECT_EQ((*gpu)->DenseFlowBatch({{a, a}}, FlowSpec{}).status().code(), Status::Code::kOutOfMemory);
}

}  // namespace
}  // namespace framemill::gpu
