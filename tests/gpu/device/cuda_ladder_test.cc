// The OOM ladder (gpu/oom_ladder.h) over the real CUDA backend: with a 64 MiB memory
// limit (LadderOptions::memory_limit_bytes, which the ladder hands to the backend via
// SetMemoryLimit) and large images, the first batches exceed the limit; the backend
// refuses them with OutOfMemory, the ladder halves and retries, and an image that
// cannot fit even alone runs on the CPU. Every item must complete with the CPU
// reference's results, and the events must be counted. The first guess of bytes per
// item is deliberately low (as a guess may be) so that the tuner's first proposal
// overshoots; after one successful batch the tuner learns the real cost from
// LastBatchBytes(). Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "base/clock.h"
#include "gpu/batch_tuner.h"
#include "gpu/compute_backend.h"
#include "gpu/oom_ladder.h"

namespace framemill::gpu {
namespace {

constexpr int64_t kLimit = int64_t{64} << 20;

// Photo-like: gradients, noise, a blown-out band and black/white patches.
cv::Mat Photo(int cols, int rows, uint64_t seed) {
  cv::RNG rng(seed);
  cv::Mat img(rows, cols, CV_8UC3);
  const double k = 0.5 + rng.uniform(0.0, 1.0);
  for (int y = 0; y < rows; ++y) {
    auto* p = img.ptr<uint8_t>(y);
    for (int x = 0; x < cols; ++x) {
      p[3 * x + 0] = cv::saturate_cast<uint8_t>(k * (40 + 150.0 * x / cols));
      p[3 * x + 1] = cv::saturate_cast<uint8_t>(k * (30 + 180.0 * y / rows));
      p[3 * x + 2] = cv::saturate_cast<uint8_t>(k * (20 + 90.0 * (x + y) / (cols + rows)));
    }
  }
  cv::Mat noise(rows, cols, CV_8UC3);
  rng.fill(noise, cv::RNG::UNIFORM, 0, 12);
  img += noise;
  img(cv::Rect(0, 0, cols, rows / 12)).setTo(cv::Scalar(255, 255, 255));
  img(cv::Rect(cols / 4, rows / 3, cols / 8, rows / 8)).setTo(cv::Scalar(0, 0, 0));
  return img;
}

class CudaLadderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (CudaDevices(&why).empty()) GTEST_SKIP() << "no CUDA device: " << why;
    auto b = MakeCudaBackend(0);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    gpu_ = std::move(b).value();
    cpu_ = MakeCpuBackend();
  }
  std::unique_ptr<ComputeBackend> gpu_, cpu_;
};

TEST_F(CudaLadderTest, LumaStatsCompleteUnderAMemoryLimit) {
  // Six 12 MP photos (36 MB each: one fits in 64 MiB, two do not) and one 25 MP photo
  // (75 MB: never fits, so it must fall back to the CPU).
  std::vector<cv::Mat> images;
  for (int i = 0; i < 6; ++i) images.push_back(Photo(4000, 3000, 10 + i));
  images.push_back(Photo(5000, 5000, 99));

  BatchTuner tuner(TunerOptions{}, nullptr);
  ManualClock clock;
  LadderOptions options;
  options.memory_limit_bytes = kLimit;
  OomLadder ladder(gpu_.get(), cpu_.get(), &tuner, &clock, options);
  EXPECT_EQ(gpu_->memory_limit(), kLimit);

  std::vector<LumaStats> out(images.size());
  std::vector<std::string> device_of;
  auto run = [&](ComputeBackend& b, size_t begin, size_t end) -> Status {
    std::vector<cv::Mat> slice(images.begin() + static_cast<long>(begin), images.begin() + static_cast<long>(end));
    auto r = b.LumaStatsBatch(slice);
    if (!r.ok()) return r.status();
    for (size_t k = begin; k < end; ++k) out[k] = (*r)[k - begin];
    return Status::OK();
  };
  const int64_t low_guess = int64_t{1} << 20;
  Status s = ladder.Run("LIGHTING", images.size(), 12'000'000, low_guess, run, &device_of);
  ASSERT_TRUE(s.ok()) << s.ToString();

  const LadderStats& st = ladder.stats();
  std::printf("  oom_events %lld, halvings %lld, cpu_fallback_items %lld, cooldowns %lld\n",
              static_cast<long long>(st.oom_events), static_cast<long long>(st.halvings),
              static_cast<long long>(st.cpu_fallback_items), static_cast<long long>(st.cooldowns));
  EXPECT_GE(st.oom_events, 2);  // the first proposal and at least one halving overshoot
  EXPECT_GE(st.halvings, 1);
  EXPECT_EQ(st.cpu_fallback_items, 1);
  ASSERT_EQ(device_of.size(), images.size());
  for (size_t i = 0; i + 1 < images.size(); ++i) EXPECT_EQ(device_of[i], "cuda:0") << i;
  EXPECT_EQ(device_of.back(), "cpu");
  EXPECT_GT(gpu_->LastBatchBytes(), 0);
  EXPECT_LE(gpu_->LastBatchBytes(), kLimit);

  for (size_t i = 0; i < images.size(); ++i) {
    const LumaStats want = LumaStatsCpu(images[i]);
    EXPECT_EQ(out[i].pixels, want.pixels) << i;
    EXPECT_EQ(out[i].histogram, want.histogram) << i;  // the kernel is bit-exact on bins
    EXPECT_NEAR(out[i].sum_l, want.sum_l, 1e-5 * want.sum_l) << i;
    EXPECT_NEAR(out[i].sum_log_l, want.sum_log_l, 1e-5 * std::abs(want.sum_log_l)) << i;
    EXPECT_EQ(out[i].clipped_shadows, want.clipped_shadows) << i;
    EXPECT_EQ(out[i].clipped_highlights, want.clipped_highlights) << i;
  }
}

TEST_F(CudaLadderTest, PreprocessCompletesUnderAMemoryLimit) {
  std::vector<cv::Mat> images;
  for (int i = 0; i < 8; ++i) images.push_back(Photo(3000, 2000, 50 + i));  // 18 MB each
  PreprocessSpec spec;
  spec.width = 224;
  spec.height = 224;

  BatchTuner tuner(TunerOptions{}, nullptr);
  ManualClock clock;
  LadderOptions options;
  options.memory_limit_bytes = kLimit;
  OomLadder ladder(gpu_.get(), cpu_.get(), &tuner, &clock, options);

  const size_t per_image = 3 * 224 * 224 * sizeof(float);
  std::vector<uint8_t> out(images.size() * per_image);
  std::vector<std::string> device_of;
  auto run = [&](ComputeBackend& b, size_t begin, size_t end) -> Status {
    std::vector<cv::Mat> slice(images.begin() + static_cast<long>(begin), images.begin() + static_cast<long>(end));
    auto r = b.PreprocessBatch(slice, spec);
    if (!r.ok()) return r.status();
    std::copy(r->data.begin(), r->data.end(), out.begin() + static_cast<long>(begin * per_image));
    return Status::OK();
  };
  Status s = ladder.Run("PREPROCESS", images.size(), 6'000'000, int64_t{1} << 20, run, &device_of);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(ladder.stats().oom_events, 1);
  EXPECT_GE(ladder.stats().halvings, 1);
  EXPECT_EQ(ladder.stats().cpu_fallback_items, 0);
  for (const std::string& d : device_of) EXPECT_EQ(d, "cuda:0");

  Tensor want = PreprocessCpu(images, spec);
  ASSERT_EQ(want.data.size(), out.size());
  float worst = 0;
  for (size_t i = 0; i < out.size() / 4; ++i) {
    float g;
    std::memcpy(&g, out.data() + 4 * i, 4);
    worst = std::max(worst, std::abs(g - want.At(i)));
  }
  EXPECT_LE(worst, 1e-4f);
}

}  // namespace
}  // namespace framemill::gpu
