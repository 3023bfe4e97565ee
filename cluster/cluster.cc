#include "cluster/cluster.h"

#include <algorithm>
#include <chrono>
#include <optional>

namespace framemill::cluster {
namespace {

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

Result<ClusterRun> ClusterEmbeddings(const Embeddings& e, const ClusterOptions& o,
                                     gpu::ComputeBackend* device) {
  ClusterRun run;
  const int k = std::max({o.neighbours, o.hdbscan.min_samples, 1});
  auto start = std::chrono::steady_clock::now();
  std::optional<Result<KnnGraph>> graph;
  if (device != nullptr && device->is_gpu()) {
    graph = ExactKnn(e, k, *device, e.n);
    run.graph = "exact on " + device->device();
    if (!graph->ok() && graph->status().IsOutOfMemory()) graph.reset();  // the CPU's turn
  }
  if (!graph && e.n <= o.exact_up_to) {
    auto cpu = gpu::MakeCpuBackend();
    graph = ExactKnn(e, k, *cpu);
    run.graph = "exact on cpu";
  } else if (!graph) {
    graph = HnswKnn(e, k, o.hnsw);
    run.graph = "hnsw";
  }
  if (!graph->ok()) return graph->status();
  run.graph_s = Since(start);
  start = std::chrono::steady_clock::now();
  run.knn = std::move(**graph);
  run.clustering = Hdbscan(run.knn, o.hdbscan);
  run.cluster_s = Since(start);
  return run;
}

}  // namespace framemill::cluster
