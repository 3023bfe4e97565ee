// Density clustering of a neighbour graph, as HDBSCAN* (Campello, Moulavi, Sander 2013;
// McInnes and Healy's accelerated form): core distances from the k-NN graph, mutual
// reachability on its edges, a minimum spanning forest (Kruskal), the single-linkage
// tree condensed by the minimum cluster size, and clusters chosen by excess of mass.
// Points that belong to no chosen cluster are noise. Memory O(n k): no n x n matrix.
//
// One departure, for faces: an edge longer than `max_distance` (a pair less similar than
// the threshold) is never used, so two groups joined only through such pairs are never
// one cluster; each remaining component is clustered on its own, and may be one cluster
// whole (born at its last merge, not at infinity as the one-tree root is in HDBSCAN*).
// Pure function; thread-compatible.
#pragma once

#include <cstdint>
#include <vector>

#include "cluster/knn.h"

namespace framemill::cluster {

struct HdbscanOptions {
  int min_cluster_size = 3;  // fewer points than this never form a cluster
  int min_samples = 0;       // neighbours (not counting the point) behind its core distance; 0: min_cluster_size - 1
  float max_distance = 0.6f; // cosine distance past which two points are never linked
  // HDBSCAN(epsilon) (Malzer and Baum 2020): a chosen cluster born at a distance below
  // epsilon gives way to its nearest ancestor born at or past it (or its tree's root), so
  // a group is not split where all that separates its parts is shorter than epsilon.
  // 0: plain excess of mass.
  float epsilon = 0;
};

struct Clustering {
  int clusters = 0;
  std::vector<int> label;        // per point: cluster in [0, clusters), or -1 for noise
  std::vector<float> strength;   // per point in (0, 1]: how long it stayed, relative to its cluster's most persistent point; 0 for noise
  std::vector<float> stability;  // per cluster: excess of mass when chosen
};

// Clusters numbered by their smallest member, so equal inputs give equal labels.
Clustering Hdbscan(const KnnGraph& graph, const HdbscanOptions& options);

}  // namespace framemill::cluster
