// The CUDA backend's class (gpu/cuda/cuda_backend.h makes one), internal to gpu/cuda: its
// lifecycle, staging and the luma and preprocess batches are in cuda_backend.cc, the similarity
// tiles and dense flow in cuda_backend_search.cc, the patch search and hole fill in
// cuda_backend_inpaint.cc; the devices are listed by cuda_devices.cc.
#pragma once

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <new>
#include <string>

#include "gpu/compute_backend.h"
#include "engine/cuda/cuda_kernels_factory.h"
#include "gpu/cuda/cuda_backend.h"
#include "engine/cuda/cuda_status.h"
#include "gpu/cuda/device_pool.h"
#include "gpu/cuda/kernels.h"


namespace framemill::gpu::cuda {


static_assert(cuda::kLumaBins == LumaStats::kBins, "histogram sizes must agree");

inline size_t AlignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

// The sRGB->linear table read off the CPU reference itself: a 1x1 grey pixel of value
// v has sum_r == lin[v] (a float widened to double), so both sides use the same floats.
inline const std::array<float, 256>& SrgbToLinearFromReference() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) {
      cv::Mat px(1, 1, CV_8UC3, cv::Scalar(v, v, v));
      t[v] = static_cast<float>(LumaStatsCpu(px).sum_r);
    }
    return t;
  }();
  return table;
}

// memcpy, over TBB's threads when large: pageable <-> pinned copies are the host's
// share of every transfer.
inline void CopyBytes(uint8_t* dst, const uint8_t* src, size_t n) {
  constexpr size_t kPiece = size_t{1} << 20;
  if (n < 4 * kPiece) {
    std::memcpy(dst, src, n);
    return;
  }
  const size_t pieces = (n + kPiece - 1) / kPiece;
  tbb::parallel_for(size_t{0}, pieces, [&](size_t k) {
    const size_t off = k * kPiece;
    std::memcpy(dst + off, src + off, std::min(kPiece, n - off));
  });
}

inline Status CheckImages(const std::vector<cv::Mat>& images, const char* op) {
  for (const cv::Mat& m : images) {
    if (m.empty() || m.type() != CV_8UC3 || m.dims != 2)
      return Status::InvalidArgument(std::string(op) + " needs 8-bit BGR images");
  }
  return Status::OK();
}

class CudaBackend final : public ComputeBackend {
 public:
  explicit CudaBackend(int index) : index_(index) {}
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Status Init();

  std::string device() const override { return "cuda:" + std::to_string(index_); }
  bool is_gpu() const override { return true; }
  Result<DeviceInfo> Info() override;
  void SetMemoryLimit(int64_t bytes) override {
    memory_limit_ = std::max<int64_t>(0, bytes);
    device_pool_.SetLimit(memory_limit_);
  }
  int64_t LastBatchBytes() const override { return last_batch_bytes_; }
  void SetLastBatchBytes(int64_t bytes) override { last_batch_bytes_ = bytes; }
  Result<std::unique_ptr<engine::Kernels>> MakeEngineKernels() override {
    return engine::MakeCudaKernels(index_, memory_limit_);
  }
  EngineStorage Storage() const override { return EngineStorage::kModelsOwn; }

  Result<std::vector<LumaStats>> LumaStatsBatch(const std::vector<cv::Mat>& images) override;
  Result<Tensor> PreprocessBatch(const std::vector<cv::Mat>& images,
                                 const PreprocessSpec& spec) override;
  Result<TopK> TopKSimilar(const SimilarityQuery& q) override;
  Result<std::vector<cv::Mat>> DenseFlowBatch(const std::vector<FlowPair>& pairs,
                                              const FlowSpec& spec) override;
  Result<std::vector<PatchMatchResult>> PatchMatchBatch(const std::vector<PatchMatchTask>& tasks,
                                                        const PatchMatchSpec& spec) override;
  Result<std::vector<cv::Mat>> HoleFillBatch(const std::vector<HoleFillTask>& tasks,
                                             const HoleFillSpec& spec) override;

 private:
  // Appends host bytes to the device block at dev + dev_off through the upload slots.
  struct Upload {
    uint8_t* dev = nullptr;
    size_t dev_off = 0;  // where the current slot's first byte goes
    int slot = -1;
    size_t fill = 0;
  };
  Status Put(Upload& u, const uint8_t* src, size_t n);
  // Pixels [first, end) of an image, in row-major order (any row stride).
  Status PutPixels(Upload& u, const cv::Mat& m, size_t first, size_t end);
  Status Flush(Upload& u);
  // Device -> host through the download slots on d2h_; returns once `dst` holds them.
  Status Download(uint8_t* dst, const uint8_t* src, size_t n);
  Status EnsureStaging();
  // Waits for all queued work (error path), ignoring errors.
  void Drain();
  // A batch failed: drain, release cached device memory on OutOfMemory, pass it on.
  Status Fail(Status s);
  std::string What(const char* op, size_t n) const {
    return device() + ": " + op + " batch of " + std::to_string(n);
  }

  int index_;
  cudaDeviceProp props_{};
  cudaStream_t h2d_ = nullptr, compute_ = nullptr, d2h_ = nullptr;
  cudaEvent_t uploaded_ = nullptr;                  // h2d -> compute
  std::array<cudaEvent_t, 2> computed_{};           // compute -> d2h, alternating
  std::array<cudaEvent_t, kUploadSlots> up_free_{};  // an upload slot's DMA is done
  std::array<bool, kUploadSlots> up_pending_{};
  int next_up_ = 0;
  std::array<cudaEvent_t, kDownloadSlots> down_ready_{};
  int64_t last_batch_bytes_ = 0;
  // Pools before the leases they lend: members are destroyed in reverse order.
  cuda::DevicePool device_pool_;
  cuda::PinnedHostPool pinned_pool_;
  std::array<cuda::CachingPool::Lease, kUploadSlots> up_slot_;
  std::array<cuda::CachingPool::Lease, kDownloadSlots> down_slot_;
};

// Why CUDA is not usable, from cudaGetDeviceCount's error (cuda_devices.cc).
std::string NoCudaReason(cudaError_t err);

}  // namespace framemill::gpu::cuda
