// The CUDA devices this machine has (CudaDevices), read without creating a context.
#include "gpu/cuda/cuda_backend_impl.h"

namespace framemill::gpu {


namespace cuda {
std::string NoCudaReason(cudaError_t err) {
  std::string why = FromCuda(err, "cudaGetDeviceCount").message();
  if (err == cudaErrorInsufficientDriver || err == cudaErrorStubLibrary) {
    why += " (no usable NVIDIA driver: libcuda.so.1 missing, or older than this CUDA " +
           std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10) +
           " runtime needs)";
  }
  return why;
}

}  // namespace cuda

namespace {

// Free device memory without a CUDA context: NVML, from the driver (libnvidia-ml.so.1),
// loaded at run time and declared here (its ABI is stable; the toolkit here has no
// nvml.h). cudaMemGetInfo would create a context (hundreds of MiB) on every device
// just to list them. -1 when NVML or the device is not available.
class Nvml {
 public:
  Nvml() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) return;
    init_ = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlInit_v2"));
    shutdown_ = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlShutdown"));
    by_bus_ = reinterpret_cast<int (*)(const char*, void**)>(dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
    memory_ = reinterpret_cast<int (*)(void*, Memory*)>(dlsym(lib_, "nvmlDeviceGetMemoryInfo"));
    ok_ = init_ != nullptr && shutdown_ != nullptr && by_bus_ != nullptr && memory_ != nullptr && init_() == 0;
  }
  ~Nvml() {
    if (ok_) shutdown_();
    if (lib_ != nullptr) dlclose(lib_);
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  int64_t FreeBytes(int cuda_index) {
    if (!ok_) return -1;
    char bus[64] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_index) != cudaSuccess) {
      (void)cudaGetLastError();
      return -1;
    }
    void* dev = nullptr;
    Memory m{};
    if (by_bus_(bus, &dev) != 0 || memory_(dev, &m) != 0) return -1;
    return static_cast<int64_t>(m.free);
  }

 private:
  struct Memory {  // nvmlMemory_t
    unsigned long long total, free, used;
  };
  void* lib_ = nullptr;
  bool ok_ = false;
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  int (*by_bus_)(const char*, void**) = nullptr;
  int (*memory_)(void*, Memory*) = nullptr;
};

}  // namespace

bool CudaCompiledIn() { return true; }

std::vector<DeviceInfo> CudaDevices(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why != nullptr) *why = cuda::NoCudaReason(err);
    return {};
  }
  if (count == 0) {
    if (why != nullptr) *why = "no CUDA device found";
    return {};
  }
  std::vector<DeviceInfo> out;
  std::string errors;
  Nvml nvml;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaError_t e = cudaGetDeviceProperties(&p, i); e != cudaSuccess) {
      errors += FromCuda(e, "cuda:" + std::to_string(i)).message() + "; ";
      continue;
    }
    DeviceInfo d;
    d.index = i;
    d.name = p.name;
    d.total_bytes = static_cast<int64_t>(p.totalGlobalMem);
    // From NVML; 0 (unknown) without it. A backend's Info() measures it exactly.
    d.free_bytes = std::max<int64_t>(0, nvml.FreeBytes(i));
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    d.multiprocessors = p.multiProcessorCount;
    out.push_back(std::move(d));
  }
  if (out.empty() && why != nullptr) *why = errors.empty() ? "no usable CUDA device" : errors;
  return out;
}

}  // namespace framemill::gpu
