// Clustering a set of embeddings end to end: the neighbour graph (exact similarity tiles
// on a GPU, or on the CPU for small sets; HNSW for large sets on the CPU, or when the
// device runs out of memory), bridges out of closed groups (cluster/bridge.h), then
// HDBSCAN*. What face_clusters and the benchmark call.
#pragma once

#include <string>

#include "cluster/bridge.h"
#include "cluster/hdbscan.h"
#include "cluster/knn.h"
#include "gpu/compute_backend.h"

namespace framemill::cluster {

struct ClusterOptions {
  HdbscanOptions hdbscan;
  int neighbours = 16;             // k of the graph (>= min_samples)
  int64_t exact_up_to = 20000;     // on the CPU, exact below this many points, else HNSW
  HnswOptions hnsw;
  // > 0: after HDBSCAN, PruneStrangers at this similarity (0: keep HDBSCAN's members).
  float member_similarity = 0;
};

struct ClusterRun {
  Clustering clustering;
  KnnGraph knn;         // the neighbour graph it was built on
  std::string graph;    // "exact on cpu", "exact on cuda:0", "hnsw"
  int bridges = 0;      // edges BridgeGroups added
  double graph_s = 0, cluster_s = 0;
};

// A member whose cosine similarity with its cluster's mean direction is below
// `min_similarity` becomes noise, and the means are taken again until none is: density
// lets a stranger in through one or two close neighbours (on real faces, true members
// sat at 0.78 or more from their cluster's mean, strangers let in at 0.53-0.68). A cluster
// left with fewer than `min_size` points dissolves into noise; clusters are renumbered
// densely in their old order. `e` must hold unit rows.
void PruneStrangers(const Embeddings& e, float min_similarity, int min_size, Clustering* c);

// `device`: a GPU backend for the similarity tiles, or null (the CPU). A device's
// OutOfMemory falls back to HNSW on the CPU; other errors come back.
Result<ClusterRun> ClusterEmbeddings(const Embeddings& e, const ClusterOptions& options,
                                     gpu::ComputeBackend* device);

}  // namespace framemill::cluster
