// The CUDA backend's inpainting operations: the patch search and the hole fill
// (cuda_backend_impl.h).
#include "gpu/cuda/cuda_backend_impl.h"

namespace framemill::gpu::cuda {

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

}  // namespace framemill::gpu::cuda
