#include "gpu/oom_ladder.h"

#include <algorithm>
#include <chrono>

#include "base/time_split.h"

namespace framemill::gpu {

OomLadder::OomLadder(ComputeBackend* gpu, ComputeBackend* cpu, BatchTuner* tuner,
                     const Clock* clock, LadderOptions options)
    : gpu_(gpu), cpu_(cpu), tuner_(tuner), clock_(clock), options_(std::move(options)) {
  if (gpu_ != nullptr && options_.memory_limit_bytes > 0)
    gpu_->SetMemoryLimit(options_.memory_limit_bytes);
}

Status OomLadder::RunOnDevice(const SliceFn& run, size_t begin, size_t end) {
  // The job's device time, and the device's busy time (shared with its other workers).
  TimeSpent on_device(TimePart::kDevice);
  gpu_->WorkBegins();
  Status s = run(*gpu_, begin, end);
  gpu_->WorkEnds();
  return s;
}

bool OomLadder::CoolingDown(const std::string& op) const {
  auto it = cool_until_.find(op);
  return it != cool_until_.end() && clock_->NowMs() < it->second;
}

bool OomLadder::OnDevice(const std::string& op) const {
  return gpu_ != nullptr && options_.cpu_only_ops.count(op) == 0 && !CoolingDown(op);
}

Status OomLadder::Run(const std::string& op, size_t items, int64_t pixels_per_item,
                      int64_t guess_bytes_per_item, const SliceFn& run,
                      std::vector<std::string>* device_of) {
  device_of->assign(items, "");
  auto on_cpu = [&](size_t begin, size_t end) -> Status {
    FM_RETURN_IF_ERROR(run(*cpu_, begin, end));
    for (size_t k = begin; k < end; ++k) (*device_of)[k] = cpu_->device();
    return Status::OK();
  };
  const bool gpu_allowed = gpu_ != nullptr && options_.cpu_only_ops.count(op) == 0;  // else CPU
  const TunerKey key{op, gpu_allowed ? gpu_->device() : cpu_->device(),
                     SizeBucket(pixels_per_item)};
  size_t i = 0;
  int size = 0;  // 0: ask the tuner
  while (i < items) {
    if (!gpu_allowed) return on_cpu(i, items);
    if (CoolingDown(op)) {
      // Parked after repeated failures: these would have run on the device.
      stats_.cpu_fallback_items += static_cast<int64_t>(items - i);
      return on_cpu(i, items);
    }
    if (size == 0) size = tuner_->Next(key, DeviceBudget(), guess_bytes_per_item);
    size = std::max(1, std::min<int>(size, static_cast<int>(items - i)));
    auto t0 = std::chrono::steady_clock::now();
    Status s = RunOnDevice(run, i, i + static_cast<size_t>(size));
    if (s.ok()) {
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      tuner_->Observe(key, size, secs, gpu_->LastBatchBytes());
      for (size_t k = i; k < i + static_cast<size_t>(size); ++k) (*device_of)[k] = gpu_->device();
      i += static_cast<size_t>(size);
      streak_[op] = 0;
      size = 0;
      continue;
    }
    if (!s.IsOutOfMemory()) return s;
    // The backend has released the batch's memory: retry the same items smaller.
    ++stats_.oom_events;
    tuner_->ObserveOutOfMemory(key, size);
    if (size > 1) {
      size /= 2;
      ++stats_.halvings;
      continue;
    }
    // Not even one item fits: this one runs on the CPU.
    FM_RETURN_IF_ERROR(on_cpu(i, i + 1));
    CountCpuFallback(op);
    ++i;
    size = 0;
  }
  return Status::OK();
}

int64_t OomLadder::DeviceBudget() const {
  int64_t budget = 0;
  if (auto info = gpu_->Info(); info.ok()) budget = std::max<int64_t>(1, info->free_bytes);
  if (options_.memory_limit_bytes > 0)
    budget = budget > 0 ? std::min(budget, options_.memory_limit_bytes) : options_.memory_limit_bytes;
  return budget;
}

void OomLadder::CountCpuFallback(const std::string& op) {
  ++stats_.cpu_fallback_items;
  if (++streak_[op] >= options_.max_oom_streak) {
    cool_until_[op] = clock_->NowMs() + options_.cooldown_ms;
    streak_[op] = 0;
    ++stats_.cooldowns;
  }
}

CpuLadder::CpuLadder(const Clock* clock)
    : cpu_(MakeCpuBackend()),
      tuner_(TunerOptions{}, nullptr),
      ladder_(nullptr, cpu_.get(), &tuner_, clock, LadderOptions{}) {}

std::string OneDevice(const std::vector<std::string>& parts) {
  std::string common;
  for (const std::string& d : parts) {
    if (d.empty()) continue;
    if (!common.empty() && d != common) return "cpu";
    common = d;
  }
  return common.empty() ? "cpu" : common;
}

}  // namespace framemill::gpu
