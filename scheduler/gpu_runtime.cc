#include "scheduler/gpu_runtime.h"

#include <spdlog/spdlog.h>

#include "gpu/shared_device.h"

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

std::string LedgerDir(const gpu::GpuOptions& config) {
  return config.ledger_dir.empty() ? gpu::DeviceLedger::DefaultDir() : config.ledger_dir;
}

namespace {

// Device memory a worker's CUDA context takes before any model: 596 MiB per process on an
// H100 with driver 580 (bench/README.md, "N worker processes on one device").
constexpr int64_t kCudaContextBytes = 596LL << 20;

// Every operation of `plan` on the CPU, for `why`.
void AllOnCpu(gpu::GpuPlan* plan, const std::string& why) {
  for (gpu::OpDecision& d : plan->ops) {
    if (!d.use_gpu) continue;
    d.use_gpu = false;
    d.device = "cpu";
    d.reason = why;
  }
}

// The name of the device the plan uses: its ledger's and the store's.
std::string DeviceName(const gpu::GpuOptions& config, const gpu::GpuPlan& plan) {
  return plan.backend == "sim" ? "sim:0" : "cuda:" + std::to_string(config.device_id);
}

// Joins the device's ledger, then opens the device (a CUDA context costs ~600 MiB of it:
// a worker past the device's workers_per_device never opens one) and makes the shared
// backend. rt->gpu stays null, the plan on the CPU, when the device has its workers.

void ShareTheDevice(const gpu::GpuOptions& config, GpuRuntime* rt,
                    std::vector<std::string>* warnings) {
  const bool sim = rt->plan.backend == "sim";
  const std::string name = DeviceName(config, rt->plan);
  int64_t total = static_cast<int64_t>(config.sim_vram_mb) << 20;
  if (!sim) total = rt->plan.devices.at(static_cast<size_t>(config.device_id)).total_bytes;
  auto joined = gpu::DeviceLedger::Join(LedgerDir(config), name, total, config.workers_per_device);
  if (joined.status().IsBusy()) {
    AllOnCpu(&rt->plan, joined.status().message() + ": this worker runs on the CPU");
    rt->device_full = true;
    return;
  }
  if (!joined.ok()) {
    warnings->push_back(joined.status().message() + ": this worker plans " + name +
                        "'s memory as if it were alone on it");
    rt->ledger = gpu::DeviceLedger::Private(name, total);
  } else {
    rt->ledger = std::move(joined).value();
  }
  if (sim) {
    rt->gpu = gpu::MakeSharedSimBackend(rt->ledger, config.sim_cost, gpu::StorageOf(config));
    return;
  }
  auto cuda = gpu::MakeCudaBackend(config.device_id);
  if (!cuda.ok()) {
    warnings->push_back("cannot use " + name + " (" + cuda.status().message() +
                        "): every operation runs on the CPU");
    rt->ledger.reset();
    return AllOnCpu(&rt->plan, "the device could not be opened");
  }
  // The context is device memory too, held for the worker's life; planned like the rest so
  // that the members' plans add up to what the device really has.
  if (Status s = rt->ledger->Reserve(kCudaContextBytes, "a CUDA context"); !s.ok())
    warnings->push_back(s.message());
  rt->gpu = gpu::ShareDevice(std::move(cuda).value(), rt->ledger, 1.0, gpu::StorageOf(config));
}

}  // namespace

std::unique_ptr<GpuRuntime> MakeGpuRuntime(const gpu::GpuOptions& config, JobStore* store,
                                           const Clock* clock,
                                           std::vector<std::string>* warnings) {
  auto rt = std::make_unique<GpuRuntime>();
  rt->plan = PlanFromOptions(config);
  for (const auto& w : rt->plan.warnings) warnings->push_back(w);
  rt->cpu = gpu::MakeCpuBackend();
  if (rt->plan.AnyGpu()) ShareTheDevice(config, rt.get(), warnings);
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

DeviceSeat::DeviceSeat(gpu::GpuOptions options, JobStore* store, const Clock* clock)
    : options_(std::move(options)), store_(store), clock_(clock) {
  device_ = DeviceName(options_, PlanFromOptions(options_));
  options_.workers_per_device = options_.max_workers_per_device;  // what Take may reach
}

std::optional<gpu::LedgerView> DeviceSeat::Look() const {
  auto view = gpu::DeviceLedger::Read(LedgerDir(options_), device_);
  if (!view.ok()) return std::nullopt;
  return *view;
}

std::unique_ptr<GpuRuntime> DeviceSeat::Take() {
  std::vector<std::string> warnings;
  auto rt = MakeGpuRuntime(options_, store_, clock_, &warnings);
  for (const auto& w : warnings) spdlog::warn("{}", w);
  if (rt->gpu == nullptr) return nullptr;
  return rt;
}

std::unique_ptr<DeviceSeat> MakeDeviceSeat(const gpu::GpuOptions& options, const GpuRuntime& runtime,
                                           JobStore* store, const Clock* clock) {
  if (!runtime.device_full || options.max_workers_per_device <= options.workers_per_device)
    return nullptr;
  return std::make_unique<DeviceSeat>(options, store, clock);
}

}  // namespace framemill
