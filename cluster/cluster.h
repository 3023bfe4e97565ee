// Clustering a set of embeddings end to end: the neighbour graph (exact similarity tiles
// on a GPU, or on the CPU for small sets; HNSW for large sets on the CPU, or when the
// device runs out of memory), then HDBSCAN*. What face_clusters and the benchmark call.
#pragma once

#include <string>

#include "cluster/hdbscan.h"
#include "cluster/knn.h"
#include "gpu/compute_backend.h"

namespace framemill::cluster {

struct ClusterOptions {
  HdbscanOptions hdbscan;
  int neighbours = 16;             // k of the graph (>= min_samples)
  int64_t exact_up_to = 20000;     // on the CPU, exact below this many points, else HNSW
  HnswOptions hnsw;
};

struct ClusterRun {
  Clustering clustering;
  KnnGraph knn;         // the neighbour graph it was built on
  std::string graph;    // "exact on cpu", "exact on cuda:0", "hnsw"
  double graph_s = 0, cluster_s = 0;
};

// `device`: a GPU backend for the similarity tiles, or null (the CPU). A device's
// OutOfMemory falls back to HNSW on the CPU; other errors come back.
Result<ClusterRun> ClusterEmbeddings(const Embeddings& e, const ClusterOptions& options,
                                     gpu::ComputeBackend* device);

}  // namespace framemill::cluster
