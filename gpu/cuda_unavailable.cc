// Chosen by CMake when CUDA is not built in (leveldb's env_posix.cc pattern): the GPU
// layer's CUDA entry points exist and say why there is no device (the engine's own:
// engine/cuda/cuda_unavailable.cc).
#include "gpu/compute_backend.h"

namespace framemill::gpu {

bool CudaCompiledIn() { return false; }

std::vector<DeviceInfo> CudaDevices(std::string* why) {
  if (why != nullptr) *why = "this framemill was built without CUDA (no nvcc at build time)";
  return {};
}

Result<std::unique_ptr<ComputeBackend>> MakeCudaBackend(int) {
  return Status::Unsupported("this framemill was built without CUDA");
}

}  // namespace framemill::gpu
