#include <gtest/gtest.h>

#include <cmath>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "gpu/compute_backend.h"
#include "gpu/ops.h"
#include "tests/support/test_support.h"

namespace framemill::gpu {
namespace {

using testing::SampleData;

cv::Mat Gray(const std::string& name, cv::Size size) {
  cv::Mat bgr = cv::imread(SampleData(name)), gray;
  cv::cvtColor(bgr, gray, cv::COLOR_BGR2GRAY);
  cv::resize(gray, gray, size, 0, 0, cv::INTER_AREA);
  return gray;
}

// `from` moved by (dx, dy): content at x in `from` is at x + (dx, dy) in the result.
cv::Mat Shifted(const cv::Mat& from, double dx, double dy) {
  cv::Mat out;
  cv::warpAffine(from, out, cv::Matx23d(1, 0, dx, 0, 1, dy), from.size(), cv::INTER_LINEAR,
                 cv::BORDER_REFLECT);
  return out;
}

cv::Point2d MedianFlow(const cv::Mat& flow) {
  std::vector<float> u, v;
  const int b = flow.cols / 10;  // away from the borders the shift brought in
  for (int y = b; y < flow.rows - b; ++y)
    for (int x = b; x < flow.cols - b; ++x) u.push_back(flow.at<cv::Point2f>(y, x).x), v.push_back(flow.at<cv::Point2f>(y, x).y);
  std::nth_element(u.begin(), u.begin() + u.size() / 2, u.end());
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return {u[u.size() / 2], v[v.size() / 2]};
}

TEST(DenseFlowTest, TheCpuTwinRecoversAKnownShiftOfARealPhoto) {
  const cv::Mat from = Gray("aloeL.jpg", {320, 277});
  for (auto [dx, dy] : {std::pair{2.5, -1.25}, std::pair{-7.0, 3.0}, std::pair{0.3, 0.0}}) {
    const cv::Mat flow = DenseFlowCpu({from, Shifted(from, dx, dy)}, FlowSpec{});
    ASSERT_EQ(flow.type(), CV_32FC2);
    ASSERT_EQ(flow.size(), from.size());
    const cv::Point2d m = MedianFlow(flow);
    EXPECT_NEAR(m.x, dx, 0.05) << dx << "," << dy;
    EXPECT_NEAR(m.y, dy, 0.05) << dx << "," << dy;
  }
}

TEST(DenseFlowTest, BackendsCheckTheirInputAndTheSimulatedDeviceRunsOutOfMemory) {
  const cv::Mat a = Gray("aloeL.jpg", {320, 277});
  auto cpu = MakeCpuBackend();
  cv::Mat color;
  cv::cvtColor(a, color, cv::COLOR_GRAY2BGR);
  EXPECT_EQ(cpu->DenseFlowBatch({{color, color}}, {}).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(cpu->DenseFlowBatch({{a, a(cv::Rect(0, 0, 100, 100)).clone()}}, {}).status().code(),
            Status::Code::kInvalidArgument);
  auto sim = MakeSimBackend(1);  // 1 MiB: a 320x277 pair needs ~6
  EXPECT_GT(DenseFlowBytesPerItem(a.size(), {}), 4 << 20);
  EXPECT_EQ(sim->DenseFlowBatch({{a, a}}, {}).status().code(), Status::Code::kOutOfMemory);
  auto roomy = MakeSimBackend(64);
  auto r = roomy->DenseFlowBatch({{a, Shifted(a, 1, 0)}, {a, a}}, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ(cv::norm((*r)[0], DenseFlowCpu({a, Shifted(a, 1, 0)}, {}), cv::NORM_INF), 0.0);
}

}  // namespace
}  // namespace framemill::gpu
