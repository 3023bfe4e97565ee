// RunModel: a model's batch through the out-of-memory ladder, on the simulated device
// (our engine's reference kernels behind a VRAM budget) or on the CPU (cv::dnn), with the
// real converted models (FRAMEMILL_MODELS; skipped when absent unless
// FRAMEMILL_REQUIRE_MODELS=1).
#include "models/run_model.h"

#include <gtest/gtest.h>

#include <memory>

#include <opencv2/imgcodecs.hpp>

#include "base/clock.h"
#include "gpu/batch_tuner.h"
#include "gpu/compute_backend.h"
#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill::models {
namespace {

std::vector<cv::Mat> Photos() {
  return {cv::imread(testing::SampleData("messi5.jpg")),
          cv::imread(testing::SampleData("basketball1.png")),
          cv::imread(testing::SampleData("fruits.jpg"))};
}

// A worker's ladder over `device`, every operation allowed on it.
struct DeviceLadder {
  explicit DeviceLadder(std::unique_ptr<gpu::ComputeBackend> d)
      : device(std::move(d)),
        cpu(gpu::MakeCpuBackend()),
        tuner(gpu::TunerOptions{}, nullptr),
        ladder(device.get(), cpu.get(), &tuner, SystemClock(), gpu::LadderOptions{}) {}
  std::unique_ptr<gpu::ComputeBackend> device, cpu;
  gpu::BatchTuner tuner;
  gpu::OomLadder ladder;
};

// A cache, the model's CPU runner, and its outputs on the photos without a ladder.
class RunModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FM_REQUIRE_MODEL("centernet");  // 8 MB of weights, 34 MiB with a batch's activations
    auto cpu = cache_.Borrow("centernet");
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    cpu_ = std::make_unique<ModelCache::Lease>(std::move(cpu).value());
    std::string device;
    auto ref = RunModel(cache_, **cpu_, photos_, nullptr, &device);
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    EXPECT_EQ(device, "cpu");
    ref_ = std::move(ref).value();
  }
  // The photos through RunModel on `dl`'s ladder, expected to run on `device`; empty where
  // the run failed (the failure is recorded).
  BatchOutputs RunOn(DeviceLadder& dl, const std::string& device) {
    std::string ran_on;
    auto out = RunModel(cache_, **cpu_, photos_, &dl.ladder, &ran_on);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(ran_on, device);
    return out.ok() ? std::move(out).value() : BatchOutputs{};
  }
  ModelCache cache_{testing::ModelsDir()};
  std::unique_ptr<ModelCache::Lease> cpu_;
  const std::vector<cv::Mat> photos_ = Photos();
  BatchOutputs ref_;
};

TEST_F(RunModelTest, WithoutALadderTheCpuRunnerRunsTheBatch) {
  EXPECT_EQ(ref_.size(), photos_.size());
  EXPECT_EQ(cache_.Created("centernet"), 1);
}

TEST_F(RunModelTest, OnADeviceThatHoldsItTheEngineRunsAndAgreesWithTheCpu) {
  DeviceLadder roomy(gpu::MakeSimBackend(/*vram_mb=*/1024));
  const BatchOutputs out = RunOn(roomy, "sim:0");
  ASSERT_EQ(out.size(), ref_.size());
  EXPECT_LT(testing::RelMaxDiff(out, ref_), 1e-3);
  EXPECT_EQ(roomy.ladder.stats().oom_events, 0);
  EXPECT_EQ(cache_.Created("centernet"), 2) << "the CPU runner and one engine, reused";
}

TEST_F(RunModelTest, ADeviceTooSmallForTheWeightsFallsBackToTheCpuItemByItem) {
  DeviceLadder tiny(gpu::MakeSimBackend(/*vram_mb=*/4));
  const BatchOutputs out = RunOn(tiny, "cpu");
  ASSERT_EQ(out.size(), ref_.size());
  for (size_t i = 0; i < ref_.size(); ++i)
    for (size_t k = 0; k < ref_[i].size(); ++k)
      EXPECT_EQ(out[i][k].data, ref_[i][k].data) << "image " << i << " output " << k;
  EXPECT_GT(tiny.ladder.stats().oom_events, 0);
  EXPECT_EQ(tiny.ladder.stats().cpu_fallback_items, 3);
}

}  // namespace
}  // namespace framemill::models
