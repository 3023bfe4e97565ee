#include "cli/command.h"

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "cli/options.h"
#include "gpu/compute_backend.h"
#include "gpu/policy.h"
#include "scheduler/gpu_runtime.h"

namespace framemill {

int CmdGpu(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  const gpu::GpuOptions g = env->config.run.gpu;
  gpu::GpuPlan plan = PlanFromOptions(g);
  // Free/total of the device the plan uses (sim reports its budget).
  std::vector<gpu::DeviceInfo> shown = plan.devices;
  if (plan.backend == "sim") {
    auto sim = gpu::MakeSimBackend(g.sim_vram_mb);
    if (auto i = sim->Info(); i.ok()) shown.push_back(*i);
  }
  if (f.json) {
    nlohmann::json j;
    j["cuda_compiled_in"] = gpu::CudaCompiledIn();
    j["backend"] = plan.backend;
    j["devices"] = nlohmann::json::array();
    for (const auto& d : shown)
      j["devices"].push_back({{"index", d.index}, {"name", d.name}, {"free_bytes", d.free_bytes},
                              {"total_bytes", d.total_bytes},
                              {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)}});
    if (!plan.no_device_reason.empty()) j["no_device_reason"] = plan.no_device_reason;
    j["memory_limit_gb"] = g.memory_limit_gb;
    j["batch_size"] = g.batch_size == 0 ? nlohmann::json("tuned") : nlohmann::json(g.batch_size);
    j["operations"] = nlohmann::json::object();
    for (const auto& d : plan.ops)
      j["operations"][d.op] = {{"device", d.device}, {"gpu", d.use_gpu}, {"reason", d.reason},
                               {"gpu_implemented", d.gpu_implemented}};
    j["warnings"] = plan.warnings;
    std::cout << JsonDump(j, 2) << "\n";
    return ToInt(ExitCode::kOk);
  }
  std::printf("CUDA built in: %s\n", gpu::CudaCompiledIn() ? "yes" : "no");
  if (shown.empty()) {
    std::printf("devices: none (%s)\n", plan.no_device_reason.empty() ? "GPU_BACKEND=cpu"
                                                                        : plan.no_device_reason.c_str());
  }
  for (const auto& d : shown) {
    std::printf("device %s%d: %s, %.1f GiB free of %.1f GiB", plan.backend == "sim" ? "sim:" : "cuda:",
                d.index, d.name.c_str(), d.free_bytes / 1073741824.0, d.total_bytes / 1073741824.0);
    if (d.cc_major > 0) std::printf(", compute capability %d.%d", d.cc_major, d.cc_minor);
    std::printf("\n");
  }
  std::printf("memory limit: %s; batch size: %s\n\n",
              g.memory_limit_gb > 0 ? (std::to_string(g.memory_limit_gb) + " GB").c_str() : "none",
              g.batch_size > 0 ? std::to_string(g.batch_size).c_str() : "tuned to free memory");
  std::printf("%-16s %-8s %s\n", "operation", "device", "why");
  for (const auto& d : plan.ops) std::printf("%-16s %-8s %s\n", d.op.c_str(), d.device.c_str(), d.reason.c_str());
  for (const auto& w : plan.warnings) std::printf("\nwarning: %s", w.c_str());
  if (!plan.warnings.empty()) std::printf("\n");
  return ToInt(ExitCode::kOk);
}

}  // namespace framemill
