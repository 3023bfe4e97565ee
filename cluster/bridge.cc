#include "cluster/bridge.h"

#include "cluster/union_find.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "gpu/ops.h"

namespace framemill::cluster {
namespace {

// Connected groups of the graph over edges within max_distance.
std::vector<int32_t> Groups(const KnnGraph& g, float max_distance) {
  UnionFind<int32_t> uf(g.n);
  for (int64_t i = 0; i < g.n; ++i)
    for (int j = 0; j < g.k; ++j) {
      const int32_t b = g.ids[i * g.k + j];
      if (b >= 0 && g.dist[i * g.k + j] <= max_distance) uf.Join(static_cast<int32_t>(i), b);
    }
  std::vector<int32_t> group(static_cast<size_t>(g.n));
  for (size_t i = 0; i < group.size(); ++i) group[i] = uf.Find(static_cast<int32_t>(i));
  return group;
}

// The `count` members of `members` most similar to `direction`.
std::vector<int32_t> Nearest(const Embeddings& e, std::vector<int32_t> members,
                             const float* direction, int count) {
  std::vector<float> sim(members.size());
  for (size_t i = 0; i < members.size(); ++i) sim[i] = gpu::DotCpu(e.row(members[i]), direction, e.dim);
  std::vector<size_t> order(members.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t keep = std::min(order.size(), static_cast<size_t>(count));
  std::partial_sort(order.begin(), order.begin() + keep, order.end(),
                    [&](size_t a, size_t b) { return sim[a] > sim[b]; });
  std::vector<int32_t> out(keep);
  for (size_t i = 0; i < keep; ++i) out[i] = members[order[i]];
  return out;
}

// The unit mean direction of each group (roots[r]'s members), row r.
std::vector<float> MeanDirections(const Embeddings& e, const std::vector<int32_t>& roots,
                                  const std::vector<std::vector<int32_t>>& members) {
  std::vector<float> means(roots.size() * e.dim, 0.f);
  for (size_t r = 0; r < roots.size(); ++r) {
    float* m = means.data() + r * e.dim;
    for (int32_t p : members[roots[r]])
      for (int d = 0; d < e.dim; ++d) m[d] += e.row(p)[d];
    const float norm = std::sqrt(std::max(1e-12f, gpu::DotCpu(m, m, e.dim)));
    for (int d = 0; d < e.dim; ++d) m[d] /= norm;
  }
  return means;
}

// For each closed group, its `partners` nearest groups by mean direction.
gpu::TopK NearestGroups(const std::vector<float>& means, int dim, size_t groups,
                        const std::vector<int32_t>& closed, const std::vector<int64_t>& index_of,
                        int partners) {
  std::vector<float> queries;
  std::vector<int64_t> self;
  for (int32_t c : closed) {
    const float* m = means.data() + index_of[c] * dim;
    queries.insert(queries.end(), m, m + dim);
    self.push_back(index_of[c]);
  }
  gpu::SimilarityQuery q;
  q.queries = queries.data();
  q.nq = static_cast<int64_t>(closed.size());
  q.base = means.data();
  q.nb = static_cast<int64_t>(groups);
  q.dim = dim;
  q.k = std::min<int>(partners, static_cast<int>(groups) - 1);
  q.self = self.data();
  return gpu::TopKSimilarCpu(q);
}

// The closest pair between two groups' `sample` members nearest the other's direction.
KnnGraph::Bridge ClosestPair(const Embeddings& e, const std::vector<int32_t>& a_members,
                             const float* toward_b, const std::vector<int32_t>& b_members,
                             const float* toward_a, int sample) {
  const auto as = Nearest(e, a_members, toward_b, sample);
  const auto bs = Nearest(e, b_members, toward_a, sample);
  KnnGraph::Bridge best{0, 0, 3.f};
  for (int32_t a : as)
    for (int32_t b : bs) {
      const float d = 1.f - gpu::DotCpu(e.row(a), e.row(b), e.dim);
      if (d < best.dist) best = {a, b, d};
    }
  return best;
}

}  // namespace

int BridgeGroups(const Embeddings& e, const BridgeOptions& o, KnnGraph* g) {
  const std::vector<int32_t> group = Groups(*g, o.max_distance);
  std::vector<std::vector<int32_t>> members(static_cast<size_t>(g->n));
  for (int64_t i = 0; i < g->n; ++i) members[group[i]].push_back(static_cast<int32_t>(i));
  // A group no larger than k is not closed: each point's k neighbours reach past it, so
  // its nearest outsider is already in the graph.
  std::vector<int32_t> roots, closed;
  std::vector<int64_t> index_of(static_cast<size_t>(g->n), -1);
  for (int64_t r = 0; r < g->n; ++r) {
    if (members[r].empty()) continue;
    index_of[r] = static_cast<int64_t>(roots.size());
    roots.push_back(static_cast<int32_t>(r));
    if (static_cast<int>(members[r].size()) > g->k) closed.push_back(static_cast<int32_t>(r));
  }
  if (closed.empty() || roots.size() < 2) return 0;
  // Mean directions of every group, and for each closed group its nearest groups.
  const std::vector<float> means = MeanDirections(e, roots, members);
  const gpu::TopK near = NearestGroups(means, e.dim, roots.size(), closed, index_of, o.partners);
  int added = 0;
  for (size_t c = 0; c < closed.size(); ++c) {
    for (int j = 0; j < near.k; ++j) {
      const int32_t other = near.ids[c * near.k + j];
      if (other < 0) continue;
      const int32_t a_root = closed[c], b_root = roots[other];
      if (static_cast<int>(members[b_root].size()) > g->k && b_root < a_root) continue;  // done from its side
      const KnnGraph::Bridge best =
          ClosestPair(e, members[a_root], means.data() + other * e.dim, members[b_root],
                      means.data() + index_of[a_root] * e.dim, o.sample);
      if (best.dist <= o.max_distance) {
        g->bridges.push_back(best);
        ++added;
      }
    }
  }
  return added;
}

}  // namespace framemill::cluster
