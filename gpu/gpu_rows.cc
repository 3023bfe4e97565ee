// The GPU settings: each gpu.* key and its variable (ALL_GPU, <OPERATION>_GPU, GPU_*) bound
// to its field of GpuOptions.
#include <algorithm>
#include <cctype>

#include "gpu/policy.h"

namespace framemill::gpu {
namespace {

// auto, or a boolean asking for the GPU (true) or the CPU (false).
const Choices<DeviceChoice>& ChoiceNames() {
  static const Choices<DeviceChoice> names = {
      {"auto", DeviceChoice::kAuto}, {"true", DeviceChoice::kGpu}, {"false", DeviceChoice::kCpu},
      {"1", DeviceChoice::kGpu},     {"0", DeviceChoice::kCpu},    {"yes", DeviceChoice::kGpu},
      {"no", DeviceChoice::kCpu}};
  return names;
}

// <OPERATION>_GPU: an entry of the ops map (absent: auto).
OptionRow OperationRow(const std::string& op, GpuOptions* o) {
  std::string key = "gpu.ops." + op;
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  OptionRow r{key, op + "_GPU", "", nullptr, nullptr};
  r.set = [op, o](const std::string& v, const std::string& where) -> Status {
    auto choice = ParseChoice(v, ChoiceNames(), {}, where);
    if (!choice.ok()) return choice.status();
    o->ops[op] = *choice;
    return Status::OK();
  };
  r.get = [op, o] {
    auto it = o->ops.find(op);
    return ChoiceName(it == o->ops.end() ? DeviceChoice::kAuto : it->second, ChoiceNames());
  };
  return r;
}

}  // namespace

EngineStorage StorageOf(const GpuOptions& o) {
  if (o.precision == "fp16") return EngineStorage::kFp16;
  if (o.precision == "fp32") return EngineStorage::kFp32;
  return EngineStorage::kModelsOwn;
}

void AddGpuRows(GpuOptions* o, OptionRows* rows) {
  rows->push_back(ChoiceRow("gpu.all", "ALL_GPU", "", &o->all, ChoiceNames()));
  for (const std::string& op : DeviceOperations()) rows->push_back(OperationRow(op, o));
  const std::string only_cuda = "only CUDA is supported (use auto, cuda, cpu or sim)";
  rows->push_back(TextChoiceRow("gpu.backend", "GPU_BACKEND", "", &o->backend,
                                {"auto", "cuda", "cpu", "sim"},
                                {{"rocm", only_cuda}, {"mps", only_cuda}}));
  rows->push_back(IntRow("gpu.device_id", "GPU_DEVICE_ID", "", {&o->device_id}, 0, 1023));
  rows->push_back(TextChoiceRow("gpu.precision", "GPU_PRECISION", "", &o->precision, {"auto", "fp16", "fp32"}, {}));
  rows->push_back(NumberRow("gpu.memory_limit_gb", "GPU_MEMORY_LIMIT_GB", &o->memory_limit_gb, 0,
                            1e6));
  rows->push_back(IntRow("gpu.batch_size", "GPU_BATCH_SIZE", "", {&o->batch_size}, 0, 65536));
  rows->push_back(IntRow("gpu.sim_vram_mb", "FRAMEMILL_SIM_VRAM_MB", "", {&o->sim_vram_mb}, 1,
                         10'000'000));
  rows->push_back(NumberRow("gpu.sim_cost", "FRAMEMILL_SIM_COST", &o->sim_cost, 0.001, 1e6));
  rows->push_back(IntRow("gpu.workers_per_device", "FRAMEMILL_GPU_WORKERS_PER_DEVICE", "",
                         {&o->workers_per_device}, 1, 64));
  rows->push_back(IntRow("gpu.max_workers_per_device", "FRAMEMILL_GPU_MAX_WORKERS_PER_DEVICE", "",
                         {&o->max_workers_per_device}, 1, 64));
  rows->push_back(NumberRow("gpu.join_below_busy", "FRAMEMILL_GPU_JOIN_BELOW_BUSY",
                            &o->join_below_busy, 0, 2));
  rows->push_back(IntRow("gpu.join_window_ms", "", "", {&o->join_window_ms}, 10, 3'600'000));
  rows->push_back(OptionalTextRow("gpu.ledger_dir", "FRAMEMILL_DEVICE_LEDGER_DIR", &o->ledger_dir));
}

}  // namespace framemill::gpu
