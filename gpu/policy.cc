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

const OpDecision& GpuPlan::For(const std::string& op) const {
  for (const OpDecision& d : ops)
    if (d.op == op) return d;
  throw std::out_of_range("no such operation: " + op);
}

bool GpuPlan::AnyGpu() const {
  return std::any_of(ops.begin(), ops.end(), [](const OpDecision& d) { return d.use_gpu; });
}

namespace {

// Which device, if any, the device operations could use ("" for none, *no_gpu then saying why);
// sets the plan's backend, devices and warnings.
std::string ChooseDevice(const GpuOptions& c, const std::vector<DeviceInfo>& cuda_devices,
                         const std::string& why_none, GpuPlan* plan, std::string* no_gpu) {
  if (c.backend == "cpu") {
    plan->backend = "cpu";
    *no_gpu = "GPU_BACKEND=cpu";
    return "";
  }
  if (c.backend == "sim") {
    plan->backend = "sim";
    return "sim:0";
  }
  // auto or cuda
  plan->devices = cuda_devices;
  plan->backend = "cpu";
  if (cuda_devices.empty()) {
    plan->no_device_reason = why_none.empty() ? "no CUDA device found" : why_none;
    *no_gpu = plan->no_device_reason;
    if (c.backend == "cuda")
      plan->warnings.push_back("GPU_BACKEND=cuda but " + *no_gpu + ": every operation runs on the CPU");
    return "";
  }
  if (c.device_id >= static_cast<int>(cuda_devices.size())) {
    *no_gpu = "GPU_DEVICE_ID=" + std::to_string(c.device_id) + " but only " +
              std::to_string(cuda_devices.size()) + " CUDA device(s)";
    plan->warnings.push_back(*no_gpu + ": every operation runs on the CPU");
    return "";
  }
  plan->backend = "cuda";
  return "cuda:" + std::to_string(c.device_id);
}

}  // namespace

GpuPlan PlanDevices(const GpuOptions& c, const std::vector<DeviceInfo>& cuda_devices,
                    const std::string& why_none) {
  GpuPlan plan;
  plan.device_index = c.device_id;
  std::string no_gpu;
  const std::string gpu_device = ChooseDevice(c, cuda_devices, why_none, &plan, &no_gpu);
  for (const std::string& op : DeviceOperations()) {
    OpDecision d;
    d.op = op;
    d.device = "cpu";
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
