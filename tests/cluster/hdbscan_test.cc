// Density clustering on synthetic embeddings with a known answer: clusters drawn around
// random centres on the sphere, and scattered points that belong to none.
#include "cluster/hdbscan.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "cluster/bridge.h"
#include "cluster/knn.h"
#include "gpu/compute_backend.h"

namespace framemill::cluster {
namespace {

struct Synthetic {
  Embeddings e;
  std::vector<int> truth;  // cluster, or -1 for scattered points
};

// `sizes[c]` points around centre c (noise sigma per dimension), then `scattered`
// uniformly random directions. In 64 dimensions random directions are nearly
// orthogonal (cosine ~0 +- 0.125), so the clusters are far apart.
Synthetic Make(const std::vector<int>& sizes, int scattered, float sigma, int dim = 64,
               unsigned seed = 7) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  Synthetic s;
  s.e.dim = dim;
  for (size_t c = 0; c < sizes.size(); ++c) {
    std::vector<float> centre(dim);
    for (float& v : centre) v = g(rng) / std::sqrt(float(dim));
    for (int i = 0; i < sizes[c]; ++i) {
      for (int j = 0; j < dim; ++j) s.e.data.push_back(centre[j] + sigma * g(rng) / std::sqrt(float(dim)));
      s.truth.push_back(static_cast<int>(c));
    }
  }
  for (int i = 0; i < scattered; ++i) {
    for (int j = 0; j < dim; ++j) s.e.data.push_back(g(rng));
    s.truth.push_back(-1);
  }
  s.e.n = static_cast<int64_t>(s.truth.size());
  Normalize(&s.e);
  return s;
}

KnnGraph Exact(const Embeddings& e, int k) {
  auto cpu = gpu::MakeCpuBackend();
  auto g = ExactKnn(e, k, *cpu, 100);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(g).value();
}

TEST(KnnTest, ExactNeighboursAreNearestFirstAndSkipThePointItself) {
  Synthetic s = Make({20, 20}, 0, 0.3f);
  KnnGraph g = Exact(s.e, 5);
  ASSERT_EQ(g.n, 40);
  for (int64_t i = 0; i < g.n; ++i) {
    for (int j = 0; j < g.k; ++j) {
      EXPECT_NE(g.ids[i * g.k + j], i);
      EXPECT_EQ(s.truth[g.ids[i * g.k + j]], s.truth[i]) << "a neighbour from the other cluster";
      if (j > 0) {
        EXPECT_LE(g.dist[i * g.k + j - 1], g.dist[i * g.k + j]);
      }
      const float d = 1 - gpu::DotCpu(s.e.row(i), s.e.row(g.ids[i * g.k + j]), s.e.dim);
      EXPECT_NEAR(g.dist[i * g.k + j], d, 1e-5);
    }
  }
}

TEST(KnnTest, FewerPointsThanKLeaveTheTailEmpty) {
  Synthetic s = Make({3}, 0, 0.3f);
  KnnGraph g = Exact(s.e, 4);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_GE(g.ids[i * 4 + 1], 0);
    EXPECT_EQ(g.ids[i * 4 + 2], -1);
    EXPECT_EQ(g.dist[i * 4 + 3], 2.0f);
  }
}

TEST(KnnTest, HnswFindsAlmostAllExactNeighbours) {
  Synthetic s = Make({400, 300, 200, 100}, 200, 0.5f);
  KnnGraph exact = Exact(s.e, 10);
  auto approx = HnswKnn(s.e, 10);
  ASSERT_TRUE(approx.ok()) << approx.status().ToString();
  EXPECT_GE(KnnRecall(*approx, exact), 0.95);
  EXPECT_EQ(KnnRecall(exact, exact), 1.0);
}

TEST(KnnTest, RowsThatAreNotFiniteBecomeZero) {
  Embeddings e;
  e.n = 2;
  e.dim = 2;
  e.data = {3, 4, std::nanf(""), 1};
  Normalize(&e);
  EXPECT_FLOAT_EQ(e.data[0], 0.6f);
  EXPECT_FLOAT_EQ(e.data[1], 0.8f);
  EXPECT_EQ(e.data[2], 0.0f);
  EXPECT_EQ(e.data[3], 0.0f);
}

TEST(KnnTest, BadShapesAreRefused) {
  Embeddings e;
  e.n = 3;
  e.dim = 4;
  e.data.resize(11);
  auto cpu = gpu::MakeCpuBackend();
  EXPECT_EQ(ExactKnn(e, 2, *cpu).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(HnswKnn(e, 2).status().code(), Status::Code::kInvalidArgument);
  e.data.resize(12);
  EXPECT_EQ(ExactKnn(e, 0, *cpu).status().code(), Status::Code::kInvalidArgument);
}

// Each found cluster is one true cluster, whole; scattered points are noise.
void ExpectRecovered(const Synthetic& s, const Clustering& c, size_t want_clusters) {
  ASSERT_EQ(static_cast<size_t>(c.clusters), want_clusters);
  std::map<int, std::set<int>> found_to_truth;
  std::map<int, std::set<int>> truth_to_found;
  int noise_in_clusters = 0, members_as_noise = 0;
  for (size_t i = 0; i < s.truth.size(); ++i) {
    if (c.label[i] >= 0 && s.truth[i] < 0) ++noise_in_clusters;
    if (c.label[i] < 0 && s.truth[i] >= 0) ++members_as_noise;
    if (c.label[i] >= 0 && s.truth[i] >= 0) {
      found_to_truth[c.label[i]].insert(s.truth[i]);
      truth_to_found[s.truth[i]].insert(c.label[i]);
    }
  }
  for (auto& [f, t] : found_to_truth) EXPECT_EQ(t.size(), 1u) << "cluster " << f << " merges people";
  for (auto& [t, f] : truth_to_found) EXPECT_EQ(f.size(), 1u) << "person " << t << " split";
  EXPECT_EQ(noise_in_clusters, 0);
  EXPECT_LE(members_as_noise, static_cast<int>(s.truth.size() / 50)) << "too many members called noise";
}

TEST(HdbscanTest, FindsTheClustersAndLeavesScatteredPointsAsNoise) {
  Synthetic s = Make({60, 40, 25, 10}, 30, 0.45f);
  Clustering c = Hdbscan(Exact(s.e, 15), {});
  ExpectRecovered(s, c, 4);
  for (size_t i = 0; i < s.truth.size(); ++i) {
    if (c.label[i] < 0) {
      EXPECT_EQ(c.strength[i], 0);
    } else {
      EXPECT_GT(c.strength[i], 0);
      EXPECT_LE(c.strength[i], 1);
    }
  }
  // Labels follow the smallest member: the first cluster drawn is cluster 0.
  EXPECT_EQ(c.label[0], 0);
}

TEST(HdbscanTest, TheSameOnTheApproximateGraph) {
  Synthetic s = Make({300, 200, 120, 60, 20}, 100, 0.45f);
  auto g = HnswKnn(s.e, 15);
  ASSERT_TRUE(g.ok());
  // Among 100 scattered directions some come within cosine 0.4 of a member by chance
  // (a 3-sigma event in 64 dimensions, over 700 members): at the default threshold they
  // join as weak members. A threshold of 0.6 keeps them out, as it would strangers.
  HdbscanOptions o;
  o.max_distance = 0.4f;
  ExpectRecovered(s, Hdbscan(*g, o), 5);
}

TEST(HdbscanTest, OnePersonAloneIsOneClusterNotNoise) {
  Synthetic s = Make({12}, 0, 0.4f);
  Clustering c = Hdbscan(Exact(s.e, 15), {});
  ASSERT_EQ(c.clusters, 1);
  for (int l : c.label) EXPECT_EQ(l, 0);
}

TEST(HdbscanTest, GroupsSmallerThanTheMinimumAreNoise) {
  Synthetic s = Make({2, 2, 30}, 0, 0.3f);
  HdbscanOptions o;
  o.min_cluster_size = 3;
  Clustering c = Hdbscan(Exact(s.e, 15), o);
  ASSERT_EQ(c.clusters, 1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.label[i], -1);
  for (int i = 4; i < 34; ++i) EXPECT_EQ(c.label[i], 0);
}

// Two tight groups whose members are all less similar than the threshold: however
// the density looks, they are never one cluster.
TEST(HdbscanTest, PairsPastTheThresholdAreNeverLinked) {
  Synthetic s = Make({20, 20}, 0, 0.2f);
  HdbscanOptions o;
  o.max_distance = 0.01f;  // members are ~0.04 apart: far tighter than the clusters
  Clustering c = Hdbscan(Exact(s.e, 15), o);
  int clustered = 0;
  for (int l : c.label) clustered += l >= 0;
  EXPECT_EQ(clustered, 0) << "nothing is within the threshold of enough neighbours";
  o.max_distance = 0.6f;
  ExpectRecovered(s, Hdbscan(Exact(s.e, 15), o), 2);
}

TEST(HdbscanTest, DuplicatesAndEmptyInputAreFine) {
  Embeddings e;
  e.dim = 4;
  for (int i = 0; i < 5; ++i) e.data.insert(e.data.end(), {1, 0, 0, 0});
  e.n = 5;
  Clustering c = Hdbscan(Exact(e, 4), {});
  ASSERT_EQ(c.clusters, 1);
  Clustering none = Hdbscan(KnnGraph{}, {});
  EXPECT_EQ(none.clusters, 0);
  EXPECT_TRUE(none.label.empty());
}

// One person seen in two shots: two tight groups whose centres are `shots_cosine` apart.
// Another person elsewhere.
Synthetic TwoShotsOfOnePerson(float shots_cosine, int per_shot = 10) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0, 1);
  const int dim = 64;
  auto random_unit = [&] {
    std::vector<float> v(dim);
    float n = 0;
    for (float& x : v) {
      x = g(rng);
      n += x * x;
    }
    for (float& x : v) x /= std::sqrt(n);
    return v;
  };
  const std::vector<float> person = random_unit(), other = random_unit();
  // cos(P + a u1, P + a u2) = 1 / (1 + a^2) for orthogonal-ish P, u1, u2.
  const float a = std::sqrt(1 / shots_cosine - 1);
  Synthetic s;
  s.e.dim = dim;
  const std::vector<std::vector<float>> centres = {person, person, other};
  for (int c = 0; c < 3; ++c) {
    std::vector<float> centre = centres[c];
    if (c < 2) {
      const auto u = random_unit();
      for (int j = 0; j < dim; ++j) centre[j] += a * u[j];
    }
    for (int i = 0; i < per_shot; ++i) {
      for (int j = 0; j < dim; ++j) s.e.data.push_back(centre[j] + 0.15f * g(rng) / std::sqrt(float(dim)));
      s.truth.push_back(c < 2 ? 0 : 1);
    }
  }
  s.e.n = 3 * per_shot;
  Normalize(&s.e);
  return s;
}

TEST(HdbscanTest, EpsilonKeepsAPersonsShotsTogetherButNotTwoPeople) {
  HdbscanOptions o;  // min_cluster_size 3
  o.max_distance = 0.4f;
  Synthetic close = TwoShotsOfOnePerson(0.8f);
  const KnnGraph gc = Exact(close.e, 16);
  // Excess of mass alone splits the person: the two shots are more stable than their union.
  Clustering plain = Hdbscan(gc, o);
  EXPECT_EQ(plain.clusters, 3);
  o.epsilon = 0.3f;  // split_similarity 0.7: shots 0.8 apart stay one
  Clustering merged = Hdbscan(gc, o);
  ASSERT_EQ(merged.clusters, 2);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(merged.label[i], close.truth[i]) << i;
  // Shots only 0.65 alike (distance 0.35 > epsilon) are left to excess of mass: apart.
  Synthetic far = TwoShotsOfOnePerson(0.65f);
  EXPECT_EQ(Hdbscan(Exact(far.e, 16), o).clusters, 3);
}

// 30 near-duplicates a shot: every point's 16 neighbours lie in its own shot, so the
// graph has no edge between the shots until BridgeGroups adds one.
TEST(HdbscanTest, ShotsLargerThanKAreJoinedByABridge) {
  Synthetic s = TwoShotsOfOnePerson(0.8f, 30);
  KnnGraph g = Exact(s.e, 16);
  HdbscanOptions o;
  o.max_distance = 0.4f;
  o.epsilon = 0.3f;
  EXPECT_EQ(Hdbscan(g, o).clusters, 3) << "the shots should be closed groups";
  BridgeOptions bo;
  bo.max_distance = o.max_distance;
  EXPECT_EQ(BridgeGroups(s.e, bo, &g), 1);  // the two shots; the other person is too far
  ASSERT_EQ(g.bridges.size(), 1u);
  EXPECT_EQ(s.truth[g.bridges[0].a], 0);
  EXPECT_EQ(s.truth[g.bridges[0].b], 0);
  EXPECT_NE(g.bridges[0].a / 30, g.bridges[0].b / 30);
  Clustering c = Hdbscan(g, o);
  ASSERT_EQ(c.clusters, 2);
  for (int i = 0; i < 90; ++i) EXPECT_EQ(c.label[i], s.truth[i]) << i;
}

}  // namespace
}  // namespace framemill::cluster
