// A worker's compute devices: the GPU policy's plan, the backends it chose, the batch
// tuner (remembering settled sizes in the job store) and the out-of-memory ladder.
// Made inside each worker process, after fork: a CUDA context does not survive one.
// Owned by one worker thread.
#pragma once

#include <memory>
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

}  // namespace framemill
