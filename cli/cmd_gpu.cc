#include "cli/command.h"

#include <cstdio>
#include <iostream>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "cli/options.h"
#include "gpu/compute_backend.h"
#include "gpu/device_ledger.h"
#include "gpu/policy.h"
#include "scheduler/gpu_runtime.h"

namespace framemill {
namespace {

constexpr int64_t kMiB = 1 << 20;

std::string DeviceName(const gpu::GpuPlan& plan, const gpu::DeviceInfo& d) {
  return (plan.backend == "sim" ? "sim:" : "cuda:") + std::to_string(d.index);
}

// How a device is shared now: its ledger's live members (the worker processes on it) and
// each one's share. Empty when no worker has it open.
std::optional<gpu::LedgerView> Sharing(const gpu::GpuOptions& g, const std::string& device) {
  auto view = gpu::DeviceLedger::Read(LedgerDir(g), device);
  if (!view.ok() || !view->has_value() || (*view)->members.empty()) return std::nullopt;
  return **view;
}

nlohmann::json SharingJson(const gpu::GpuOptions& g, const std::optional<gpu::LedgerView>& v) {
  nlohmann::json j = {{"workers_per_device", g.workers_per_device},
                      {"workers", nlohmann::json::array()}};
  if (v) {
    j["share_mb"] = v->ShareBytes() / kMiB;
    j["planned_mb"] = v->planned_bytes / kMiB;
    j["peak_planned_mb"] = v->peak_planned_bytes / kMiB;
    for (const gpu::LedgerMember& m : v->members)
      j["workers"].push_back({{"pid", m.pid}, {"planned_mb", m.planned_bytes / kMiB}});
  }
  return j;
}

void PrintSharing(const gpu::GpuOptions& g, const std::optional<gpu::LedgerView>& v) {
  if (!v) {
    std::printf("  shared: no worker on it now; up to %d worker processes of a run use it "
                "(gpu.workers_per_device), each planning within an even share\n",
                g.workers_per_device);
    return;
  }
  std::printf("  shared by %zu worker process(es) (at most %d), %lld MiB each; %lld MiB planned "
              "now, at most %lld at once\n",
              v->members.size(), g.workers_per_device,
              static_cast<long long>(v->ShareBytes() / kMiB),
              static_cast<long long>(v->planned_bytes / kMiB),
              static_cast<long long>(v->peak_planned_bytes / kMiB));
  for (const gpu::LedgerMember& m : v->members)
    std::printf("    pid %d: %lld MiB planned\n", m.pid,
                static_cast<long long>(m.planned_bytes / kMiB));
}

// A device as `gpu` shows it, with how it is shared now (read once).
struct ShownDevice {
  gpu::DeviceInfo info;
  std::optional<gpu::LedgerView> sharing;
};

// The devices the plan uses (the simulated one reports its budget, less what its workers
// have planned).
std::vector<ShownDevice> ShownDevices(const gpu::GpuOptions& g, const gpu::GpuPlan& plan) {
  std::vector<gpu::DeviceInfo> infos = plan.devices;
  if (plan.backend == "sim") {
    auto sim = gpu::MakeSimBackend(g.sim_vram_mb);
    if (auto i = sim->Info(); i.ok()) infos.push_back(*i);
  }
  std::vector<ShownDevice> out;
  for (gpu::DeviceInfo& d : infos) {
    ShownDevice s{d, Sharing(g, DeviceName(plan, d))};
    if (plan.backend == "sim" && s.sharing) {
      s.info.total_bytes = s.sharing->total_bytes;
      s.info.free_bytes = s.info.total_bytes - s.sharing->planned_bytes;
    }
    out.push_back(std::move(s));
  }
  return out;
}

void PrintGpuJson(const gpu::GpuOptions& g, const std::string& cpu_precision, const gpu::GpuPlan& plan,
                  const std::vector<ShownDevice>& shown) {
  nlohmann::json j;
  j["cuda_compiled_in"] = gpu::CudaCompiledIn();
  j["backend"] = plan.backend;
  j["devices"] = nlohmann::json::array();
  for (const ShownDevice& s : shown) {
    const gpu::DeviceInfo& d = s.info;
    j["devices"].push_back({{"index", d.index}, {"name", d.name}, {"free_bytes", d.free_bytes},
                            {"total_bytes", d.total_bytes},
                            {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
                            {"sharing", SharingJson(g, s.sharing)}});
  }
  if (!plan.no_device_reason.empty()) j["no_device_reason"] = plan.no_device_reason;
  j["memory_limit_gb"] = g.memory_limit_gb;
  j["batch_size"] = g.batch_size == 0 ? nlohmann::json("tuned") : nlohmann::json(g.batch_size);
  j["operations"] = nlohmann::json::object();
  for (const auto& d : plan.ops)
    j["operations"][d.op] = {{"device", d.device}, {"gpu", d.use_gpu}, {"reason", d.reason},
                             {"gpu_implemented", d.gpu_implemented}};
  j["precision"] = g.precision;
  j["model_precision"] = ModelPrecisionsJson(g.precision, cpu_precision);
  j["warnings"] = plan.warnings;
  std::cout << JsonDump(j, 2) << "\n";
}

void PrintGpuText(const gpu::GpuOptions& g, const std::string& cpu_precision, const gpu::GpuPlan& plan,
                  const std::vector<ShownDevice>& shown) {
  std::printf("CUDA built in: %s\n", gpu::CudaCompiledIn() ? "yes" : "no");
  if (shown.empty()) {
    std::printf("devices: none (%s)\n", plan.no_device_reason.empty() ? "GPU_BACKEND=cpu"
                                                                        : plan.no_device_reason.c_str());
  }
  for (const ShownDevice& s : shown) {
    const gpu::DeviceInfo& d = s.info;
    std::printf("device %s%d: %s, %.1f GiB free of %.1f GiB", plan.backend == "sim" ? "sim:" : "cuda:",
                d.index, d.name.c_str(), d.free_bytes / 1073741824.0, d.total_bytes / 1073741824.0);
    if (d.cc_major > 0) std::printf(", compute capability %d.%d", d.cc_major, d.cc_minor);
    std::printf("\n");
    PrintSharing(g, s.sharing);
  }
  std::printf("memory limit: %s; batch size: %s\n\n",
              g.memory_limit_gb > 0 ? (std::to_string(g.memory_limit_gb) + " GB").c_str() : "none",
              g.batch_size > 0 ? std::to_string(g.batch_size).c_str() : "tuned to free memory");
  std::printf("%-16s %-8s %s\n", "operation", "device", "why");
  for (const auto& d : plan.ops) std::printf("%-16s %-8s %s\n", d.op.c_str(), d.device.c_str(), d.reason.c_str());
  PrintModelPrecisions(g.precision, cpu_precision);
  for (const auto& w : plan.warnings) std::printf("\nwarning: %s", w.c_str());
  if (!plan.warnings.empty()) std::printf("\n");
}

}  // namespace

int CmdGpu(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  const gpu::GpuOptions g = env->config.run.gpu;
  const gpu::GpuPlan plan = PlanFromOptions(g);
  const std::vector<ShownDevice> shown = ShownDevices(g, plan);
  if (f.json) PrintGpuJson(g, env->config.stage.cpu_precision, plan, shown);
  else PrintGpuText(g, env->config.stage.cpu_precision, plan, shown);
  return ToInt(ExitCode::kOk);
}

}  // namespace framemill
