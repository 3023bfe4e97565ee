// Chosen by CMake when CUDA is not built in (leveldb's env_posix.cc pattern): the
// CUDA entry points exist and say why there is no device.
#include "gpu/compute_backend.h"
#include "engine/cuda/cuda_kernels_factory.h"

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

namespace framemill::engine {

Result<std::unique_ptr<Kernels>> MakeCudaKernels(int, int64_t, bool) {
  return Status::Unsupported("this framemill was built without CUDA");
}

}  // namespace framemill::engine
