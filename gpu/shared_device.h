// A device backend whose memory is planned on a DeviceLedger (gpu/device_ledger.h), the
// one budget of every worker process on that device. Each operation reserves its batch's
// bytes (gpu/ops.h's per-item figures, times `cost`) before it runs and releases them
// after; the inference engine's allocations (weights, arenas) are reserved while they
// live. A reservation the ledger refuses is OutOfMemory, which the ladder handles as a
// device's own. Info() tells the tuner what this worker may plan: its share of the
// device, less what it holds, never more than is free.
//
// The simulated device is CPU arithmetic behind this wrapper; a CUDA device is wrapped
// the same way, so the CUDA allocations are also bounded by the device's real memory.
#pragma once

#include <memory>
#include <optional>

#include "gpu/compute_backend.h"
#include "gpu/device_ledger.h"

namespace framemill::gpu {

// `device` does the work; `ledger` holds its memory (shared with the caller, who reads
// its peak). `cost` multiplies each operation's bytes (the sim's FRAMEMILL_SIM_COST);
// `storage`: how the engine stores on it (GpuOptions::precision: GPU_PRECISION forces fp16 or
// fp32, unset is each model's own); nullopt: as the device prefers (CUDA each model's own,
// the simulated device fp32).
std::unique_ptr<ComputeBackend> ShareDevice(std::unique_ptr<ComputeBackend> device,
                                            std::shared_ptr<DeviceLedger> ledger, double cost = 1.0,
                                            std::optional<EngineStorage> storage = std::nullopt);

// The simulated device on `ledger` (its total is the VRAM): what MakeSimBackend
// builds on a private ledger, for `framemill run`'s workers sharing one.
std::unique_ptr<ComputeBackend> MakeSharedSimBackend(std::shared_ptr<DeviceLedger> ledger,
                                                     double cost_multiplier = 1.0,
                                                     std::optional<EngineStorage> storage = std::nullopt);

}  // namespace framemill::gpu
