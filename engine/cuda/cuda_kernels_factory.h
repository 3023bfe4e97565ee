// The CUDA implementation of engine::Kernels, for callers outside the device code (the
// engine's users, tests, gpu_bench). Defined in engine/cuda/cuda_kernels.cu when CUDA is
// built in, and in engine/cuda/cuda_unavailable.cc (always Unsupported) when it is not, so
// callers need no #ifdef. No CUDA types here: the one header of engine/cuda/ that any folder
// may include (scripts/check-deps.sh).
#pragma once

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "engine/kernels.h"

namespace framemill::engine {

// The kernels on CUDA device `device`, queued on a stream of their own. Unsupported when
// built without CUDA or without a usable driver, NotFound for no such device.
// memory_limit_bytes > 0 caps what Alloc() hands out in total (a shared card, or a test
// of the out-of-memory path): past it Alloc() returns OutOfMemory, as when the device
// itself is full. tensor_cores: with fp16 storage, Conv2d and MatMul run on tensor cores
// (WMMA, fp32 accumulation); false keeps them on the plain float kernel (for comparison).
Result<std::unique_ptr<Kernels>> MakeCudaKernels(int device, int64_t memory_limit_bytes = 0,
                                                 bool tensor_cores = true);

}  // namespace framemill::engine
