#include "scheduler/gpu_runtime.h"

#include <spdlog/spdlog.h>

namespace framemill {
namespace {

// The tuner's memory, kept in the job store so a restarted run does not probe again.
class StoreTunerMemory : public gpu::TunerMemory {
 public:
  explicit StoreTunerMemory(JobStore* store) : store_(store) {}
  std::optional<gpu::TunedBatch> Load(const gpu::TunerKey& key) override {
    auto r = store_->LoadTuning(key.op, key.device, key.size_bucket);
    if (!r.ok() || !r->has_value()) return std::nullopt;
    return gpu::TunedBatch{(*r)->batch, (*r)->bytes_per_item};
  }
  void Save(const gpu::TunerKey& key, const gpu::TunedBatch& t) override {
    Status s = store_->SaveTuning({key.op, key.device, key.size_bucket, t.batch, t.bytes_per_item});
    if (!s.ok()) spdlog::warn("could not save the tuned batch size: {}", s.ToString());
  }

 private:
  JobStore* store_;
};

}  // namespace

gpu::GpuPlan PlanFromOptions(const gpu::GpuOptions& config) {
  std::vector<gpu::DeviceInfo> devices;
  std::string why;
  if (config.backend == "auto" || config.backend == "cuda") devices = gpu::CudaDevices(&why);
  return gpu::PlanDevices(config, devices, why);
}

std::unique_ptr<GpuRuntime> MakeGpuRuntime(const gpu::GpuOptions& config, JobStore* store,
                                           const Clock* clock,
                                           std::vector<std::string>* warnings) {
  auto rt = std::make_unique<GpuRuntime>();
  rt->plan = PlanFromOptions(config);
  for (const auto& w : rt->plan.warnings) warnings->push_back(w);
  rt->cpu = gpu::MakeCpuBackend();
  if (rt->plan.AnyGpu()) {
    if (rt->plan.backend == "sim") {
      rt->gpu = gpu::MakeSimBackend(config.sim_vram_mb, config.sim_cost);
    } else {
      auto cuda = gpu::MakeCudaBackend(config.device_id);
      if (cuda.ok()) {
        rt->gpu = std::move(cuda).value();
      } else {
        warnings->push_back("cannot use cuda:" + std::to_string(config.device_id) + " (" +
                            cuda.status().message() + "): every operation runs on the CPU");
      }
    }
  }
  if (store != nullptr) rt->memory = std::make_unique<StoreTunerMemory>(store);
  gpu::TunerOptions to;
  to.fixed_batch = config.batch_size;
  rt->tuner = std::make_unique<gpu::BatchTuner>(to, rt->memory.get());
  gpu::LadderOptions lo;
  lo.memory_limit_bytes = static_cast<int64_t>(config.memory_limit_gb * (1LL << 30));
  for (const gpu::OpDecision& d : rt->plan.ops)
    if (!d.use_gpu) lo.cpu_only_ops.insert(d.op);
  rt->ladder = std::make_unique<gpu::OomLadder>(rt->gpu.get(), rt->cpu.get(), rt->tuner.get(),
                                                clock, lo);
  return rt;
}

}  // namespace framemill
