#include "cluster/hdbscan.h"

#include "cluster/union_find.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include <tbb/parallel_sort.h>

namespace framemill::cluster {
namespace {

constexpr float kFar = std::numeric_limits<float>::infinity();
constexpr float kMaxLambda = 1e6f;  // duplicates (distance 0) merge at this lambda

float Lambda(float distance) { return distance <= 1.0f / kMaxLambda ? kMaxLambda : 1.0f / distance; }

struct Edge {
  float w;
  int32_t a, b;
  bool operator<(const Edge& o) const {
    return w != o.w ? w < o.w : (a != o.a ? a < o.a : b < o.b);
  }
};

// The single-linkage forest: points are nodes [0, n), merges are nodes n, n+1, ...
struct Dendrogram {
  int64_t n = 0;
  std::vector<int32_t> left, right;  // per merge
  std::vector<float> distance;
  std::vector<int32_t> size;
  std::vector<int32_t> tops;         // the root node of each tree
  bool IsPoint(int32_t x) const { return x < n; }
  int32_t Size(int32_t x) const { return IsPoint(x) ? 1 : size[x - n]; }
};

std::vector<float> CoreDistances(const KnnGraph& g, int min_samples) {
  std::vector<float> core(static_cast<size_t>(g.n), kFar);
  const int j = std::min(min_samples, g.k) - 1;
  for (int64_t i = 0; i < g.n; ++i)
    if (g.ids[i * g.k + j] >= 0) core[i] = g.dist[i * g.k + j];
  return core;
}

// Mutual-reachability edges of the graph, within max_distance, sorted.
std::vector<Edge> Edges(const KnnGraph& g, const std::vector<float>& core, float max_distance) {
  std::vector<Edge> edges;
  edges.reserve(static_cast<size_t>(g.n) * g.k);
  for (int64_t i = 0; i < g.n; ++i) {
    for (int j = 0; j < g.k; ++j) {
      const int32_t b = g.ids[i * g.k + j];
      const float d = g.dist[i * g.k + j];
      if (b < 0 || d > max_distance || core[i] == kFar || core[b] == kFar) continue;
      const auto a = static_cast<int32_t>(i);
      edges.push_back({std::max({core[i], core[b], d}), std::min(a, b), std::max(a, b)});
    }
  }
  for (const KnnGraph::Bridge& br : g.bridges) {
    if (br.dist > max_distance || core[br.a] == kFar || core[br.b] == kFar) continue;
    edges.push_back({std::max({core[br.a], core[br.b], br.dist}), std::min(br.a, br.b),
                     std::max(br.a, br.b)});
  }
  tbb::parallel_sort(edges.begin(), edges.end());
  return edges;
}

Dendrogram SingleLinkage(int64_t n, const std::vector<Edge>& edges) {
  Dendrogram t;
  t.n = n;
  UnionFind<int32_t> uf(n);
  std::vector<int32_t> node(static_cast<size_t>(n));  // per union-find root: its tree node
  std::iota(node.begin(), node.end(), 0);
  for (const Edge& e : edges) {
    const int32_t ra = uf.Find(e.a), rb = uf.Find(e.b);
    if (ra == rb) continue;
    const int32_t id = static_cast<int32_t>(n + t.left.size());
    t.left.push_back(node[ra]);
    t.right.push_back(node[rb]);
    t.distance.push_back(e.w);
    t.size.push_back(t.Size(node[ra]) + t.Size(node[rb]));
    uf.Join(rb, ra);  // rb's tree goes under ra
    node[ra] = id;
  }
  for (int64_t i = 0; i < n; ++i)
    if (uf.Find(static_cast<int32_t>(i)) == i) t.tops.push_back(node[i]);
  return t;
}

// The condensed tree: clusters (created top-down, so a child's number exceeds its
// parent's) and, per point, the cluster it fell out of and when.
struct Condensed {
  std::vector<int32_t> parent;
  std::vector<float> birth;
  std::vector<double> stability;
  std::vector<std::vector<int32_t>> children;
  std::vector<int32_t> point_cluster;  // -1: in no cluster (its tree was too small)
  std::vector<float> point_lambda;
  int32_t Add(int32_t parent_cluster, float born) {
    parent.push_back(parent_cluster);
    birth.push_back(born);
    stability.push_back(0);
    children.emplace_back();
    if (parent_cluster >= 0) children[parent_cluster].push_back(static_cast<int32_t>(parent.size() - 1));
    return static_cast<int32_t>(parent.size() - 1);
  }
};

// Every point under `x` leaves cluster c at lambda.
void FallOut(const Dendrogram& t, int32_t x, int32_t c, float lambda, Condensed* out) {
  std::vector<int32_t> stack = {x};
  while (!stack.empty()) {
    const int32_t y = stack.back();
    stack.pop_back();
    if (t.IsPoint(y)) {
      out->point_cluster[y] = c;
      out->point_lambda[y] = lambda;
    } else {
      stack.push_back(t.left[y - t.n]);
      stack.push_back(t.right[y - t.n]);
    }
  }
  out->stability[c] += double(lambda - out->birth[c]) * t.Size(x);
}

Condensed Condense(const Dendrogram& t, int min_cluster_size) {
  Condensed out;
  out.point_cluster.assign(static_cast<size_t>(t.n), -1);
  out.point_lambda.assign(static_cast<size_t>(t.n), 0);
  for (int32_t top : t.tops) {
    if (t.Size(top) < min_cluster_size) continue;  // its points stay noise
    // A tree's own cluster is born at its last merge: nothing links it to the rest.
    const int32_t root = out.Add(-1, Lambda(t.distance[top - t.n]));
    std::vector<std::pair<int32_t, int32_t>> stack = {{top, root}};  // (node, its cluster)
    while (!stack.empty()) {
      const auto [x, c] = stack.back();
      stack.pop_back();
      const float lambda = Lambda(t.distance[x - t.n]);
      const int32_t l = t.left[x - t.n], r = t.right[x - t.n];
      const bool big_l = t.Size(l) >= min_cluster_size, big_r = t.Size(r) >= min_cluster_size;
      if (big_l && big_r) {
        out.stability[c] += double(lambda - out.birth[c]) * (t.Size(l) + t.Size(r));
        stack.push_back({l, out.Add(c, lambda)});
        stack.push_back({r, out.Add(c, lambda)});
      } else if (big_l || big_r) {
        FallOut(t, big_l ? r : l, c, lambda, &out);
        stack.push_back({big_l ? l : r, c});
      } else {
        FallOut(t, l, c, lambda, &out);
        FallOut(t, r, c, lambda, &out);
      }
    }
  }
  return out;
}

// Excess of mass: a cluster is chosen over its descendants when it is at least as
// stable as the best choice among them.
std::vector<bool> Select(const Condensed& c, float epsilon) {
  const size_t m = c.parent.size();
  std::vector<bool> chosen(m, false), final(m, false);
  std::vector<double> best(m, 0);
  for (size_t i = m; i-- > 0;) {
    double below = 0;
    for (int32_t ch : c.children[i]) below += best[ch];
    chosen[i] = c.children[i].empty() || c.stability[i] >= below;
    best[i] = chosen[i] ? c.stability[i] : below;
  }
  if (epsilon > 0) {
    // Parents come before their children, so a choice moved up is seen by the pass below.
    const float max_lambda = 1.0f / epsilon;
    for (size_t i = 0; i < m; ++i) {
      if (!chosen[i] || c.birth[i] <= max_lambda) continue;
      int32_t up = static_cast<int32_t>(i);
      while (c.parent[up] >= 0 && c.birth[up] > max_lambda) up = c.parent[up];
      chosen[up] = true;
    }
  }
  std::vector<bool> under_final(m, false);
  for (size_t i = 0; i < m; ++i) {
    const int32_t p = c.parent[i];
    under_final[i] = p >= 0 && (final[p] || under_final[p]);
    final[i] = chosen[i] && !under_final[i];
  }
  return final;
}

}  // namespace

Clustering Hdbscan(const KnnGraph& g, const HdbscanOptions& o) {
  const int mcs = std::max(2, o.min_cluster_size);
  const int ms = std::clamp(o.min_samples > 0 ? o.min_samples : mcs - 1, 1, std::max(1, g.k));
  Clustering out;
  out.label.assign(static_cast<size_t>(g.n), -1);
  out.strength.assign(static_cast<size_t>(g.n), 0);
  if (g.n == 0 || g.k == 0) return out;
  const std::vector<float> core = CoreDistances(g, ms);
  const Dendrogram tree = SingleLinkage(g.n, Edges(g, core, o.max_distance));
  const Condensed cond = Condense(tree, mcs);
  const std::vector<bool> final = Select(cond, o.epsilon);

  // Each condensed cluster's chosen owner (itself or its chosen ancestor), if any.
  std::vector<int32_t> owner(cond.parent.size(), -1);
  for (size_t i = 0; i < owner.size(); ++i)
    owner[i] = final[i] ? static_cast<int32_t>(i) : (cond.parent[i] >= 0 ? owner[cond.parent[i]] : -1);
  // Number the chosen clusters by their smallest point.
  std::vector<int32_t> first(cond.parent.size(), -1);
  for (int64_t p = 0; p < g.n; ++p) {
    const int32_t c = cond.point_cluster[p] >= 0 ? owner[cond.point_cluster[p]] : -1;
    if (c >= 0 && first[c] < 0) first[c] = static_cast<int32_t>(p);
  }
  std::vector<int32_t> order;
  for (size_t i = 0; i < first.size(); ++i)
    if (first[i] >= 0) order.push_back(static_cast<int32_t>(i));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return first[a] < first[b]; });
  std::vector<int32_t> number(cond.parent.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) {
    number[order[i]] = static_cast<int32_t>(i);
    out.stability.push_back(static_cast<float>(cond.stability[order[i]]));
  }
  out.clusters = static_cast<int>(order.size());
  std::vector<float> most(order.size(), 0);
  for (int64_t p = 0; p < g.n; ++p) {
    if (cond.point_cluster[p] < 0 || owner[cond.point_cluster[p]] < 0) continue;
    out.label[p] = number[owner[cond.point_cluster[p]]];
    most[out.label[p]] = std::max(most[out.label[p]], cond.point_lambda[p]);
  }
  for (int64_t p = 0; p < g.n; ++p)
    if (out.label[p] >= 0)
      out.strength[p] = most[out.label[p]] > 0 ? cond.point_lambda[p] / most[out.label[p]] : 1.0f;
  return out;
}

}  // namespace framemill::cluster
