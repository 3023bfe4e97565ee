#include "gpu/policy.h"

#include <gtest/gtest.h>

namespace framemill::gpu {
namespace {

std::vector<DeviceInfo> OneH100() {
  DeviceInfo d;
  d.index = 0;
  d.name = "NVIDIA H100";
  d.total_bytes = 80LL << 30;
  d.free_bytes = 79LL << 30;
  return {d};
}

GpuOptions Cfg(std::map<std::string, DeviceChoice> ops = {},
               DeviceChoice all = DeviceChoice::kAuto, std::string backend = "auto") {
  GpuOptions c;
  c.ops = std::move(ops);
  c.all = all;
  c.backend = std::move(backend);
  return c;
}

TEST(GpuPolicyTest, AutoUsesTheCudaDeviceForOperationsWithAGpuImplementation) {
  GpuPlan p = PlanDevices(Cfg(), OneH100(), "");
  EXPECT_EQ(p.backend, "cuda");
  EXPECT_TRUE(p.For("LIGHTING").use_gpu);
  EXPECT_EQ(p.For("LIGHTING").device, "cuda:0");
  EXPECT_EQ(p.For("LIGHTING").reason, "auto: cuda:0 available");
  EXPECT_TRUE(p.For("PREPROCESS").use_gpu);
  EXPECT_TRUE(p.For("POSE").use_gpu);  // the inference engine
  EXPECT_EQ(p.For("POSE").device, "cuda:0");
  EXPECT_TRUE(p.For("MOTION").use_gpu);           // our dense flow kernels
  EXPECT_TRUE(p.For("FACE_CLUSTERING").use_gpu);  // the similarity tiles
  EXPECT_TRUE(p.For("INPAINTING").use_gpu);       // the exemplar fill's patch search
  EXPECT_EQ(p.For("INPAINTING").reason, "auto: cuda:0 available");
  EXPECT_TRUE(p.warnings.empty());
}

TEST(GpuPolicyTest, AutoWithoutADeviceRunsOnTheCpuQuietly) {
  GpuPlan p = PlanDevices(Cfg(), {}, "no CUDA driver");
  EXPECT_EQ(p.backend, "cpu");
  EXPECT_FALSE(p.AnyGpu());
  EXPECT_EQ(p.For("LIGHTING").reason, "auto: no CUDA driver");
  EXPECT_TRUE(p.warnings.empty());
}

TEST(GpuPolicyTest, OperationFlagOverridesAllGpu) {
  GpuPlan off = PlanDevices(Cfg({{"LIGHTING", DeviceChoice::kCpu}}, DeviceChoice::kGpu), OneH100(), "");
  EXPECT_FALSE(off.For("LIGHTING").use_gpu);
  EXPECT_EQ(off.For("LIGHTING").reason, "LIGHTING_GPU=false");
  EXPECT_TRUE(off.For("PREPROCESS").use_gpu);
  EXPECT_EQ(off.For("PREPROCESS").reason, "ALL_GPU=true");

  GpuPlan on = PlanDevices(Cfg({{"LIGHTING", DeviceChoice::kGpu}}, DeviceChoice::kCpu), OneH100(), "");
  EXPECT_TRUE(on.For("LIGHTING").use_gpu);
  EXPECT_EQ(on.For("LIGHTING").reason, "LIGHTING_GPU=true");
  EXPECT_FALSE(on.For("PREPROCESS").use_gpu);
  EXPECT_EQ(on.For("PREPROCESS").reason, "ALL_GPU=false");
}

TEST(GpuPolicyTest, AnExplicitOperationAutoDefersToAllGpu) {
  GpuPlan p = PlanDevices(Cfg({{"LIGHTING", DeviceChoice::kAuto}}, DeviceChoice::kCpu), OneH100(), "");
  EXPECT_FALSE(p.For("LIGHTING").use_gpu);
  EXPECT_EQ(p.For("LIGHTING").reason, "ALL_GPU=false");
}

TEST(GpuPolicyTest, AskingForAMissingGpuFallsBackToTheCpuWithOneWarning) {
  GpuPlan p = PlanDevices(Cfg({{"LIGHTING", DeviceChoice::kGpu}}), {}, "no CUDA device found");
  EXPECT_FALSE(p.For("LIGHTING").use_gpu);
  EXPECT_EQ(p.For("LIGHTING").device, "cpu");
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_EQ(p.warnings[0], "LIGHTING_GPU=true but no CUDA device found: it runs on the CPU");

  GpuPlan all = PlanDevices(Cfg({}, DeviceChoice::kGpu), {}, "no CUDA device found");
  EXPECT_FALSE(all.AnyGpu());
  // One line for ALL_GPU, plus one per operation that has no GPU implementation at all.
  EXPECT_EQ(all.warnings.back(), "ALL_GPU=true but no CUDA device found: operations run on the CPU");
}

TEST(GpuPolicyTest, BackendCudaWithoutADeviceWarnsOnce) {
  GpuPlan p = PlanDevices(Cfg({}, DeviceChoice::kAuto, "cuda"), {}, "CUDA driver too old");
  EXPECT_FALSE(p.AnyGpu());
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("GPU_BACKEND=cuda but CUDA driver too old"), std::string::npos);
}

TEST(GpuPolicyTest, BackendCpuKeepsEverythingOnTheCpuEvenWithADevice) {
  GpuPlan p = PlanDevices(Cfg({}, DeviceChoice::kAuto, "cpu"), OneH100(), "");
  EXPECT_FALSE(p.AnyGpu());
  EXPECT_TRUE(p.devices.empty());
  EXPECT_EQ(p.For("LIGHTING").reason, "auto: GPU_BACKEND=cpu");
}

TEST(GpuPolicyTest, SimIsUsedOnlyWhenAskedFor) {
  GpuPlan sim = PlanDevices(Cfg({}, DeviceChoice::kAuto, "sim"), {}, "");
  EXPECT_EQ(sim.backend, "sim");
  EXPECT_EQ(sim.For("LIGHTING").device, "sim:0");
  // auto never picks the simulated device.
  GpuPlan aut = PlanDevices(Cfg(), {}, "no CUDA device found");
  EXPECT_NE(aut.backend, "sim");
}

TEST(GpuPolicyTest, DeviceIdBeyondTheDevicesFallsBackWithAWarning) {
  GpuOptions c = Cfg();
  c.device_id = 3;
  GpuPlan p = PlanDevices(c, OneH100(), "");
  EXPECT_FALSE(p.AnyGpu());
  ASSERT_FALSE(p.warnings.empty());
  EXPECT_NE(p.warnings[0].find("GPU_DEVICE_ID=3 but only 1 CUDA device(s)"), std::string::npos);
  c.device_id = 0;
  EXPECT_TRUE(PlanDevices(c, OneH100(), "").AnyGpu());
}

TEST(GpuPolicyTest, EveryContractOperationHasADecision) {
  GpuPlan p = PlanDevices(Cfg(), OneH100(), "");
  EXPECT_EQ(p.ops.size(), 11u);
  for (const char* op : {"LIGHTING", "PREPROCESS", "CATEGORIZE", "FACE_DETECTION",
                         "FACE_EMBEDDING", "FACE_CLUSTERING", "SEGMENTATION", "INPAINTING", "POSE",
                         "MOTION", "AUDIO_SYNC"})
    EXPECT_FALSE(p.For(op).reason.empty()) << op;
}

TEST(GpuPolicyTest, GpuPrecisionAutoIsEachModelsOwnAndTheOthersForceOne) {
  GpuOptions o;
  EXPECT_EQ(o.precision, "auto");
  EXPECT_EQ(StorageOf(o), EngineStorage::kModelsOwn);
  o.precision = "fp16";
  EXPECT_EQ(StorageOf(o), EngineStorage::kFp16);
  o.precision = "fp32";
  EXPECT_EQ(StorageOf(o), EngineStorage::kFp32);
}

}  // namespace
}  // namespace framemill::gpu
