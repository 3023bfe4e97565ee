// A worker's device as it changes over a run: the ladder its device operations go through
// (the run's, a CPU-only one of its own, or one taken through a seat when the device is
// underused), the ledger of that device, and what the worker records of it in the store
// (out-of-memory events, CPU fallbacks, the planned peak and the busy time).
#pragma once

#include <cstdint>
#include <memory>

#include "base/clock.h"
#include "gpu/device_ledger.h"
#include "gpu/oom_ladder.h"
#include "scheduler/gpu_runtime.h"
#include "scheduler/worker_options.h"
#include "storage/job_store.h"

namespace framemill {

class WorkerDevice {
 public:
  // Borrowed: store, clock and options (the worker's) must outlive this.
  WorkerDevice(JobStore* store, const Clock* clock, const WorkerOptions* options);

  gpu::OomLadder* ladder() const { return ladder_; }
  gpu::DeviceLedger* ledger() const { return ledger_; }
  bool on_device() const { return ladder_->gpu() != nullptr; }

  // A worker with a seat joins the device when it was busy under the seat's
  // join_below_busy over its window (gpu.join_window_ms) and work is waiting (called between
  // batches). True when it joined: from now on its device operations run there.
  bool MaybeJoin(WorkerStats* stats);
  // Records the device's out-of-memory events and CPU fallbacks since `before`, its peak, and
  // its busy time when due (or `busy_now`); adds the events to *stats.
  void RecordEvents(const gpu::LadderStats& before, bool busy_now, WorkerStats* stats);

 private:
  void Use(std::unique_ptr<GpuRuntime> runtime, WorkerStats* stats);

  JobStore* store_;
  const WorkerOptions* options_;
  std::unique_ptr<gpu::CpuLadder> own_ladder_;  // when options.ladder is null
  gpu::OomLadder* ladder_ = nullptr;
  gpu::DeviceLedger* ledger_ = nullptr;
  std::unique_ptr<GpuRuntime> joined_;     // the device taken through options.seat
  int64_t recorded_peak_mb_ = -1;          // the device peak last written to the store
  int64_t busy_from_ms_ = -1;              // the device's busy time when this worker joined it
  int64_t busy_recorded_at_ = -1'000'000;  // steady ms the busy time was last written
  int64_t seat_looked_at_ = -1;            // steady ms of the last look at the device
  int64_t seat_busy_ns_ = 0;               // its busy time then
};

}  // namespace framemill
