#include "cluster/cluster.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "gpu/ops.h"

namespace framemill::cluster {
namespace {

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

namespace {

// Each cluster's mean direction (unit length), from its current members.
std::vector<std::vector<float>> MeanDirections(const Embeddings& e, const Clustering& c) {
  std::vector<std::vector<float>> mean(c.clusters, std::vector<float>(e.dim, 0.f));
  for (int64_t i = 0; i < e.n; ++i) {
    if (c.label[i] < 0) continue;
    const float* r = e.row(i);
    for (int d = 0; d < e.dim; ++d) mean[c.label[i]][d] += r[d];
  }
  for (auto& m : mean) {
    const float norm = std::sqrt(gpu::DotCpu(m.data(), m.data(), e.dim));
    if (norm > 0)
      for (float& v : m) v /= norm;
  }
  return mean;
}

// Drops clusters with fewer than min_size members (their points become noise) and
// renumbers the rest 0.. in their old order.
void Compact(int min_size, Clustering* c) {
  std::vector<int> size(c->clusters, 0);
  for (int l : c->label)
    if (l >= 0) ++size[l];
  std::vector<int> renumber(c->clusters, -1);
  std::vector<float> stability;
  int next = 0;
  for (int l = 0; l < c->clusters; ++l) {
    if (size[l] < min_size) continue;
    renumber[l] = next++;
    if (l < static_cast<int>(c->stability.size())) stability.push_back(c->stability[l]);
  }
  for (size_t i = 0; i < c->label.size(); ++i) {
    if (c->label[i] >= 0) c->label[i] = renumber[c->label[i]];
    if (c->label[i] < 0 && i < c->strength.size()) c->strength[i] = 0;
  }
  c->clusters = next;
  c->stability = std::move(stability);
}

}  // namespace

void PruneStrangers(const Embeddings& e, float min_similarity, int min_size, Clustering* c) {
  for (bool changed = true; changed;) {
    changed = false;
    const auto mean = MeanDirections(e, *c);
    for (int64_t i = 0; i < e.n; ++i) {
      const int l = c->label[i];
      if (l >= 0 && gpu::DotCpu(mean[l].data(), e.row(i), e.dim) < min_similarity) {
        c->label[i] = -1;
        changed = true;
      }
    }
    const int before = c->clusters;
    Compact(min_size, c);
    changed |= c->clusters != before;
  }
}

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
  BridgeOptions bo;
  bo.max_distance = o.hdbscan.max_distance;
  run.bridges = BridgeGroups(e, bo, &run.knn);
  run.clustering = Hdbscan(run.knn, o.hdbscan);
  if (o.member_similarity > 0)
    PruneStrangers(e, o.member_similarity, o.hdbscan.min_cluster_size, &run.clustering);
  run.cluster_s = Since(start);
  return run;
}

}  // namespace framemill::cluster
