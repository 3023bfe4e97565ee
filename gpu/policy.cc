#include "gpu/policy.h"


#include <algorithm>
#include <stdexcept>

namespace framemill::gpu {

const std::vector<std::string>& DeviceOperations() {
  static const std::vector<std::string> ops = {
      "LIGHTING", "PREPROCESS", "CATEGORIZE", "FACE_DETECTION", "FACE_EMBEDDING",
      "FACE_CLUSTERING", "SEGMENTATION", "INPAINTING", "POSE", "MOTION", "AUDIO_SYNC"};
  return ops;
}

bool HasGpuImplementation(const std::string& op) {
  // The neural operations run on the inference engine (gpu/engine) on a device.
  // FACE_CLUSTERING: the exact similarity tiles; MOTION: our pyramidal Lucas-Kanade flow;
  // AUDIO_SYNC: its face detector and facemesh on the engine; INPAINTING: the exemplar
  // fill's patch search (gpu/cuda/patch_match.cu).
  return op == "LIGHTING" || op == "PREPROCESS" || op == "CATEGORIZE" ||
         op == "FACE_DETECTION" || op == "FACE_EMBEDDING" || op == "POSE" ||
         op == "SEGMENTATION" || op == "FACE_CLUSTERING" || op == "MOTION" || op == "AUDIO_SYNC" ||
         op == "INPAINTING";
}

const OpDecision& GpuPlan::For(const std::string& op) const {
  for (const OpDecision& d : ops)
    if (d.op == op) return d;
  throw std::out_of_range("no such operation: " + op);
}

bool GpuPlan::AnyGpu() const {
  return std::any_of(ops.begin(), ops.end(), [](const OpDecision& d) { return d.use_gpu; });
}

GpuPlan PlanDevices(const GpuOptions& c, const std::vector<DeviceInfo>& cuda_devices,
                    const std::string& why_none) {
  GpuPlan plan;
  plan.device_index = c.device_id;
  // Which GPU device, if any, the GPU-capable operations could use.
  std::string gpu_device, no_gpu;
  if (c.backend == "cpu") {
    plan.backend = "cpu";
    no_gpu = "GPU_BACKEND=cpu";
  } else if (c.backend == "sim") {
    plan.backend = "sim";
    gpu_device = "sim:0";
  } else {  // auto or cuda
    plan.devices = cuda_devices;
    if (cuda_devices.empty()) {
      plan.backend = "cpu";
      plan.no_device_reason = why_none.empty() ? "no CUDA device found" : why_none;
      no_gpu = plan.no_device_reason;
      if (c.backend == "cuda")
        plan.warnings.push_back("GPU_BACKEND=cuda but " + no_gpu + ": every operation runs on the CPU");
    } else if (c.device_id >= static_cast<int>(cuda_devices.size())) {
      plan.backend = "cpu";
      no_gpu = "GPU_DEVICE_ID=" + std::to_string(c.device_id) + " but only " +
               std::to_string(cuda_devices.size()) + " CUDA device(s)";
      plan.warnings.push_back(no_gpu + ": every operation runs on the CPU");
    } else {
      plan.backend = "cuda";
      gpu_device = "cuda:" + std::to_string(c.device_id);
    }
  }

  for (const std::string& op : DeviceOperations()) {
    OpDecision d;
    d.op = op;
    d.device = "cpu";
    d.gpu_implemented = HasGpuImplementation(op);
    DeviceChoice choice = DeviceChoice::kAuto;
    std::string source = "auto";
    if (auto it = c.ops.find(op); it != c.ops.end() && it->second != DeviceChoice::kAuto) {
      choice = it->second;
      source = op + "_GPU=" + (choice == DeviceChoice::kGpu ? "true" : "false");
    } else if (c.all != DeviceChoice::kAuto) {
      choice = c.all;
      source = std::string("ALL_GPU=") + (choice == DeviceChoice::kGpu ? "true" : "false");
    }
    if (choice == DeviceChoice::kCpu) {
      d.reason = source;
    } else if (!d.gpu_implemented) {
      d.reason = "no GPU implementation of this operation in this build";
      if (choice == DeviceChoice::kGpu)
        plan.warnings.push_back(source + " but " + d.reason + ": it runs on the CPU");
    } else if (gpu_device.empty()) {
      d.reason = (choice == DeviceChoice::kGpu ? source + " but " : "auto: ") + no_gpu;
      // One warning for an explicit request, not one per operation of ALL_GPU=true.
      if (choice == DeviceChoice::kGpu && source != "ALL_GPU=true" && c.backend != "cuda")
        plan.warnings.push_back(source + " but " + no_gpu + ": it runs on the CPU");
    } else {
      d.use_gpu = true;
      d.run_on_device = true;
      d.device = gpu_device;
      d.reason = choice == DeviceChoice::kGpu ? source : "auto: " + gpu_device + " available";
    }
    plan.ops.push_back(std::move(d));
  }
  if (c.all == DeviceChoice::kGpu && gpu_device.empty() && c.backend != "cuda")
    plan.warnings.push_back("ALL_GPU=true but " + no_gpu + ": operations run on the CPU");
  return plan;
}

}  // namespace framemill::gpu
