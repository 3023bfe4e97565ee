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
#include "gpu/oom_ladder.h"
#include "gpu/policy.h"
#include "storage/job_store.h"

namespace framemill {

struct GpuRuntime {
  gpu::GpuPlan plan;
  std::unique_ptr<gpu::ComputeBackend> gpu;  // null when every operation runs on the CPU
  std::unique_ptr<gpu::ComputeBackend> cpu;
  std::unique_ptr<gpu::TunerMemory> memory;
  std::unique_ptr<gpu::BatchTuner> tuner;
  std::unique_ptr<gpu::OomLadder> ladder;
};

// The plan alone (queries CUDA devices unless GPU_BACKEND is cpu or sim).
gpu::GpuPlan PlanFromOptions(const gpu::GpuOptions& options);

// `store` (may be null: nothing is remembered) and `clock` must outlive the runtime.
// Warnings (a GPU asked for but not there) are appended to `warnings`.
std::unique_ptr<GpuRuntime> MakeGpuRuntime(const gpu::GpuOptions& options, JobStore* store,
                                           const Clock* clock,
                                           std::vector<std::string>* warnings);

}  // namespace framemill
