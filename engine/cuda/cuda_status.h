// The one place that turns a cudaError_t into a Status, for the device code of the engine
// (engine/cuda/) and of the GPU layer (gpu/cuda/). This header includes the CUDA runtime: it
// is included from those two folders only (scripts/check-deps.sh).
//   cudaErrorMemoryAllocation            -> Status::OutOfMemory (typed; the ladder
//                                           retries smaller, nothing matches strings)
//   no driver / no device / no kernel image for this GPU -> Status::Unsupported
//   everything else                      -> Status::Internal
// Non-sticky errors are cleared from the runtime's last-error slot so that the next
// call does not report them again; a sticky error (the context is corrupt: illegal
// address, launch failure, ...) cannot be cleared, and its message says so.
#pragma once

#include <cuda_runtime_api.h>

#include <string_view>

#include "base/status.h"

namespace framemill {

// OK for cudaSuccess; otherwise the mapped Status, its message "<what>: <error
// name>: <error string>". Clears the runtime's last error.
Status FromCuda(cudaError_t err, std::string_view what);

// True for errors after which the CUDA context is unusable for this process.
bool IsStickyCudaError(cudaError_t err);

}  // namespace framemill

// Evaluates a CUDA runtime call; on failure returns its mapped Status.
#define FM_CUDA_RETURN_IF_ERROR(call, what)                                   \
  do {                                                                        \
    const cudaError_t _fm_err = (call);                                       \
    if (_fm_err != cudaSuccess) return ::framemill::FromCuda(_fm_err, (what)); \
  } while (0)
