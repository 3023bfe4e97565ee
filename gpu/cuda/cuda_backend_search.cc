// The CUDA backend's similarity tiles (TopKSimilar) and dense flow (cuda_backend_impl.h).
#include "gpu/cuda/cuda_backend_impl.h"

namespace framemill::gpu::cuda {

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

}  // namespace framemill::gpu::cuda
