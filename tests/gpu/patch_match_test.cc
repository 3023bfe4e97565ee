// PatchMatchCpu, the reference the CUDA patch search is held to (tests/gpu/device/
// patch_match_device_test.cc), on a real photo.
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "gpu/compute_backend.h"
#include "gpu/ops.h"
#include "tests/support/test_support.h"

namespace framemill::gpu {
namespace {

constexpr int kR = 3;

// A photo whose right part repeats a block of its left part: the patches there have an
// exact (cost 0) match, which the search must find from a start that knows nothing.
struct Scene {
  cv::Mat image, active, source, nnf;
  cv::Rect copy_from, copy_to;
};

Scene MakeScene() {
  Scene s;
  cv::Mat photo = cv::imread(testing::SampleData("fruits.jpg"));
  cv::resize(photo, s.image, cv::Size(160, 120), 0, 0, cv::INTER_AREA);
  s.copy_from = cv::Rect(10, 20, 40, 40);
  s.copy_to = cv::Rect(100, 50, 40, 40);
  s.image(s.copy_from).copyTo(s.image(s.copy_to));
  s.active = cv::Mat::zeros(s.image.size(), CV_8U);
  s.active(cv::Rect(s.copy_to.x + kR, s.copy_to.y + kR, 40 - 2 * kR, 40 - 2 * kR)) = 255;
  // Sources: every centre whose patch is inside the image, except the copied block's own
  // (which would match itself).
  s.source = cv::Mat::zeros(s.image.size(), CV_8U);
  s.source(cv::Rect(kR, kR, 160 - 2 * kR, 120 - 2 * kR)) = 255;
  s.source(cv::Rect(s.copy_to.x - kR, s.copy_to.y - kR, 40 + 2 * kR, 40 + 2 * kR)) = 0;
  s.nnf = cv::Mat(s.image.size(), CV_32SC2, cv::Scalar(80, 10));  // one poor start for all
  return s;
}

TEST(PatchMatchTest, FindsTheExactCopyOfEveryPatch) {
  Scene s = MakeScene();
  PatchMatchSpec spec;
  spec.radius = kR;
  spec.iterations = 6;
  const PatchMatchResult r = PatchMatchCpu({s.image, s.active, s.source, s.nnf}, spec);
  int exact = 0, total = 0;
  for (int y = 0; y < s.image.rows; ++y)
    for (int x = 0; x < s.image.cols; ++x) {
      if (s.active.at<uint8_t>(y, x) == 0) {
        EXPECT_EQ(r.nnf.at<cv::Vec2i>(y, x), s.nnf.at<cv::Vec2i>(y, x));  // untouched
        EXPECT_EQ(r.cost.at<int>(y, x), 0);
        continue;
      }
      ++total;
      const cv::Vec2i q = r.nnf.at<cv::Vec2i>(y, x);
      ASSERT_NE(s.source.at<uint8_t>(q[1], q[0]), 0);
      if (q == cv::Vec2i(x - 90, y - 30) && r.cost.at<int>(y, x) == 0) ++exact;
    }
  EXPECT_GT(exact, total * 95 / 100) << exact << " of " << total;
}

TEST(PatchMatchTest, CostsFallWithIterationsAndRunsRepeatExactly) {
  Scene s = MakeScene();
  const PatchMatchTask task{s.image, s.active, s.source, s.nnf};
  double previous = 1e18;
  for (int it : {1, 2, 4}) {
    PatchMatchSpec spec;
    spec.radius = kR;
    spec.iterations = it;
    const PatchMatchResult r = PatchMatchCpu(task, spec);
    const double total = cv::sum(r.cost)[0];
    EXPECT_LE(total, previous) << it;
    previous = total;
    const PatchMatchResult again = PatchMatchCpu(task, spec);
    EXPECT_EQ(cv::norm(r.nnf.reshape(1), again.nnf.reshape(1), cv::NORM_INF), 0);
  }
}

TEST(PatchMatchTest, RefusesWhatItCannotSearch) {
  Scene s = MakeScene();
  PatchMatchSpec spec;
  EXPECT_TRUE(CheckPatchMatchTask({s.image, s.active, s.source, s.nnf}, spec).ok());
  cv::Mat gray;
  cv::cvtColor(s.image, gray, cv::COLOR_BGR2GRAY);
  EXPECT_EQ(CheckPatchMatchTask({gray, s.active, s.source, s.nnf}, spec).code(),
            Status::Code::kInvalidArgument);
  cv::Mat bad_start = s.nnf.clone();
  bad_start.at<cv::Vec2i>(s.copy_to.y + 10, s.copy_to.x + 10) = {s.copy_to.x + 5, s.copy_to.y + 5};
  EXPECT_EQ(CheckPatchMatchTask({s.image, s.active, s.source, bad_start}, spec).code(),
            Status::Code::kInvalidArgument);  // its start is not a source
  EXPECT_EQ(CheckPatchMatchTask({s.image, s.active, cv::Mat::zeros(s.image.size(), CV_8U), s.nnf}, spec).code(),
            Status::Code::kInvalidArgument);  // no source at all
  spec.radius = 0;
  EXPECT_FALSE(CheckPatchMatchTask({s.image, s.active, s.source, s.nnf}, spec).ok());
}

TEST(PatchMatchTest, TheSimulatedDeviceChargesItAndRunsOutOfMemory) {
  Scene s = MakeScene();
  const PatchMatchTask task{s.image, s.active, s.source, s.nnf};
  auto roomy = MakeSimBackend(64);
  auto r = roomy->PatchMatchBatch({task}, PatchMatchSpec{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const PatchMatchResult want = PatchMatchCpu(task, PatchMatchSpec{});
  EXPECT_EQ(cv::norm(r->front().nnf.reshape(1), want.nnf.reshape(1), cv::NORM_INF), 0);
  EXPECT_EQ(roomy->LastBatchBytes(), PatchMatchBytesPerItem(s.image.size()));
  // 160x120 costs 557 kB; a device of 1 MiB with each byte counted 4 times has too little.
  auto tight = MakeSimBackend(1, 4.0);
  EXPECT_EQ(tight->PatchMatchBatch({task}, PatchMatchSpec{}).status().code(), Status::Code::kOutOfMemory);
}

}  // namespace
}  // namespace framemill::gpu
