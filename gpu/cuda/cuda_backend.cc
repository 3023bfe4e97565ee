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
#include "gpu/cuda/cuda_backend_impl.h"

namespace framemill::gpu {
namespace cuda {


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

}  // namespace cuda

Result<std::unique_ptr<ComputeBackend>> MakeCudaBackend(int index) {
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess)
    return Status::Unsupported(cuda::NoCudaReason(err));
  if (index < 0 || index >= count) {
    return Status::NotFound("cuda:" + std::to_string(index) + ": no such device (" +
                            std::to_string(count) + " CUDA device(s) visible)");
  }
  auto backend = std::make_unique<cuda::CudaBackend>(index);
  FM_RETURN_IF_ERROR(backend->Init());
  return std::unique_ptr<ComputeBackend>(std::move(backend));
}


}  // namespace framemill::gpu
