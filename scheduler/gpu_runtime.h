// A worker's compute devices: the GPU policy's plan, the backends it chose, the batch
// tuner (remembering settled sizes in the job store) and the out-of-memory ladder.
// Made inside each worker process, after fork: a CUDA context does not survive one.
// Owned by one worker thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpu/batch_tuner.h"
#include "gpu/compute_backend.h"
#include "gpu/device_ledger.h"
#include "gpu/oom_ladder.h"
#include "gpu/policy.h"
#include "storage/job_store.h"

namespace framemill {

struct GpuRuntime {
  gpu::GpuPlan plan;
  // The plan wanted the device, but it already had gpu.workers_per_device members: this
  // worker runs on the CPU, and may join later (DeviceSeat).
  bool device_full = false;
  // The device's memory, shared with the machine's other workers on it; null with `gpu`.
  std::shared_ptr<gpu::DeviceLedger> ledger;
  std::unique_ptr<gpu::ComputeBackend> gpu;  // null when every operation runs on the CPU
  std::unique_ptr<gpu::ComputeBackend> cpu;
  std::unique_ptr<gpu::TunerMemory> memory;
  std::unique_ptr<gpu::BatchTuner> tuner;
  std::unique_ptr<gpu::OomLadder> ladder;
};

// The plan alone (queries CUDA devices unless GPU_BACKEND is cpu or sim).
gpu::GpuPlan PlanFromOptions(const gpu::GpuOptions& options);

// The directory of the device ledgers: GpuOptions::ledger_dir, or DeviceLedger::DefaultDir().
std::string LedgerDir(const gpu::GpuOptions& options);

// `store` (may be null: nothing is remembered) and `clock` must outlive the runtime.
// The device is joined on its ledger (GpuOptions::ledger_dir): a worker past the device's
// `workers_per_device` runs every operation on the CPU (its plan says why).
// Warnings (a GPU asked for but not there) are appended to `warnings`.
std::unique_ptr<GpuRuntime> MakeGpuRuntime(const gpu::GpuOptions& options, JobStore* store,
                                           const Clock* clock,
                                           std::vector<std::string>* warnings);

// A worker's way onto its machine's device after the start, for a worker that found the
// device full (GpuRuntime::device_full): it looks at the device's ledger without joining it
// (busy time, members), and joins, up to gpu.max_workers_per_device members, when the
// worker decides the device is underused (Worker: busy under gpu.join_below_busy while work
// waits). Used by one worker thread.
class DeviceSeat {
 public:
  DeviceSeat(gpu::GpuOptions options, JobStore* store, const Clock* clock);
  // The device's ledger as it stands; nullopt when it cannot be read.
  std::optional<gpu::LedgerView> Look() const;
  // A runtime on the device; null when it has max_workers_per_device members already or
  // cannot be opened.
  std::unique_ptr<GpuRuntime> Take();
  double join_below_busy() const { return options_.join_below_busy; }
  int64_t window_ms() const { return options_.join_window_ms; }

 private:
  gpu::GpuOptions options_;
  std::string device_;  // "cuda:0", "sim:0"
  JobStore* store_;
  const Clock* clock_;
};

// The seat of a worker whose runtime found the device full, when the device may grow past
// workers_per_device; null otherwise.
std::unique_ptr<DeviceSeat> MakeDeviceSeat(const gpu::GpuOptions& options, const GpuRuntime& runtime,
                                           JobStore* store, const Clock* clock);

}  // namespace framemill
