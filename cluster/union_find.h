// Disjoint sets over points [0, n), with path halving: what single linkage (hdbscan), the
// groups of a neighbour graph (bridge) and near-duplicate groups are built on. Plain value;
// thread-compatible.
#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

namespace framemill::cluster {

template <typename Index>
class UnionFind {
 public:
  explicit UnionFind(int64_t n) : parent_(static_cast<size_t>(n)) { std::iota(parent_.begin(), parent_.end(), Index{0}); }
  Index Find(Index x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  // The set of `a` joins the set of `b`: its root goes under b's root.
  void Join(Index a, Index b) { parent_[Find(a)] = Find(b); }

 private:
  std::vector<Index> parent_;
};

}  // namespace framemill::cluster
