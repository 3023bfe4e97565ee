// CudaKernels: the inference engine's steps (engine/kernels.h) on one NVIDIA device,
// with our own kernels (no cuDNN, no cuBLAS: they would not fit the GPU bundle).
//
// Every call is queued on one stream owned by the object; Sync() waits and reports the
// first error. Memory is plain cudaMalloc, counted against an optional limit (a request
// over it, or one the device refuses, is Status::OutOfMemory, mapped by cuda_status.cc);
// the engine allocates its arenas once per plan, so no caching is needed here.
// Callers outside the device code use engine::MakeCudaKernels (engine/cuda/cuda_kernels_factory.h).
// No CUDA types in this header. Thread-safety: one thread at a time (any thread: each
// call selects the device first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "base/status.h"
#include "engine/kernels.h"

namespace framemill::engine::cuda {

class CudaKernels final : public engine::Kernels {
 public:
  // The kernels on CUDA device `device` (NotFound for no such device, Unsupported
  // without a driver). 0 = no memory limit. tensor_cores: fp16 GEMMs (Conv2d, MatMul)
  // on WMMA; false keeps them on the float SIMT kernel (both are tested).
  static Result<std::unique_ptr<CudaKernels>> Create(int device, int64_t memory_limit_bytes = 0,
                                                     bool tensor_cores = true);
  ~CudaKernels() override;
  CudaKernels(const CudaKernels&) = delete;
  CudaKernels& operator=(const CudaKernels&) = delete;

  // Allocations that would take allocated_bytes() over `bytes` fail with OutOfMemory.
  void SetMemoryLimit(int64_t bytes) { limit_ = bytes < 0 ? 0 : bytes; }
  int64_t memory_limit() const { return limit_; }
  int64_t allocated_bytes() const { return allocated_; }
  int64_t peak_allocated_bytes() const { return peak_; }
  bool tensor_cores() const { return tensor_cores_; }

  std::string name() const override;
  Status Prepare(engine::StorageType storage) override;

  Status Alloc(size_t bytes, void** out) override;
  void Free(void* ptr) override;
  Status Upload(void* dst, const void* host_src, size_t bytes) override;
  Status Download(void* host_dst, const void* src, size_t bytes) override;
  Status Sync() override;

  Status Conv2d(const engine::Conv2dParams& p, const void* x, const void* w, const void* bias,
                const void* residual, void* y, void* scratch) override;
  Status ConvTranspose2d(const engine::ConvTranspose2dParams& p, const void* x, const void* w,
                         const void* bias, void* y, void* scratch) override;
  Status Pool2d(const engine::Pool2dParams& p, const void* x, void* y) override;
  Status Binary(const engine::BinaryParams& p, const void* a, const void* b, void* out) override;
  Status Unary(const engine::UnaryParams& p, const void* x, void* y) override;
  Status Resize(const engine::ResizeParams& p, const void* x, void* y) override;
  Status Pad(const engine::PadParams& p, const void* x, void* y) override;
  Status Concat(const engine::ConcatParams& p, const void* const* inputs, void* y) override;
  Status Transpose(const engine::TransposeParams& p, const void* x, void* y) override;
  Status Slice(const engine::SliceParams& p, const void* x, void* y) override;
  Status Reduce(const engine::ReduceParams& p, const void* x, void* y) override;
  Status Softmax(const engine::SoftmaxParams& p, const void* x, void* y) override;
  Status MatMul(const engine::MatMulParams& p, const void* a, const void* b, const void* c,
                void* y, void* scratch) override;
  Status ArgMax(const engine::ArgMaxParams& p, const void* x, void* y) override;
  Status Copy(const void* src, void* dst, int64_t elements) override;

 private:
  explicit CudaKernels(int device) : device_(device) {}
  Status Init();
  // Selects the device (the calling thread may differ from the last one's).
  Status Enter(const char* what);
  // The launch status of the kernel just queued.
  Status Launched(const char* what);
  bool fp16() const { return storage_ == engine::StorageType::kFloat16; }

  int device_;
  void* stream_ = nullptr;  // cudaStream_t
  int sms_ = 1;
  int cc_major_ = 0;
  bool tensor_cores_ = true;
  engine::StorageType storage_ = engine::StorageType::kFloat32;
  int64_t limit_ = 0, allocated_ = 0, peak_ = 0;
  std::unordered_map<void*, size_t> sizes_;  // live allocations
};

}  // namespace framemill::engine::cuda
