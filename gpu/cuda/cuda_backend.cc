// The CUDA backend: LumaStats and Preprocess on one NVIDIA device.
//
// A batch is packed, slice by slice, into pinned staging slots and uploaded into one
// device block from the DevicePool: [table | pixels | pad | outputs]. Three streams:
// h2d (uploads), compute (kernels), d2h (downloads), joined by events, so the DMA of
// slice k+1 overlaps the kernel of slice k, and (Preprocess) the download of slice k-1
// overlaps both. The host thread packs the next slot while the DMA of the previous
// one runs. Results come back through pinned download slots.
//
// Memory: the device block is the batch's whole footprint (LastBatchBytes(), what the
// batch tuner learns from); a batch over SetMemoryLimit() or over what the device can
// allocate returns OutOfMemory after releasing the pool's cached memory, so the OOM
// ladder can retry smaller. Pinned staging is a constant 48 MiB per backend.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <new>
#include <string>

#include "gpu/compute_backend.h"
#include "gpu/engine/cuda_kernels_factory.h"
#include "gpu/cuda/cuda_backend.h"
#include "gpu/cuda/cuda_status.h"
#include "gpu/cuda/device_pool.h"
#include "gpu/cuda/kernels.h"

namespace framemill::gpu {
namespace {

using cuda::FromCuda;
using cuda::kDownloadSlots;
using cuda::kSliceBytes;
using cuda::kSlotBytes;
using cuda::kUploadSlots;

static_assert(cuda::kLumaBins == LumaStats::kBins, "histogram sizes must agree");

size_t AlignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

// The sRGB->linear table read off the CPU reference itself: a 1x1 grey pixel of value
// v has sum_r == lin[v] (a float widened to double), so both sides use the same floats.
const std::array<float, 256>& SrgbToLinearFromReference() {
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
void CopyBytes(uint8_t* dst, const uint8_t* src, size_t n) {
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

Status CheckImages(const std::vector<cv::Mat>& images, const char* op) {
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

CudaBackend::~CudaBackend() {
  if (cudaSetDevice(index_) != cudaSuccess) {
    (void)cudaGetLastError();
    return;  // the runtime is gone (process exit): nothing left to free
  }
  Drain();
  for (auto& l : up_slot_) l.reset();
  for (auto& l : down_slot_) l.reset();
  pinned_pool_.Release();
  device_pool_.Release();
  auto destroy_event = [](cudaEvent_t e) {
    if (e != nullptr) (void)cudaEventDestroy(e);
  };
  destroy_event(uploaded_);
  for (cudaEvent_t e : computed_) destroy_event(e);
  for (cudaEvent_t e : up_free_) destroy_event(e);
  for (cudaEvent_t e : down_ready_) destroy_event(e);
  for (cudaStream_t s : {h2d_, compute_, d2h_})
    if (s != nullptr) (void)cudaStreamDestroy(s);
  (void)cudaGetLastError();
}

Status CudaBackend::Init() {
  const std::string me = device();
  FM_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_), me + ": cudaSetDevice");
  FM_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props_, index_), me + ": cudaGetDeviceProperties");
  for (cudaStream_t* s : {&h2d_, &compute_, &d2h_})
    FM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking), me + ": cudaStreamCreate");
  auto make_event = [&](cudaEvent_t* e) {
    return FromCuda(cudaEventCreateWithFlags(e, cudaEventDisableTiming), me + ": cudaEventCreate");
  };
  FM_RETURN_IF_ERROR(make_event(&uploaded_));
  for (cudaEvent_t& e : computed_) FM_RETURN_IF_ERROR(make_event(&e));
  for (cudaEvent_t& e : up_free_) FM_RETURN_IF_ERROR(make_event(&e));
  for (cudaEvent_t& e : down_ready_) FM_RETURN_IF_ERROR(make_event(&e));
  // Also proves the module has an image for this device (else NoKernelImageForDevice).
  FM_CUDA_RETURN_IF_ERROR(cuda::UploadSrgbToLinear(SrgbToLinearFromReference().data()),
                          me + ": uploading the sRGB table");
  return Status::OK();
}

Result<DeviceInfo> CudaBackend::Info() {
  const std::string me = device();
  FM_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_), me + ": cudaSetDevice");
  size_t free_b = 0, total_b = 0;
  FM_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_b, &total_b), me + ": cudaMemGetInfo");
  DeviceInfo d;
  d.index = index_;
  d.name = props_.name;
  d.total_bytes = static_cast<int64_t>(total_b);
  // Our idle cache is ours to reuse: count it as free.
  d.free_bytes = static_cast<int64_t>(free_b) + device_pool_.idle_bytes();
  d.cc_major = props_.major;
  d.cc_minor = props_.minor;
  d.multiprocessors = props_.multiProcessorCount;
  if (memory_limit_ > 0) {
    const int64_t in_use = device_pool_.reserved_bytes() - device_pool_.idle_bytes();
    d.total_bytes = std::min(d.total_bytes, memory_limit_);
    d.free_bytes = std::min(d.free_bytes, std::max<int64_t>(0, memory_limit_ - in_use));
  }
  return d;
}

void CudaBackend::Drain() {
  for (cudaStream_t s : {h2d_, compute_, d2h_})
    if (s != nullptr) (void)cudaStreamSynchronize(s);
  up_pending_.fill(false);
  (void)cudaGetLastError();
}

Status CudaBackend::Fail(Status s) {
  Drain();
  if (s.IsOutOfMemory()) device_pool_.Release();
  return s;
}

Status CudaBackend::EnsureStaging() {
  if (up_slot_[0] && down_slot_[0]) return Status::OK();
  const std::string what = device() + ": pinned staging";
  for (auto& l : up_slot_) {
    if (l) continue;
    auto r = pinned_pool_.Acquire(kSlotBytes, what);
    if (!r.ok()) return r.status();
    l = std::move(r).value();
  }
  for (auto& l : down_slot_) {
    if (l) continue;
    auto r = pinned_pool_.Acquire(kSlotBytes, what);
    if (!r.ok()) return r.status();
    l = std::move(r).value();
  }
  return Status::OK();
}

Status CudaBackend::Put(Upload& u, const uint8_t* src, size_t n) {
  while (n > 0) {
    if (u.slot < 0) {
      const int s = next_up_;
      next_up_ = (next_up_ + 1) % kUploadSlots;
      if (up_pending_[s]) {
        // The slot's previous DMA must be done before we overwrite it.
        FM_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(up_free_[s]), device() + ": upload");
        up_pending_[s] = false;
      }
      u.slot = s;
      u.fill = 0;
    }
    const size_t take = std::min(n, kSlotBytes - u.fill);
    CopyBytes(up_slot_[u.slot].data() + u.fill, src, take);
    u.fill += take;
    src += take;
    n -= take;
    if (u.fill == kSlotBytes) FM_RETURN_IF_ERROR(Flush(u));
  }
  return Status::OK();
}

Status CudaBackend::PutPixels(Upload& u, const cv::Mat& m, size_t first, size_t end) {
  if (m.isContinuous()) return Put(u, m.data + 3 * first, 3 * (end - first));
  const auto cols = static_cast<size_t>(m.cols);
  for (size_t p = first; p < end;) {
    const size_t row = p / cols, col = p % cols;
    const size_t k = std::min(end - p, cols - col);
    FM_RETURN_IF_ERROR(Put(u, m.ptr<uint8_t>(static_cast<int>(row)) + 3 * col, 3 * k));
    p += k;
  }
  return Status::OK();
}

Status CudaBackend::Flush(Upload& u) {
  if (u.slot < 0) return Status::OK();
  if (u.fill > 0) {
    const std::string what = device() + ": upload";
    FM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(u.dev + u.dev_off, up_slot_[u.slot].data(), u.fill,
                                            cudaMemcpyHostToDevice, h2d_), what);
    FM_CUDA_RETURN_IF_ERROR(cudaEventRecord(up_free_[u.slot], h2d_), what);
    up_pending_[u.slot] = true;
    u.dev_off += u.fill;
  }
  u.slot = -1;
  u.fill = 0;
  return Status::OK();
}

Status CudaBackend::Download(uint8_t* dst, const uint8_t* src, size_t n) {
  const std::string what = device() + ": download";
  const size_t pieces = (n + kSlotBytes - 1) / kSlotBytes;
  auto issue = [&](size_t k) -> Status {
    const size_t off = k * kSlotBytes, len = std::min(kSlotBytes, n - off);
    const size_t slot = k % kDownloadSlots;
    FM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(down_slot_[slot].data(), src + off, len,
                                            cudaMemcpyDeviceToHost, d2h_), what);
    FM_CUDA_RETURN_IF_ERROR(cudaEventRecord(down_ready_[slot], d2h_), what);
    return Status::OK();
  };
  // Keep kDownloadSlots-1 pieces in flight while the host copies one out.
  constexpr size_t kAhead = kDownloadSlots - 1;
  for (size_t k = 0; k < std::min(pieces, kAhead); ++k) FM_RETURN_IF_ERROR(issue(k));
  for (size_t k = 0; k < pieces; ++k) {
    if (k + kAhead < pieces) FM_RETURN_IF_ERROR(issue(k + kAhead));
    const size_t slot = k % kDownloadSlots;
    FM_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(down_ready_[slot]), what);
    const size_t off = k * kSlotBytes;
    CopyBytes(dst + off, down_slot_[slot].data(), std::min(kSlotBytes, n - off));
  }
  return Status::OK();
}

Result<std::vector<LumaStats>> CudaBackend::LumaStatsBatch(const std::vector<cv::Mat>& images) {
  FM_RETURN_IF_ERROR(CheckImages(images, "LumaStats"));
  if (images.empty()) return std::vector<LumaStats>{};
  const size_t n = images.size();
  const std::string what = What("LumaStats", n);
  FM_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_), what);

  // Plan: chunks of pixels (one thread block each), then the device layout.
  std::vector<cuda::LumaChunk> chunks;
  std::vector<size_t> first_byte(n);
  size_t pixel_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    first_byte[i] = pixel_bytes;
    const size_t total = images[i].total();
    for (size_t p = 0; p < total; p += cuda::kLumaChunkPixels) {
      chunks.push_back(cuda::LumaChunk{pixel_bytes + 3 * p,
                                       static_cast<uint32_t>(std::min<size_t>(cuda::kLumaChunkPixels, total - p)),
                                       static_cast<uint32_t>(i)});
    }
    pixel_bytes += 3 * total;
  }
  const size_t table_bytes = chunks.size() * sizeof(cuda::LumaChunk);
  const size_t out_off = AlignUp(table_bytes + pixel_bytes, 256);
  const size_t need = out_off + n * sizeof(cuda::LumaOut);

  if (Status s = EnsureStaging(); !s.ok()) return Fail(s);
  auto block = device_pool_.Acquire(need, what);
  if (!block.ok()) return Fail(block.status());
  std::vector<cuda::LumaOut> host_out;

  Status s = [&]() -> Status {
    try {
      host_out.resize(n);
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory(what + ": host memory for the results");
    }
    uint8_t* dev = block->data();
    const auto* d_chunks = reinterpret_cast<const cuda::LumaChunk*>(dev);
    const uint8_t* d_pixels = dev + table_bytes;
    auto* d_out = reinterpret_cast<cuda::LumaOut*>(dev + out_off);
    FM_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d_out, 0, n * sizeof(cuda::LumaOut), compute_), what);
    Upload u;
    u.dev = dev;
    FM_RETURN_IF_ERROR(Put(u, reinterpret_cast<const uint8_t*>(chunks.data()), table_bytes));
    for (size_t c0 = 0; c0 < chunks.size();) {
      size_t c1 = c0, bytes = 0;
      while (c1 < chunks.size() && (c1 == c0 || bytes < kSliceBytes)) bytes += 3 * chunks[c1++].pixels;
      for (size_t c = c0; c < c1; ++c) {
        const cuda::LumaChunk& ch = chunks[c];
        const size_t first = (ch.byte_offset - first_byte[ch.image]) / 3;
        FM_RETURN_IF_ERROR(PutPixels(u, images[ch.image], first, first + ch.pixels));
      }
      FM_RETURN_IF_ERROR(Flush(u));
      FM_CUDA_RETURN_IF_ERROR(cudaEventRecord(uploaded_, h2d_), what);
      FM_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute_, uploaded_, 0), what);
      FM_CUDA_RETURN_IF_ERROR(cuda::LaunchLumaStats(d_chunks + c0, static_cast<int>(c1 - c0),
                                                    d_pixels, d_out, compute_),
                              what + ": kernel");
      c0 = c1;
    }
    FM_CUDA_RETURN_IF_ERROR(cudaEventRecord(computed_[0], compute_), what);
    FM_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(d2h_, computed_[0], 0), what);
    return Download(reinterpret_cast<uint8_t*>(host_out.data()),
                    reinterpret_cast<const uint8_t*>(d_out), n * sizeof(cuda::LumaOut));
  }();
  block->reset();  // back to the pool (cached) before any Release
  if (!s.ok()) return Fail(s);
  last_batch_bytes_ = static_cast<int64_t>(need);

  std::vector<LumaStats> out(n);
  for (size_t i = 0; i < n; ++i) {
    const cuda::LumaOut& o = host_out[i];
    LumaStats& st = out[i];
    st.histogram.assign(o.histogram, o.histogram + cuda::kLumaBins);
    st.pixels = static_cast<int64_t>(images[i].total());
    st.sum_l = o.sum_l;
    st.sum_l2 = o.sum_l2;
    st.sum_log_l = o.sum_log_l;
    st.sum_r = o.sum_r;
    st.sum_g = o.sum_g;
    st.sum_b = o.sum_b;
    st.clipped_shadows = static_cast<int64_t>(o.clipped_shadows);
    st.clipped_highlights = static_cast<int64_t>(o.clipped_highlights);
  }
  return out;
}

Result<Tensor> CudaBackend::PreprocessBatch(const std::vector<cv::Mat>& images,
                                            const PreprocessSpec& spec) {
  FM_RETURN_IF_ERROR(CheckImages(images, "Preprocess"));
  if (spec.width <= 0 || spec.height <= 0)
    return Status::InvalidArgument("Preprocess needs a positive output size");
  const size_t n = images.size();
  Tensor t;
  t.type = spec.type;
  t.shape = {static_cast<int64_t>(n), 3, spec.height, spec.width};
  if (n == 0) return t;
  const std::string what = What("Preprocess", n);
  FM_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_), what);

  const size_t per_image = 3 * static_cast<size_t>(spec.width) * spec.height * t.ElementBytes();
  std::vector<cuda::PreprocessImage> descs(n);
  size_t pixel_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const cv::Mat& m = images[i];
    cuda::PreprocessImage& d = descs[i];
    d.byte_offset = pixel_bytes;
    d.rows = m.rows;
    d.cols = m.cols;
    // As cv::resize: inv_scale = dst/src, then scale = 1/inv_scale.
    d.scale_x = 1.0 / (static_cast<double>(spec.width) / m.cols);
    d.scale_y = 1.0 / (static_cast<double>(spec.height) / m.rows);
    pixel_bytes += 3 * m.total();
  }
  const size_t table_bytes = n * sizeof(cuda::PreprocessImage);
  const size_t out_off = AlignUp(table_bytes + pixel_bytes, 256);
  const size_t need = out_off + n * per_image;

  cuda::PreprocessParams prm;
  prm.width = spec.width;
  prm.height = spec.height;
  prm.to_rgb = spec.to_rgb ? 1 : 0;
  prm.fp16 = spec.type == TensorType::kFloat16 ? 1 : 0;
  prm.scale = spec.scale;
  for (int c = 0; c < 3; ++c) {
    prm.mean[c] = spec.mean[c];
    prm.std[c] = spec.std[c];
  }

  if (Status s = EnsureStaging(); !s.ok()) return Fail(s);
  auto block = device_pool_.Acquire(need, what);
  if (!block.ok()) return Fail(block.status());

  Status s = [&]() -> Status {
    try {
      t.data.resize(n * per_image);
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory(what + ": host memory for the tensor");
    }
    uint8_t* dev = block->data();
    const auto* d_descs = reinterpret_cast<const cuda::PreprocessImage*>(dev);
    const uint8_t* d_pixels = dev + table_bytes;
    uint8_t* d_out = dev + out_off;
    Upload u;
    u.dev = dev;
    FM_RETURN_IF_ERROR(Put(u, reinterpret_cast<const uint8_t*>(descs.data()), table_bytes));
    size_t prev0 = 0, prev1 = 0;  // the slice whose output is still on the device
    int k = 0;
    for (size_t i0 = 0; i0 < n; ++k) {
      size_t i1 = i0, bytes = 0;
      while (i1 < n && (i1 == i0 || bytes < kSliceBytes)) bytes += 3 * images[i1++].total();
      for (size_t i = i0; i < i1; ++i) FM_RETURN_IF_ERROR(PutPixels(u, images[i], 0, images[i].total()));
      FM_RETURN_IF_ERROR(Flush(u));
      FM_CUDA_RETURN_IF_ERROR(cudaEventRecord(uploaded_, h2d_), what);
      FM_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute_, uploaded_, 0), what);
      FM_CUDA_RETURN_IF_ERROR(cuda::LaunchPreprocess(d_descs, static_cast<int>(i0), static_cast<int>(i1 - i0),
                                                     d_pixels, d_out, prm, compute_),
                              what + ": kernel");
      FM_CUDA_RETURN_IF_ERROR(cudaEventRecord(computed_[k % 2], compute_), what);
      if (prev1 > prev0) {  // bring slice k-1 home while slice k computes
        FM_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(d2h_, computed_[(k + 1) % 2], 0), what);
        FM_RETURN_IF_ERROR(Download(t.data.data() + prev0 * per_image, d_out + prev0 * per_image,
                                    (prev1 - prev0) * per_image));
      }
      prev0 = i0;
      prev1 = i1;
      i0 = i1;
    }
    FM_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(d2h_, computed_[(k + 1) % 2], 0), what);
    return Download(t.data.data() + prev0 * per_image, d_out + prev0 * per_image,
                    (prev1 - prev0) * per_image);
  }();
  block->reset();
  if (!s.ok()) return Fail(s);
  last_batch_bytes_ = static_cast<int64_t>(need);
  return t;
}

std::string NoCudaReason(cudaError_t err) {
  std::string why = FromCuda(err, "cudaGetDeviceCount").message();
  if (err == cudaErrorInsufficientDriver || err == cudaErrorStubLibrary) {
    why += " (no usable NVIDIA driver: libcuda.so.1 missing, or older than this CUDA " +
           std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10) +
           " runtime needs)";
  }
  return why;
}

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
    if (why != nullptr) *why = NoCudaReason(err);
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

Result<std::unique_ptr<ComputeBackend>> MakeCudaBackend(int index) {
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess)
    return Status::Unsupported(NoCudaReason(err));
  if (index < 0 || index >= count) {
    return Status::NotFound("cuda:" + std::to_string(index) + ": no such device (" +
                            std::to_string(count) + " CUDA device(s) visible)");
  }
  auto backend = std::make_unique<CudaBackend>(index);
  FM_RETURN_IF_ERROR(backend->Init());
  return std::unique_ptr<ComputeBackend>(std::move(backend));
}


Result<TopK> CudaBackend::TopKSimilar(const SimilarityQuery& q) {
  FM_RETURN_IF_ERROR(CheckSimilarityQuery(q));
  TopK out;
  out.k = q.k;
  if (q.nq == 0) return out;
  const std::string what = device() + ": TopKSimilar of " + std::to_string(q.nq) + " x " +
                           std::to_string(q.nb) + " rows";
  FM_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_), what);
  // One block, laid out as TopKSimilarBytes counts it.
  const bool same = q.queries == q.base && q.nq == q.nb;
  const size_t row = sizeof(float) * static_cast<size_t>(q.dim);
  const int64_t tile_q = std::min(q.nq, kSimilarityQueryRows);
  const int64_t tile_b = std::max<int64_t>(1, std::min(q.nb, kSimilarityBaseRows));
  const size_t base_off = 0;
  const size_t query_off = AlignUp(base_off + row * q.nb, 256);
  const size_t self_off = AlignUp(query_off + (same ? 0 : row * q.nq), 256);
  const size_t tile_off = AlignUp(self_off + (q.self ? sizeof(int64_t) * q.nq : 0), 256);
  const size_t sims_off = AlignUp(tile_off + sizeof(float) * tile_q * tile_b, 256);
  const size_t ids_off = AlignUp(sims_off + sizeof(float) * q.nq * q.k, 256);
  const size_t need = ids_off + sizeof(int32_t) * q.nq * q.k;
  auto block = device_pool_.Acquire(need, what);
  if (!block.ok()) return Fail(block.status());
  Status s = [&]() -> Status {
    try {
      out.sims.resize(static_cast<size_t>(q.nq) * q.k);
      out.ids.resize(static_cast<size_t>(q.nq) * q.k);
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory(what + ": host memory for the results");
    }
    uint8_t* dev = block->data();
    auto* d_base = reinterpret_cast<float*>(dev + base_off);
    auto* d_queries = same ? d_base : reinterpret_cast<float*>(dev + query_off);
    auto* d_self = q.self ? reinterpret_cast<int64_t*>(dev + self_off) : nullptr;
    auto* d_tile = reinterpret_cast<float*>(dev + tile_off);
    auto* d_sims = reinterpret_cast<float*>(dev + sims_off);
    auto* d_ids = reinterpret_cast<int32_t*>(dev + ids_off);
    FM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_base, q.base, row * q.nb, cudaMemcpyHostToDevice, compute_), what);
    if (!same)
      FM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_queries, q.queries, row * q.nq, cudaMemcpyHostToDevice, compute_), what);
    if (d_self)
      FM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d_self, q.self, sizeof(int64_t) * q.nq, cudaMemcpyHostToDevice, compute_), what);
    FM_CUDA_RETURN_IF_ERROR(cuda::LaunchTopKFill(q.nq * q.k, d_sims, d_ids, kNoSimilarity, compute_), what);
    for (int64_t q0 = 0; q0 < q.nq; q0 += tile_q) {
      for (int64_t b0 = 0; b0 < q.nb; b0 += tile_b) {
        cuda::SimilarityTile t;
        t.queries = d_queries + q0 * q.dim;
        t.rows = std::min(tile_q, q.nq - q0);
        t.q0 = q0;
        t.base = d_base + b0 * q.dim;
        t.cols = std::min(tile_b, q.nb - b0);
        t.base0 = b0;
        t.dim = q.dim;
        t.k = q.k;
        t.self = d_self;
        t.scratch = d_tile;
        t.sims = d_sims;
        t.ids = d_ids;
        FM_CUDA_RETURN_IF_ERROR(cuda::LaunchTopKSimilarTile(t, compute_), what + ": kernel");
      }
    }
    FM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.sims.data(), d_sims, sizeof(float) * q.nq * q.k,
                                            cudaMemcpyDeviceToHost, compute_), what);
    FM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.ids.data(), d_ids, sizeof(int32_t) * q.nq * q.k,
                                            cudaMemcpyDeviceToHost, compute_), what);
    FM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_), what);
    return Status::OK();
  }();
  block->reset();
  if (!s.ok()) return Fail(s);
  last_batch_bytes_ = static_cast<int64_t>(need);
  return out;
}

Result<std::vector<cv::Mat>> CudaBackend::DenseFlowBatch(const std::vector<FlowPair>& pairs,
                                                         const FlowSpec& spec) {
  FM_RETURN_IF_ERROR(CheckFlowPairs(pairs, spec));
  std::vector<cv::Mat> out;
  if (pairs.empty()) return out;
  const cv::Size size = pairs[0].from.size();
  const std::string what = device() + ": DenseFlow of " + std::to_string(pairs.size()) + " " +
                           std::to_string(size.width) + "x" + std::to_string(size.height) + " pair(s)";
  FM_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_), what);
  // One block per pair, reused: both frames, then kFlowPlanes planes per level.
  const std::vector<cv::Size> levels = FlowPyramid(size, spec);
  const size_t frame = AlignUp(size_t(size.width) * size.height, 256);
  std::vector<size_t> level_off;
  size_t need = 2 * frame;
  for (cv::Size l : levels) {
    level_off.push_back(need);
    need += kFlowPlanes * AlignUp(sizeof(float) * l.width * l.height, 256);
  }
  auto block = device_pool_.Acquire(need, what);
  if (!block.ok()) return Fail(block.status());
  Status s = [&]() -> Status {
    uint8_t* dev = block->data();
    std::vector<cuda::FlowLevel> lv(levels.size());
    for (size_t l = 0; l < levels.size(); ++l) {
      const size_t plane = AlignUp(sizeof(float) * levels[l].width * levels[l].height, 256);
      float* p[kFlowPlanes];
      for (int k = 0; k < kFlowPlanes; ++k) p[k] = reinterpret_cast<float*>(dev + level_off[l] + k * plane);
      cuda::FlowLevel& f = lv[l];
      f.w = levels[l].width, f.h = levels[l].height;
      f.from = p[0], f.to = p[1], f.ix = p[2], f.iy = p[3], f.jx = p[4], f.jy = p[5];
      f.gx = p[6], f.gy = p[7], f.it = p[8], f.du = p[9], f.dv = p[10], f.u = p[11], f.v = p[12];
    }
    for (size_t l = 0; l + 1 < levels.size(); ++l) {
      lv[l].up_u = lv[l + 1].u, lv[l].up_v = lv[l + 1].v;
      lv[l].up_w = lv[l + 1].w, lv[l].up_h = lv[l + 1].h;
    }
    for (const FlowPair& p : pairs) {
      const cv::Mat* frames[2] = {&p.from, &p.to};
      for (int k = 0; k < 2; ++k) {
        uint8_t* d_gray = dev + k * frame;
        FM_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(d_gray, size.width, frames[k]->data, frames[k]->step,
                                                  size.width, size.height, cudaMemcpyHostToDevice, compute_),
                                what);
        float* dst = k == 0 ? lv[0].from : lv[0].to;
        FM_CUDA_RETURN_IF_ERROR(cuda::LaunchGrayToFloat(d_gray, size.width, size.width, size.height, dst, compute_),
                                what + ": to float");
        for (size_t l = 1; l < levels.size(); ++l) {
          const float* in = k == 0 ? lv[l - 1].from : lv[l - 1].to;
          float* o = k == 0 ? lv[l].from : lv[l].to;
          FM_CUDA_RETURN_IF_ERROR(cuda::LaunchHalf(in, lv[l - 1].w, lv[l - 1].h, o, lv[l].w, lv[l].h, compute_),
                                  what + ": pyramid");
        }
      }
      for (size_t l = levels.size(); l-- > 0;)
        FM_CUDA_RETURN_IF_ERROR(cuda::LaunchFlowLevel(lv[l], spec.radius, spec.iterations, spec.lambda, compute_),
                                what + ": level " + std::to_string(l));
      cv::Mat u(size, CV_32F), v(size, CV_32F);
      FM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(u.data, lv[0].u, sizeof(float) * size.area(), cudaMemcpyDeviceToHost, compute_), what);
      FM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(v.data, lv[0].v, sizeof(float) * size.area(), cudaMemcpyDeviceToHost, compute_), what);
      FM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_), what);
      cv::Mat flow;
      cv::merge(std::vector<cv::Mat>{u, v}, flow);
      out.push_back(flow);
    }
    return Status::OK();
  }();
  block->reset();
  if (!s.ok()) return Fail(s);
  last_batch_bytes_ = static_cast<int64_t>(need);
  return out;
}

// One block sized for the largest task, reused: the image, both masks, two fields and
// two cost planes. Each task is uploaded, searched and downloaded in turn.
Result<std::vector<PatchMatchResult>> CudaBackend::PatchMatchBatch(
    const std::vector<PatchMatchTask>& tasks, const PatchMatchSpec& spec) {
  for (const PatchMatchTask& t : tasks) FM_RETURN_IF_ERROR(CheckPatchMatchTask(t, spec));
  std::vector<PatchMatchResult> out;
  if (tasks.empty()) return out;
  size_t most = 0;
  for (const PatchMatchTask& t : tasks) most = std::max(most, size_t(t.image.total()));
  const std::string what = What("PatchMatch", tasks.size()) + " (up to " + std::to_string(most) + " px)";
  FM_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_), what);
  const size_t img = AlignUp(3 * most, 256), mask = AlignUp(most, 256);
  const size_t field = AlignUp(sizeof(int2) * most, 256), cost = AlignUp(sizeof(int) * most, 256);
  const size_t need = img + 2 * mask + 2 * field + 2 * cost;
  auto block = device_pool_.Acquire(need, what);
  if (!block.ok()) return Fail(block.status());
  Status s = [&]() -> Status {
    uint8_t* dev = block->data();
    cuda::PatchMatchPlanes p;
    uint8_t* d_image = dev;
    uint8_t* d_active = dev + img;
    uint8_t* d_source = d_active + mask;
    p.image = d_image, p.active = d_active, p.source = d_source;
    p.nnf_a = reinterpret_cast<int2*>(d_source + mask);
    p.nnf_b = reinterpret_cast<int2*>(reinterpret_cast<uint8_t*>(p.nnf_a) + field);
    p.cost_a = reinterpret_cast<int*>(reinterpret_cast<uint8_t*>(p.nnf_b) + field);
    p.cost_b = reinterpret_cast<int*>(reinterpret_cast<uint8_t*>(p.cost_a) + cost);
    for (const PatchMatchTask& t : tasks) {
      p.w = t.image.cols, p.h = t.image.rows;
      auto put = [&](void* dst, const cv::Mat& m, size_t row_bytes) {
        return cudaMemcpy2DAsync(dst, row_bytes, m.data, m.step, row_bytes, m.rows,
                                 cudaMemcpyHostToDevice, compute_);
      };
      FM_CUDA_RETURN_IF_ERROR(put(d_image, t.image, 3 * size_t(p.w)), what + ": upload");
      FM_CUDA_RETURN_IF_ERROR(put(d_active, t.active, size_t(p.w)), what + ": upload");
      FM_CUDA_RETURN_IF_ERROR(put(d_source, t.source, size_t(p.w)), what + ": upload");
      FM_CUDA_RETURN_IF_ERROR(put(p.nnf_a, t.nnf, sizeof(int2) * p.w), what + ": upload");
      FM_CUDA_RETURN_IF_ERROR(cuda::LaunchPatchMatch(p, spec.radius, spec.iterations, spec.seed, compute_),
                              what + ": search");
      PatchMatchResult r{cv::Mat(t.image.size(), CV_32SC2), cv::Mat(t.image.size(), CV_32S)};
      FM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(r.nnf.data, p.nnf_a, sizeof(int2) * t.image.total(),
                                              cudaMemcpyDeviceToHost, compute_), what);
      FM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(r.cost.data, p.cost_a, sizeof(int) * t.image.total(),
                                              cudaMemcpyDeviceToHost, compute_), what);
      FM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_), what);
      out.push_back(std::move(r));
    }
    return Status::OK();
  }();
  block->reset();
  if (!s.ok()) return Fail(s);
  last_batch_bytes_ = static_cast<int64_t>(need);
  return out;
}

// One block sized for the task that needs most: the image and hole, and each level's sums
// and two solutions. Each task is uploaded, filled and downloaded in turn.
Result<std::vector<cv::Mat>> CudaBackend::HoleFillBatch(const std::vector<HoleFillTask>& tasks,
                                                        const HoleFillSpec& spec) {
  for (const HoleFillTask& t : tasks) FM_RETURN_IF_ERROR(CheckHoleFillTask(t, spec));
  std::vector<cv::Mat> out;
  if (tasks.empty()) return out;
  std::vector<std::vector<cv::Size>> levels;
  size_t need = 0;
  auto bytes_of = [](const std::vector<cv::Size>& sizes) {
    size_t n = 2 * AlignUp(3 * size_t(sizes[0].area()), 256);  // image, and hole (rounded up)
    for (const cv::Size& s : sizes) n += 3 * AlignUp(sizeof(float4) * size_t(s.area()), 256);
    return n;
  };
  for (const HoleFillTask& t : tasks) {
    levels.push_back(HoleFillLevels(t.hole));
    need = std::max(need, bytes_of(levels.back()));
  }
  const std::string what = What("HoleFill", tasks.size()) + " (" + std::to_string(need) + " bytes)";
  FM_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_), what);
  auto block = device_pool_.Acquire(need, what);
  if (!block.ok()) return Fail(block.status());
  Status s = [&]() -> Status {
    for (size_t k = 0; k < tasks.size(); ++k) {
      const HoleFillTask& t = tasks[k];
      const size_t plane = AlignUp(3 * t.image.total(), 256);
      uint8_t* dev = block->data();
      std::vector<cuda::HoleFillLevel> lv(levels[k].size());
      size_t off = 2 * plane;
      for (size_t i = 0; i < lv.size(); ++i) {
        lv[i].w = levels[k][i].width, lv[i].h = levels[k][i].height;
        const size_t n = AlignUp(sizeof(float4) * size_t(levels[k][i].area()), 256);
        lv[i].sums = reinterpret_cast<float4*>(dev + off);
        lv[i].u = reinterpret_cast<float4*>(dev + off + n);
        lv[i].next = reinterpret_cast<float4*>(dev + off + 2 * n);
        off += 3 * n;
      }
      cuda::HoleFillPlanes p{dev, dev + plane, lv.data(), static_cast<int>(lv.size())};
      const int w = t.image.cols, h = t.image.rows;
      FM_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(p.image, 3 * size_t(w), t.image.data, t.image.step,
                                                3 * size_t(w), h, cudaMemcpyHostToDevice, compute_),
                              what + ": upload");
      FM_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(dev + plane, size_t(w), t.hole.data, t.hole.step,
                                                size_t(w), h, cudaMemcpyHostToDevice, compute_),
                              what + ": upload");
      FM_CUDA_RETURN_IF_ERROR(cuda::LaunchHoleFill(p, spec.iterations, compute_), what + ": fill");
      cv::Mat filled(t.image.size(), CV_8UC3);
      FM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(filled.data, p.image, 3 * t.image.total(),
                                              cudaMemcpyDeviceToHost, compute_), what);
      FM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(compute_), what);
      out.push_back(std::move(filled));
    }
    return Status::OK();
  }();
  block->reset();
  if (!s.ok()) return Fail(s);
  last_batch_bytes_ = static_cast<int64_t>(need);
  return out;
}

}  // namespace framemill::gpu
