// Chosen by CMake when CUDA is not built in (leveldb's env_posix.cc pattern): the engine's
// CUDA kernels' entry point exists and says why there is none.
#include "engine/cuda/cuda_kernels_factory.h"

namespace framemill::engine {

Result<std::unique_ptr<Kernels>> MakeCudaKernels(int, int64_t, bool) {
  return Status::Unsupported("this framemill was built without CUDA");
}

}  // namespace framemill::engine
