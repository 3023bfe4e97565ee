#include "gpu/oom_ladder.h"

#include <gtest/gtest.h>

#include <opencv2/imgproc.hpp>

#include "jobs/outcome.h"

namespace framemill::gpu {
namespace {

// Real-looking frames: a smooth gradient with noise, 320x240 (~230 KB each as BGR).
std::vector<cv::Mat> Frames(int n, int w = 320, int h = 240) {
  std::vector<cv::Mat> out;
  cv::RNG rng(7);
  for (int i = 0; i < n; ++i) {
    cv::Mat m(h, w, CV_8UC3);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        m.at<cv::Vec3b>(y, x) = cv::Vec3b(static_cast<uchar>((x + i * 7) % 256),
                                          static_cast<uchar>((y * 255) / h),
                                          static_cast<uchar>(rng.uniform(0, 256)));
    out.push_back(m);
  }
  return out;
}

struct Harness {
  explicit Harness(std::vector<cv::Mat> f) : frames(std::move(f)) {}
  std::vector<cv::Mat> frames;
  std::vector<LumaStats> out;
  std::vector<std::string> device_of;
  OomLadder::SliceFn fn() {
    return [this](ComputeBackend& b, size_t begin, size_t end) -> Status {
      std::vector<cv::Mat> slice(frames.begin() + static_cast<long>(begin),
                                 frames.begin() + static_cast<long>(end));
      auto r = b.LumaStatsBatch(slice);
      if (!r.ok()) return r.status();
      for (size_t k = begin; k < end; ++k) out[k] = (*r)[k - begin];
      return Status::OK();
    };
  }
  Status Run(OomLadder& ladder, const std::string& op = "LIGHTING") {
    out.assign(frames.size(), {});
    return ladder.Run(op, frames.size(), static_cast<int64_t>(frames[0].total()),
                      LumaStatsBytesPerItem(frames[0]), fn(), &device_of);
  }
};

// A simulated device of `vram_mb` (each item costing `cost` times its bytes there), the
// CPU, a tuner (a fixed batch where given), a manual clock and the ladder over them.
struct Rig {
  // `set` changes the ladder's options from their defaults.
  explicit Rig(int64_t vram_mb, double cost = 1.0, int fixed_batch = 0,
               void (*set)(LadderOptions&) = nullptr)
      : sim(MakeSimBackend(vram_mb, cost)), cpu(MakeCpuBackend()),
        tuner(Tuning(fixed_batch), nullptr),
        ladder(sim.get(), cpu.get(), &tuner, &clock, Options(set)) {}
  static LadderOptions Options(void (*set)(LadderOptions&)) {
    LadderOptions lo;
    if (set != nullptr) set(lo);
    return lo;
  }
  static TunerOptions Tuning(int fixed_batch) {
    TunerOptions to;
    if (fixed_batch > 0) to.fixed_batch = fixed_batch;
    return to;
  }
  std::unique_ptr<ComputeBackend> sim, cpu;
  BatchTuner tuner;
  ManualClock clock;
  OomLadder ladder;
};

void ExpectSameAsCpu(const Harness& h) {
  for (size_t i = 0; i < h.frames.size(); ++i) {
    LumaStats ref = LumaStatsCpu(h.frames[i]);
    EXPECT_EQ(h.out[i].histogram, ref.histogram) << i;
    EXPECT_EQ(h.out[i].sum_l, ref.sum_l) << i;
    EXPECT_EQ(h.out[i].clipped_highlights, ref.clipped_highlights) << i;
  }
}

TEST(OomLadderTest, FitsInMemoryRunsEverythingOnTheDeviceWithoutEvents) {
  Rig rig(1024);
  Harness h(Frames(20));
  ASSERT_TRUE(h.Run(rig.ladder).ok());
  for (const auto& d : h.device_of) EXPECT_EQ(d, "sim:0");
  EXPECT_EQ(rig.ladder.stats().oom_events, 0);
  ExpectSameAsCpu(h);
}

TEST(OomLadderTest, HalvesOnOutOfMemoryAndFinishesEveryItemOnTheDevice) {
  // 1 MiB holds four 320x240 frames (~246 KB each): a batch of 8 must step down.
  Rig rig(1, 1.0, /*fixed_batch=*/8);
  Harness h(Frames(16));
  ASSERT_TRUE(h.Run(rig.ladder).ok());
  for (const auto& d : h.device_of) EXPECT_EQ(d, "sim:0");
  EXPECT_GE(rig.ladder.stats().oom_events, 1);
  EXPECT_GE(rig.ladder.stats().halvings, 1);
  EXPECT_EQ(rig.ladder.stats().cpu_fallback_items, 0);
  ExpectSameAsCpu(h);
}

TEST(OomLadderTest, ItemsThatDoNotFitAloneRunOnTheCpu) {
  // Each frame costs 10x its bytes on this device: ~2.4 MiB, over a 2 MiB budget.
  Rig rig(2, 10.0, 0, [](LadderOptions& o) { o.max_oom_streak = 100; });  // no cool-down here
  Harness h(Frames(5));
  ASSERT_TRUE(h.Run(rig.ladder).ok());
  for (const auto& d : h.device_of) EXPECT_EQ(d, "cpu");
  EXPECT_EQ(rig.ladder.stats().cpu_fallback_items, 5);
  EXPECT_GE(rig.ladder.stats().oom_events, 5);
  ExpectSameAsCpu(h);
}

// The last step, the CPU, running out of the host's memory: the rig.ladder hands that back (there
// is no step below), and the job it fails is retried in the "resources" class (jobs/failure.h).
TEST(OomLadderTest, TheCpuStepOutOfHostMemoryIsReturnedAndItsJobRetried) {
  Rig rig(2, 10.0);  // no frame fits: every item goes to the CPU step
  Harness h(Frames(2));
  auto host_full = [&](ComputeBackend& b, size_t begin, size_t end) -> Status {
    if (!b.is_gpu()) return Status::OutOfMemory("host memory exhausted computing luminance statistics");
    return h.fn()(b, begin, end);
  };
  std::vector<std::string> device_of;
  const Status s = rig.ladder.Run("LIGHTING", 2, static_cast<int64_t>(h.frames[0].total()),
                              LumaStatsBytesPerItem(h.frames[0]), host_full, &device_of);
  ASSERT_TRUE(s.IsOutOfMemory()) << s.ToString();
  const Outcome failed = Outcome::Failed(s);
  EXPECT_EQ(failed.ErrorClass(), "resources");
  EXPECT_TRUE(failed.error.IsTransient());
}

TEST(OomLadderTest, RepeatedFallbacksParkTheOperationOnTheCpuForACooldown) {
  Rig rig(2, 10.0, 0, [](LadderOptions& o) {
    o.max_oom_streak = 2;
    o.cooldown_ms = 60'000;
  });
  Harness h(Frames(6));
  ASSERT_TRUE(h.Run(rig.ladder).ok());
  // Two single-item OOMs, then the rest went straight to the CPU without trying.
  EXPECT_EQ(rig.ladder.stats().cooldowns, 1);
  EXPECT_TRUE(rig.ladder.CoolingDown("LIGHTING"));
  EXPECT_FALSE(rig.ladder.CoolingDown("PREPROCESS"));
  const int64_t ooms = rig.ladder.stats().oom_events;
  const int64_t fallbacks = rig.ladder.stats().cpu_fallback_items;
  EXPECT_EQ(fallbacks, 6);  // 2 that did not fit + 4 parked
  ASSERT_TRUE(h.Run(rig.ladder).ok());
  EXPECT_EQ(rig.ladder.stats().oom_events, ooms) << "cooling down: the GPU is not tried";
  EXPECT_EQ(rig.ladder.stats().cpu_fallback_items, fallbacks + 6);
  // After the cool-down the GPU is tried again.
  rig.clock.Advance(60'001);
  EXPECT_FALSE(rig.ladder.CoolingDown("LIGHTING"));
  ASSERT_TRUE(h.Run(rig.ladder).ok());
  EXPECT_GT(rig.ladder.stats().oom_events, ooms);
  ExpectSameAsCpu(h);
}

TEST(OomLadderTest, MemoryLimitCapsADeviceThatWouldOtherwiseFit) {
  // As GPU_MEMORY_LIMIT_GB would, but 1 MiB.
  Rig rig(1024, 1.0, /*fixed_batch=*/16, [](LadderOptions& o) { o.memory_limit_bytes = 1 << 20; });
  Harness h(Frames(16));
  ASSERT_TRUE(h.Run(rig.ladder).ok());
  EXPECT_GE(rig.ladder.stats().halvings, 1);
  for (const auto& d : h.device_of) EXPECT_EQ(d, "sim:0");
  ExpectSameAsCpu(h);
}

TEST(OomLadderTest, CpuOnlyOperationsNeverTouchTheDevice) {
  Rig rig(1024, 1.0, 0, [](LadderOptions& o) { o.cpu_only_ops = {"LIGHTING"}; });
  Harness h(Frames(4));
  ASSERT_TRUE(h.Run(rig.ladder).ok());
  for (const auto& d : h.device_of) EXPECT_EQ(d, "cpu");
}

TEST(OomLadderTest, OtherErrorsAreReturnedNotLaddered) {
  Rig rig(1024);
  Harness h(std::vector<cv::Mat>{cv::Mat(10, 10, CV_8UC1, cv::Scalar(0))});  // not BGR: InvalidArgument
  Status s = h.Run(rig.ladder);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(rig.ladder.stats().oom_events, 0);
}

}  // namespace
}  // namespace framemill::gpu
