// The inference engine's kernels on a CUDA device (see cuda_kernels.h), written
// against the semantics stated in engine/kernels.h and checked against CpuKernels
// by tests/gpu/device/engine_kernels_test.cc.
//
// Storage is fp32 or IEEE half (template T = float / __half); every kernel converts to
// float on load and accumulates in float.
// - Conv2d: implicit GEMM (no im2col buffer): C[c_out/g, n*h_out*w_out] = W[c_out/g,
//   c_in/g*kh*kw] x im2col(x), gathered tile by tile into shared memory, 64x64x16 tiles,
//   256 threads with a 4x4 register block each, next tile prefetched into registers
//   while the current one is multiplied; a 1x1/stride-1/no-pad variant reads the input
//   as a plain [c, h*w] matrix. Bias, residual and activation are fused into the store.
//   Convolutions with one input channel per group (depthwise) have their own direct
//   kernel: the GEMM would be 1 deep.
//   With fp16 storage the GEMM runs on tensor cores (WMMA 16x16x16, fp32 accumulators,
//   same tiles and gathers, 4 warps of 32x32) unless the object was made with
//   tensor_cores = false; the float SIMT kernel stays the fallback and is tested too.
// - MatMul/Gemm: the same tiled GEMM with plain (optionally transposed) operands.
// - ConvTranspose2d: a gather per output element (small in these models).
// - The rest: one thread per output element (grid-stride), or one warp per row for
//   reductions over a contiguous axis (Reduce, Softmax, ArgMax with inner == 1).
#include "engine/cuda/common.cuh"
#include "engine/cuda/cuda_kernels_factory.h"

namespace framemill::engine::cuda {


// ---- CudaKernels ----

Result<std::unique_ptr<CudaKernels>> CudaKernels::Create(int device, int64_t memory_limit_bytes,
                                                         bool tensor_cores) {
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    return FromCuda(err, "cudaGetDeviceCount");  // Unsupported: no driver / no device
  }
  if (device < 0 || device >= count) {
    return Status::NotFound("cuda:" + std::to_string(device) + ": no such device (" + std::to_string(count) +
                            " CUDA device(s) visible)");
  }
  std::unique_ptr<CudaKernels> k(new CudaKernels(device));
  FM_RETURN_IF_ERROR(k->Init());
  k->SetMemoryLimit(memory_limit_bytes);
  k->tensor_cores_ = tensor_cores && k->cc_major_ >= 7;
  return Result<std::unique_ptr<CudaKernels>>(std::move(k));
}

Status CudaKernels::Init() {
  const std::string what = name() + ": init";
  FM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), what);
  cudaDeviceProp props{};
  FM_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, device_), what);
  sms_ = std::max(1, props.multiProcessorCount);
  cc_major_ = props.major;
  cudaStream_t s = nullptr;
  FM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), what);
  stream_ = s;
  return Status::OK();
}

CudaKernels::~CudaKernels() {
  if (cudaSetDevice(device_) != cudaSuccess) {
    (void)cudaGetLastError();
    return;  // the runtime is gone (process exit): nothing left to free
  }
  if (stream_ != nullptr) (void)cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  for (auto& [ptr, bytes] : sizes_) (void)cudaFree(ptr);
  if (stream_ != nullptr) (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  (void)cudaGetLastError();
}

std::string CudaKernels::name() const { return "cuda:" + std::to_string(device_); }

Status CudaKernels::Prepare(engine::StorageType storage) {
  if (storage != engine::StorageType::kFloat32 && storage != engine::StorageType::kFloat16)
    return Status::Unsupported(name() + ": unknown storage type");
  storage_ = storage;
  return Status::OK();
}

Status CudaKernels::Enter(const char* what) {
  FM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), name() + ": " + what);
  return Status::OK();
}

Status CudaKernels::Launched(const char* what) {
  FM_CUDA_RETURN_IF_ERROR(cudaGetLastError(), name() + ": " + what);
  return Status::OK();
}

Status CudaKernels::Alloc(size_t bytes, void** out) {
  FM_RETURN_IF_ERROR(Enter("Alloc"));
  const size_t n = std::max<size_t>(bytes, 256);
  if (limit_ > 0 && allocated_ + static_cast<int64_t>(n) > limit_) {
    return Status::OutOfMemory(name() + ": Alloc of " + std::to_string(n) + " bytes with " +
                               std::to_string(allocated_) + " allocated: over the memory limit of " +
                               std::to_string(limit_) + " bytes");
  }
  void* p = nullptr;
  FM_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, n), name() + ": Alloc of " + std::to_string(n) + " bytes");
  sizes_[p] = n;
  allocated_ += static_cast<int64_t>(n);
  peak_ = std::max(peak_, allocated_);
  *out = p;
  return Status::OK();
}

void CudaKernels::Free(void* ptr) {
  if (ptr == nullptr) return;
  auto it = sizes_.find(ptr);
  if (it == sizes_.end()) return;  // not ours: freeing it would corrupt someone else's
  if (cudaSetDevice(device_) == cudaSuccess) {
    // Queued steps may still read or write it.
    (void)cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    (void)cudaFree(ptr);
  }
  (void)cudaGetLastError();
  allocated_ -= static_cast<int64_t>(it->second);
  sizes_.erase(it);
}

Status CudaKernels::Upload(void* dst, const void* host_src, size_t bytes) {
  FM_RETURN_IF_ERROR(Enter("Upload"));
  if (bytes == 0) return Status::OK();
  // From pageable memory the call returns once the source is staged, so the caller may
  // reuse host_src at once.
  FM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream_)),
      name() + ": Upload");
  return Status::OK();
}

Status CudaKernels::Download(void* host_dst, const void* src, size_t bytes) {
  FM_RETURN_IF_ERROR(Enter("Download"));
  if (bytes == 0) return Status::OK();
  FM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream_)),
      name() + ": Download");
  // The host buffer is the caller's as soon as we return.
  FM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), name() + ": Download");
  return Status::OK();
}

Status CudaKernels::Sync() {
  FM_RETURN_IF_ERROR(Enter("Sync"));
  FM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), name() + ": Sync");
  return Status::OK();
}


}  // namespace framemill::engine::cuda

namespace framemill::engine {

Result<std::unique_ptr<Kernels>> MakeCudaKernels(int device, int64_t memory_limit_bytes, bool tensor_cores) {
  auto k = cuda::CudaKernels::Create(device, memory_limit_bytes, tensor_cores);
  if (!k.ok()) return k.status();
  return std::unique_ptr<Kernels>(std::move(k).value());
}

}  // namespace framemill::engine

