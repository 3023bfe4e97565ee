// Which device each operation runs on, and why: a pure function of the GPU settings
// (ALL_GPU, <OPERATION>_GPU, GPU_BACKEND, GPU_DEVICE_ID) and the devices found, so
// every combination is testable without a GPU. Asking for a GPU that is not there
// falls back to the CPU with a warning, never a failure. Plain values.
#pragma once

#include <string>
#include <vector>

#include "configs/config.h"
#include "gpu/compute_backend.h"

namespace framemill::gpu {

struct OpDecision {
  std::string op;          // LIGHTING, PREPROCESS, ...
  bool use_gpu = false;
  std::string device;      // "cuda:0", "sim:0" or "cpu"
  std::string reason;
  bool gpu_implemented = false;
};

struct GpuPlan {
  std::string backend;       // "cuda", "sim" or "cpu": the device kind GPU ops use
  int device_index = 0;
  std::vector<DeviceInfo> devices;  // CUDA devices found
  std::string no_device_reason;     // why none, when none
  std::vector<OpDecision> ops;      // one per Operations(), in that order
  std::vector<std::string> warnings;
  const OpDecision& For(const std::string& op) const;
  bool AnyGpu() const;
};

// Operations with a GPU implementation in this build.
bool HasGpuImplementation(const std::string& op);

// `cuda_devices` and `why_none` are what CudaDevices() reported (ignored unless
// GPU_BACKEND is auto or cuda).
GpuPlan PlanDevices(const GpuConfig& config, const std::vector<DeviceInfo>& cuda_devices,
                    const std::string& why_none);

}  // namespace framemill::gpu
