#include "cluster/knn.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <new>
#include <stdexcept>

#include <hnswlib/hnswlib.h>
#include <tbb/parallel_for.h>

#include "gpu/ops.h"

namespace framemill::cluster {
namespace {

// hnswlib's space for unit-norm rows: cosine distance through our dispatched dot product
// (hnswlib's own picks its SIMD at compile time, and we build for the baseline CPU).
class CosineSpace : public hnswlib::SpaceInterface<float> {
 public:
  explicit CosineSpace(size_t dim) : dim_(dim) {}
  size_t get_data_size() override { return dim_ * sizeof(float); }
  hnswlib::DISTFUNC<float> get_dist_func() override { return &Distance; }
  void* get_dist_func_param() override { return &dim_; }

 private:
  static float Distance(const void* a, const void* b, const void* dim) {
    return 1.0f - gpu::DotCpu(static_cast<const float*>(a), static_cast<const float*>(b),
                              static_cast<int>(*static_cast<const size_t*>(dim)));
  }
  size_t dim_;
};

KnnGraph EmptyGraph(int64_t n, int k) {
  KnnGraph g;
  g.n = n;
  g.k = k;
  g.ids.assign(static_cast<size_t>(n) * k, -1);
  g.dist.assign(static_cast<size_t>(n) * k, 2.0f);
  return g;
}

Status CheckInput(const Embeddings& e, int k) {
  if (k < 1 || k > 256) return Status::InvalidArgument("neighbour count must be in [1, 256]");
  if (e.dim < 1) return Status::InvalidArgument("embeddings need at least one dimension");
  if (e.n < 0 || e.n > INT32_MAX || e.data.size() != static_cast<size_t>(e.n) * e.dim)
    return Status::InvalidArgument("embedding rows do not match their count and dimension");
  return Status::OK();
}

}  // namespace

void Normalize(Embeddings* e) {
  tbb::parallel_for(int64_t{0}, e->n, [&](int64_t i) {
    float* r = e->data.data() + i * e->dim;
    double ss = 0;
    for (int j = 0; j < e->dim; ++j) ss += double(r[j]) * r[j];
    // A non-finite row carries no direction: it becomes zero, far from every face.
    const float inv = std::isfinite(ss) && ss > 0 ? static_cast<float>(1.0 / std::sqrt(ss)) : 0.0f;
    for (int j = 0; j < e->dim; ++j) r[j] = inv == 0.0f ? 0.0f : r[j] * inv;
  });
}

Result<KnnGraph> ExactKnn(const Embeddings& e, int k, gpu::ComputeBackend& backend, int64_t block) {
  FM_RETURN_IF_ERROR(CheckInput(e, k));
  KnnGraph g = EmptyGraph(e.n, k);
  block = std::max<int64_t>(1, block);
  std::vector<int64_t> self(static_cast<size_t>(std::min(block, e.n)));
  for (int64_t q0 = 0; q0 < e.n; q0 += block) {
    const int64_t nq = std::min(block, e.n - q0);
    for (int64_t i = 0; i < nq; ++i) self[i] = q0 + i;
    gpu::SimilarityQuery q;
    q.queries = e.row(q0);
    q.nq = nq;
    q.base = e.data.data();
    q.nb = e.n;
    q.dim = e.dim;
    q.k = k;
    q.self = self.data();
    auto top = backend.TopKSimilar(q);
    if (!top.ok()) return top.status();
    for (int64_t i = 0; i < nq * k; ++i) {
      g.ids[q0 * k + i] = top->ids[i];
      g.dist[q0 * k + i] = top->ids[i] < 0 ? 2.0f : std::clamp(1.0f - top->sims[i], 0.0f, 2.0f);
    }
  }
  return g;
}

Result<KnnGraph> HnswKnn(const Embeddings& e, int k, const HnswOptions& o) {
  FM_RETURN_IF_ERROR(CheckInput(e, k));
  KnnGraph g = EmptyGraph(e.n, k);
  if (e.n < 2) return g;
  try {
    CosineSpace space(static_cast<size_t>(e.dim));
    hnswlib::HierarchicalNSW<float> index(&space, static_cast<size_t>(e.n), o.m,
                                          o.ef_construction, o.seed);
    // The first point alone, then the rest in parallel (hnswlib locks per node).
    index.addPoint(e.row(0), 0);
    tbb::parallel_for(int64_t{1}, e.n, [&](int64_t i) {
      index.addPoint(e.row(i), static_cast<hnswlib::labeltype>(i));
    });
    index.setEf(static_cast<size_t>(o.ef_search > 0 ? o.ef_search : std::max(2 * k, 64)));
    tbb::parallel_for(int64_t{0}, e.n, [&](int64_t i) {
      // k + 1: the point itself comes back too (unless duplicates hide it).
      auto found = index.searchKnn(e.row(i), static_cast<size_t>(k) + 1);
      std::vector<std::pair<float, int32_t>> best;
      while (!found.empty()) {
        const auto [d, id] = found.top();
        found.pop();
        if (static_cast<int64_t>(id) != i) best.emplace_back(d, static_cast<int32_t>(id));
      }
      std::sort(best.begin(), best.end());
      for (size_t j = 0; j < best.size() && j < static_cast<size_t>(k); ++j) {
        g.ids[i * k + j] = best[j].second;
        g.dist[i * k + j] = std::clamp(best[j].first, 0.0f, 2.0f);
      }
    });
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("host memory exhausted building the neighbour index of " +
                               std::to_string(e.n) + " faces");
  } catch (const std::exception& ex) {
    return Status::Internal(std::string("neighbour index: ") + ex.what());
  }
  return g;
}

double KnnRecall(const KnnGraph& approx, const KnnGraph& exact) {
  int64_t found = 0, total = 0;
  const int k = std::min(approx.k, exact.k);
  for (int64_t i = 0; i < std::min(approx.n, exact.n); ++i) {
    for (int j = 0; j < k; ++j) {
      const int32_t want = exact.ids[i * exact.k + j];
      if (want < 0) continue;
      ++total;
      const int32_t* a = &approx.ids[i * approx.k];
      found += std::find(a, a + approx.k, want) != a + approx.k;
    }
  }
  return total == 0 ? 1.0 : static_cast<double>(found) / static_cast<double>(total);
}

}  // namespace framemill::cluster
