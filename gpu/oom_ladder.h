// The out-of-memory ladder, the one place that decides what an OutOfMemory means:
// release the batch, halve it and retry the same items; at batch size 1 run those
// items on the CPU. After `max_oom_streak` consecutive CPU fallbacks an operation
// stays on the CPU for a cool-down, then tries the GPU again. Every step is counted.
// Thread-safety: one ladder per worker thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "gpu/batch_tuner.h"
#include "gpu/compute_backend.h"

namespace framemill::gpu {

struct LadderStats {
  int64_t oom_events = 0;      // OutOfMemory statuses seen
  int64_t halvings = 0;
  int64_t cpu_fallback_items = 0;  // items run on the CPU instead of the device
                                   // (did not fit alone, or during a cool-down)
  int64_t cooldowns = 0;       // times an operation was parked on the CPU
};

struct LadderOptions {
  int max_oom_streak = 3;       // consecutive size-1 OOMs before a cool-down
  int64_t cooldown_ms = 60'000;
  int64_t memory_limit_bytes = 0;  // GPU_MEMORY_LIMIT_GB; 0 = the device's free memory
  std::set<std::string> cpu_only_ops;  // operations the policy keeps on the CPU
};

class OomLadder {
 public:
  // `gpu` may be null (CPU only). `cpu` must not be null. All borrowed.
  OomLadder(ComputeBackend* gpu, ComputeBackend* cpu, BatchTuner* tuner, const Clock* clock,
            LadderOptions options);

  // Runs `op` (named as in <OP>_GPU) over every item, in batches the tuner sizes,
  // stepping down on OutOfMemory as above. `run` computes a contiguous slice
  // [begin, end) of the items on a backend and stores its outputs; `bytes_per_item`
  // is the tuner's first guess for item i. `device_of[i]` receives the device that
  // produced item i. Errors other than OutOfMemory are returned as they are.
  using SliceFn = std::function<Status(ComputeBackend& backend, size_t begin, size_t end)>;
  Status Run(const std::string& op, size_t items, int64_t pixels_per_item,
             int64_t guess_bytes_per_item, const SliceFn& run,
             std::vector<std::string>* device_of);

  // One item through Run: `call(backend)` gives a batch of one, whose result is returned;
  // *device gets who computed it (unchanged where nothing ran).
  template <class T>
  Result<T> RunOne(const std::string& op, int64_t pixels, int64_t guess_bytes,
                   const std::function<Result<std::vector<T>>(ComputeBackend&)>& call,
                   std::string* device) {
    T out;
    std::vector<std::string> device_of;
    FM_RETURN_IF_ERROR(Run(op, 1, pixels, guess_bytes,
                           [&](ComputeBackend& backend, size_t, size_t) -> Status {
                             auto r = call(backend);
                             if (!r.ok()) return r.status();
                             out = std::move(r->front());
                             return Status::OK();
                           },
                           &device_of));
    if (!device_of.empty()) *device = device_of.front();
    return out;
  }

  const LadderStats& stats() const { return stats_; }
  // True while `op` is parked on the CPU after repeated failures.
  bool CoolingDown(const std::string& op) const;
  // Whether the next Run of `op` would try the device. Callers that only batch for
  // the device's sake go item by item otherwise (better cache locality on a CPU).
  bool OnDevice(const std::string& op) const;
  // The device backend (null when CPU only): callers keep per-device state, such as an
  // inference engine's loaded weights, keyed by it.
  ComputeBackend* gpu() const { return gpu_; }

 private:
  // One slice on the device, its time counted as the device's (base/time_split.h) and the
  // device marked busy while it runs.
  Status RunOnDevice(const SliceFn& run, size_t begin, size_t end);
  // What the device lets this worker plan now (on a shared device: its share, less what it
  // holds), within memory_limit_bytes. Nothing left is a budget of one byte, not "unknown":
  // the batch shrinks to 1.
  int64_t DeviceBudget() const;
  // Not even one item fits: it ran on the CPU; after max_oom_streak in a row, the operation
  // cools down on the CPU.
  void CountCpuFallback(const std::string& op);

  ComputeBackend* gpu_;
  ComputeBackend* cpu_;
  BatchTuner* tuner_;
  const Clock* clock_;
  LadderOptions options_;
  LadderStats stats_;
  std::map<std::string, int> streak_;
  std::map<std::string, int64_t> cool_until_;
};

// A ladder with no device, for callers that have no runtime (a worker given none, a
// stage run alone): every operation on the CPU. Owns its backend and tuner.
class CpuLadder {
 public:
  explicit CpuLadder(const Clock* clock);
  OomLadder* get() { return &ladder_; }

 private:
  std::unique_ptr<ComputeBackend> cpu_;
  BatchTuner tuner_;
  OomLadder ladder_;
};

// The one device an outcome records for work that ran in parts (a ladder's `device_of`, or
// the parts of a stage): their common device, or "cpu" when they differ (the ladder moved
// some to the CPU: the CPU is what finished the result) or none ran. "" parts did not run.
std::string OneDevice(const std::vector<std::string>& parts);

}  // namespace framemill::gpu
