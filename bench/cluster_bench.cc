// Face clustering at scale, after leveldb's db_bench: a plain executable that prints its
// setup, then one line per workload. It measures only; nothing is asserted.
//
//   cluster_bench [--benchmarks=cluster_10k,cluster_100k,cluster_1m] [--dim=1024]
//                 [--recall_queries=1000] [--device=cpu|cuda] [--exact_up_to=20000]
//   cluster_bench --benchmarks=dedup_10k,dedup_100k   (not by default)
//
// dedup_N: the dedup stage's grouping (cluster/near_duplicates.h) over N synthetic
// signatures of categorize's shape (1280-d embeddings, 64-bit pHash): 90% distinct pictures
// in random directions, 10% copies of one of them (cosine ~0.9; half with the hash a few
// bits off, as a resize or re-compression leaves it, half with an unrelated hash, as a crop
// or a turn does). The pixel check is simulated by the truth, so the figures are the
// grouping's own cost and the number of checks it asks for, not ORB's.
//
// Each workload draws synthetic embeddings: identities of Zipf-like sizes (a few people
// in many photos, many in few) around random centres, spread so that two faces of one
// person have cosine ~0.7 (faceres pairs of one person measure about that), plus 5%
// strangers in random directions. It runs in a forked child, so "peak RSS" is that
// workload's own high-water mark. The neighbour graph's recall is measured against
// exact search for --recall_queries random points.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <tbb/parallel_for.h>

#include "bench/bench_support.h"
#include "cluster/cluster.h"
#include "cluster/metrics.h"
#include "cluster/near_duplicates.h"
#include "gpu/compute_backend.h"
#include "gpu/ops.h"
#include "stages/stage_options.h"

namespace framemill {
namespace {

struct Flags {
  std::string benchmarks = "cluster_10k,cluster_100k,cluster_1m";
  int dim = 1024;
  int recall_queries = 1000;
  std::string device = "cpu";
  int64_t exact_up_to = 20000;
} FLAGS;

constexpr float kSigma = 0.65f;   // per-identity spread: same-person cosine ~ 1/(1+s^2) = 0.70
constexpr double kStrangers = 0.05;

struct Data {
  cluster::Embeddings e;
  std::vector<int> truth;
  int identities = 0;
};

// Identity sizes ~ 2 + Zipf(1.1) capped at 2000, until n points (95% of them).
Data Draw(int64_t n, int dim, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<int> sizes;
  int64_t members = 0;
  const auto want = static_cast<int64_t>(double(n) * (1 - kStrangers));
  std::uniform_real_distribution<double> u(0, 1);
  while (members < want) {
    int s = 2 + static_cast<int>(std::min(2000.0, std::pow(1 - u(rng), -1 / 1.1) - 1));
    s = static_cast<int>(std::min<int64_t>(s, want - members));
    sizes.push_back(s);
    members += s;
  }
  Data d;
  d.identities = static_cast<int>(sizes.size());
  d.e.n = n;
  d.e.dim = dim;
  d.e.data.resize(static_cast<size_t>(n) * dim);
  d.truth.assign(static_cast<size_t>(n), -1);
  std::vector<int64_t> first(sizes.size() + 1, 0);
  for (size_t c = 0; c < sizes.size(); ++c) first[c + 1] = first[c] + sizes[c];
  // Centres, then members, in parallel with per-identity seeds (the same data each run).
  tbb::parallel_for(size_t{0}, sizes.size() + 1, [&](size_t c) {
    std::mt19937_64 r(seed * 1000003 + c);
    std::normal_distribution<float> g(0, 1);
    const float scale = 1 / std::sqrt(float(dim));
    if (c == sizes.size()) {  // strangers
      for (int64_t i = members; i < n; ++i)
        for (int j = 0; j < dim; ++j) d.e.data[i * dim + j] = g(r);
      return;
    }
    std::vector<float> centre(dim);
    for (float& v : centre) v = g(r) * scale;
    for (int64_t i = first[c]; i < first[c + 1]; ++i) {
      d.truth[i] = static_cast<int>(c);
      for (int j = 0; j < dim; ++j) d.e.data[i * dim + j] = centre[j] + kSigma * g(r) * scale;
    }
  });
  cluster::Normalize(&d.e);
  return d;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The recall of the graph the clusterer built, for a sample of its points.
double SampleRecall(const cluster::Embeddings& e, const cluster::KnnGraph& g, int queries) {
  std::mt19937_64 rng(3);
  std::vector<int64_t> rows(static_cast<size_t>(std::min<int64_t>(queries, e.n)));
  for (int64_t& r : rows) r = static_cast<int64_t>(rng() % e.n);
  std::vector<float> q(rows.size() * e.dim);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy(e.row(rows[i]), e.row(rows[i]) + e.dim, q.begin() + i * e.dim);
  gpu::SimilarityQuery sq{q.data(), static_cast<int64_t>(rows.size()), e.data.data(), e.n, e.dim, g.k,
                          rows.data()};
  gpu::TopK exact = gpu::TopKSimilarCpu(sq);
  int64_t found = 0, total = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int32_t* a = &g.ids[rows[i] * g.k];
    for (int j = 0; j < g.k; ++j) {
      ++total;
      found += std::find(a, a + g.k, exact.ids[i * g.k + j]) != a + g.k;
    }
  }
  return double(found) / double(total);
}

// The face_clusters stage's defaults (stages/stage_options.h), as the stage maps them.
cluster::ClusterOptions FaceDefaults() {
  const FaceClustersOptions f;
  cluster::ClusterOptions o;
  o.hdbscan.min_cluster_size = f.min_cluster_size;
  o.hdbscan.max_distance = static_cast<float>(1.0 - f.similarity);
  o.hdbscan.epsilon = static_cast<float>(1.0 - f.split_similarity);
  o.member_similarity = static_cast<float>(f.member_similarity);
  o.neighbours = f.neighbours;
  o.exact_up_to = FLAGS.exact_up_to;
  return o;
}

void RunWorkload(int64_t n) {
  const double t0 = Now();
  Data d = Draw(n, FLAGS.dim, 42 + static_cast<unsigned>(n));
  const double drawn = Now() - t0;
  const cluster::ClusterOptions o = FaceDefaults();
  std::unique_ptr<gpu::ComputeBackend> device;
  if (FLAGS.device == "cuda") {
    auto b = gpu::MakeCudaBackend(0);
    if (!b.ok()) {
      std::printf("  no CUDA device: %s\n", b.status().ToString().c_str());
      std::exit(1);
    }
    device = std::move(b).value();
  }
  auto run = cluster::ClusterEmbeddings(d.e, o, device.get());
  if (!run.ok()) {
    std::printf("  failed: %s\n", run.status().ToString().c_str());
    std::exit(1);
  }
  cluster::Agreement a = cluster::Compare(d.truth, run->clustering.label);
  double recall = -1;
  if (run->graph == "hnsw" && FLAGS.recall_queries > 0)
    recall = SampleRecall(d.e, run->knn, FLAGS.recall_queries);
  int noise = 0;
  for (int l : run->clustering.label) noise += l < 0;
  std::printf("%9lld faces %7d identities | graph %-14s %8.2f s | bridges %d, hdbscan %7.2f s | "
              "clusters %7d noise %6.2f%% | ARI %.4f purity %.4f merged %d split %d",
              static_cast<long long>(n), d.identities, run->graph.c_str(), run->graph_s,
              run->bridges, run->cluster_s, run->clustering.clusters, 100.0 * noise / double(n), a.ari,
              a.purity, a.merged, a.split);
  if (recall >= 0) std::printf(" | graph recall@%d %.4f", o.neighbours, recall);
  std::printf(" | (draw %.1f s)\n", drawn);
  std::fflush(stdout);
}

void RunDedup(int64_t n) {
  const double t0 = Now();
  constexpr int kDim = 1280;
  const int64_t originals = n - n / 10;
  std::vector<cluster::PictureSignature> p(static_cast<size_t>(n));
  std::vector<int64_t> truth(static_cast<size_t>(n));
  tbb::parallel_for(int64_t{0}, n, [&](int64_t i) {
    std::mt19937_64 r(7 + static_cast<uint64_t>(i));
    std::normal_distribution<float> g(0, 1);
    cluster::PictureSignature& s = p[static_cast<size_t>(i)];
    s.embedding.resize(kDim);
    s.pixels = 1000 + static_cast<int64_t>(r() % 1000);
    if (i < originals) {
      truth[static_cast<size_t>(i)] = i;
      for (float& v : s.embedding) v = g(r);
      s.phash = r();
    }
  });
  tbb::parallel_for(originals, n, [&](int64_t i) {
    std::mt19937_64 r(99 + static_cast<uint64_t>(i));
    std::normal_distribution<float> g(0, 1);
    const int64_t of = static_cast<int64_t>(r() % static_cast<uint64_t>(originals));
    truth[static_cast<size_t>(i)] = of;
    cluster::PictureSignature& s = p[static_cast<size_t>(i)];
    const auto& o = p[static_cast<size_t>(of)];
    double norm = 0;
    for (float v : o.embedding) norm += double(v) * v;
    const float scale = static_cast<float>(std::sqrt(norm / kDim));
    for (int k = 0; k < kDim; ++k) s.embedding[k] = o.embedding[k] + 0.48f * scale * g(r);  // cosine ~0.9
    s.phash = (i % 2 == 0) ? (o.phash ^ (uint64_t{1} << (r() % 64)) ^ (uint64_t{1} << (r() % 64))) : r();
  });
  for (auto& s : p) {
    double norm = 0;
    for (float v : s.embedding) norm += double(v) * v;
    for (float& v : s.embedding) v = static_cast<float>(v / std::sqrt(norm));
  }
  const double drawn = Now() - t0;
  std::atomic<int64_t> checks{0};
  cluster::NearDuplicateOptions o;
  o.exact_up_to = FLAGS.exact_up_to;
  cluster::GroupingStats st;
  const double t1 = Now();
  auto groups = cluster::GroupNearDuplicates(p, o, [&](size_t a, size_t b) {
    ++checks;
    return truth[a] == truth[b];
  }, &st);
  const double grouped_s = Now() - t1;
  if (!groups.ok()) {
    std::printf("  failed: %s\n", groups.status().ToString().c_str());
    std::exit(1);
  }
  std::vector<int64_t> group_of(static_cast<size_t>(n), -1);
  int64_t mixed = 0;
  for (size_t gi = 0; gi < groups->size(); ++gi) {
    const auto& g = (*groups)[gi];
    group_of[g.representative] = static_cast<int64_t>(gi);
    std::set<int64_t> owners = {truth[g.representative]};
    for (const auto& m : g.members) group_of[m.other] = static_cast<int64_t>(gi), owners.insert(truth[m.other]);
    mixed += owners.size() > 1;
  }
  int64_t copies = n - originals, found = 0;
  for (int64_t i = originals; i < n; ++i)
    found += group_of[static_cast<size_t>(i)] >= 0 &&
             group_of[static_cast<size_t>(i)] == group_of[static_cast<size_t>(truth[static_cast<size_t>(i)])];
  std::printf("%9lld pictures %7lld copies | neighbours %-5s grouping %7.2f s | pairs: hash %lld, embedding %lld, "
              "checks %lld (%.2f per picture) | copies grouped %.4f, mixed groups %lld | (draw %.1f s)\n",
              static_cast<long long>(n), static_cast<long long>(copies), st.neighbours.c_str(), grouped_s,
              static_cast<long long>(st.proposed_by_hash), static_cast<long long>(st.proposed_by_embedding),
              static_cast<long long>(checks.load()), double(checks.load()) / double(n),
              double(found) / double(std::max<int64_t>(1, copies)), static_cast<long long>(mixed), drawn);
  std::fflush(stdout);
}

int Run() {
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  std::printf("framemill cluster_bench\nDate:       %s\nCPU:        %u threads\n", date,
              std::thread::hardware_concurrency());
  std::printf("Embeddings: %d-d, unit norm; identities of Zipf(1.1) sizes (2..2000), "
              "same-person cosine ~%.2f; %.0f%% strangers\n",
              FLAGS.dim, 1 / (1 + kSigma * kSigma), 100 * kStrangers);
  const cluster::ClusterOptions o = FaceDefaults();
  std::printf("Clustering: face_clusters' defaults: k=%d, min_cluster_size=%d, max_distance=%.2f, "
              "epsilon=%.2f, member_similarity=%.2f; exact graph on the CPU "
              "up to %lld points, else HNSW (M=%d, ef_construction=%d); device %s\n",
              o.neighbours, o.hdbscan.min_cluster_size, o.hdbscan.max_distance,
              o.hdbscan.epsilon, o.member_similarity,
              static_cast<long long>(FLAGS.exact_up_to), o.hnsw.m, o.hnsw.ef_construction,
              FLAGS.device.c_str());
  std::printf("------------------------------------------------\n");
  std::string list = FLAGS.benchmarks + ",";
  for (size_t p = 0, q; (q = list.find(',', p)) != std::string::npos; p = q + 1) {
    const std::string name = list.substr(p, q - p);
    int64_t n = 0;
    bool dedup = false;
    if (name == "dedup_10k") n = 10'000, dedup = true;
    else if (name == "dedup_100k") n = 100'000, dedup = true;
    else if (name == "cluster_10k") n = 10'000;
    else if (name == "cluster_100k") n = 100'000;
    else if (name == "cluster_1m") n = 1'000'000;
    else if (name.empty()) continue;
    else {
      std::fprintf(stderr, "unknown benchmark %s\n", name.c_str());
      return 2;
    }
    std::printf("%-13s", name.c_str());
    std::fflush(stdout);
    const double t0 = Now();
    const pid_t pid = fork();
    if (pid == 0) {
      if (dedup) RunDedup(n);
      else RunWorkload(n);
      _exit(0);
    }
    int status = 0;
    struct rusage ru {};
    wait4(pid, &status, 0, &ru);
    std::printf("%-13s wall %.1f s, peak RSS %.2f GiB%s\n", "", Now() - t0,
                ru.ru_maxrss / 1048576.0, status == 0 ? "" : " (failed)");
  }
  return 0;
}

}  // namespace
}  // namespace framemill

int main(int argc, char** argv) {
  using framemill::FLAGS;
  if (!framemill::bench::ParseFlags(
          "cluster_bench", argc, argv,
          {{"--benchmarks=", &FLAGS.benchmarks}, {"--dim=", &FLAGS.dim},
           {"--recall_queries=", &FLAGS.recall_queries}, {"--exact_up_to=", &FLAGS.exact_up_to},
           {"--device=", &FLAGS.device}},
          "usage: cluster_bench [--benchmarks=cluster_10k,cluster_100k,cluster_1m] [--dim=N]"
          " [--recall_queries=N] [--exact_up_to=N] [--device=cpu|cuda]\n"))
    return 2;
  if (FLAGS.dim < 1) return 2;
  return framemill::Run();
}
