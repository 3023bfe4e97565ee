// The reference Kernels (engine/kernels.h) on the host: plain loops, fp32
// accumulation, parallel with TBB. "Device" memory is host memory. With fp16 storage
// every stored value goes through IEEE half (gpu::FloatToHalf), so the error fp16
// storage causes can be studied without a GPU; the CUDA kernels are tested against it.
// Thread-safety: one thread at a time (as every Kernels); internally parallel.
#pragma once

#include <memory>

#include "engine/kernels.h"

namespace framemill::engine {

// `memory_limit` > 0 makes Alloc refuse (OutOfMemory) once the live allocations would
// exceed it: a host stand-in for a device of that size.
std::unique_ptr<Kernels> MakeCpuKernels(int64_t memory_limit = 0);

}  // namespace framemill::engine
