// TopKSimilar on the CPU and the simulated device, against the plain definition: sort
// every base row by similarity (ties to the lower id) and take k.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "gpu/compute_backend.h"
#include "gpu/ops.h"

namespace framemill::gpu {
namespace {

std::vector<float> Rows(int64_t n, int dim, unsigned seed, bool coarse = false) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> step(-2, 2);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> v(static_cast<size_t>(n) * dim);
  // Coarse values (multiples of 1/4) make exact ties in the dot products.
  for (float& x : v) x = coarse ? step(rng) * 0.25f : g(rng);
  return v;
}

TopK Definition(const SimilarityQuery& q) {
  TopK out;
  out.k = q.k;
  for (int64_t i = 0; i < q.nq; ++i) {
    std::vector<std::pair<float, int32_t>> all;
    for (int64_t b = 0; b < q.nb; ++b) {
      if (q.self && q.self[i] == b) continue;
      double s = 0;
      for (int d = 0; d < q.dim; ++d) s += double(q.queries[i * q.dim + d]) * q.base[b * q.dim + d];
      all.emplace_back(static_cast<float>(s), static_cast<int32_t>(b));
    }
    std::sort(all.begin(), all.end(), [](auto& a, auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    for (int j = 0; j < q.k; ++j) {
      const bool have = j < static_cast<int>(all.size());
      out.ids.push_back(have ? all[j].second : -1);
      out.sims.push_back(have ? all[j].first : kNoSimilarity);
    }
  }
  return out;
}

TEST(TopKSimilarTest, CpuMatchesTheDefinitionWithTiesAndSelfSkips) {
  const int dim = 100;  // not a multiple of the 64 accumulator lanes
  auto base = Rows(700, dim, 1, /*coarse=*/true);
  std::vector<int64_t> self(300);
  std::iota(self.begin(), self.end(), 200);
  SimilarityQuery q{base.data() + 200 * dim, 300, base.data(), 700, dim, 12, self.data()};
  TopK got = TopKSimilarCpu(q), want = Definition(q);
  EXPECT_EQ(got.ids, want.ids);  // coarse values: every dot product is exact in float
  EXPECT_EQ(got.sims, want.sims);
}

TEST(TopKSimilarTest, FewerBaseRowsThanKLeaveEmptySlots) {
  auto base = Rows(3, 8, 2);
  SimilarityQuery q{base.data(), 3, base.data(), 3, 8, 5, nullptr};
  TopK got = TopKSimilarCpu(q);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got.ids[i * 5], i) << "a row is most similar to itself";
    EXPECT_EQ(got.ids[i * 5 + 3], -1);
    EXPECT_EQ(got.sims[i * 5 + 4], kNoSimilarity);
  }
}

TEST(TopKSimilarTest, BackendsRefuseBadQueriesAndTheSimDeviceRunsOutOfMemory) {
  auto base = Rows(64, 16, 3);
  auto cpu = MakeCpuBackend();
  SimilarityQuery bad{base.data(), 64, base.data(), 64, 16, 0, nullptr};
  EXPECT_EQ(cpu->TopKSimilar(bad).status().code(), Status::Code::kInvalidArgument);
  bad.k = 300;
  EXPECT_EQ(cpu->TopKSimilar(bad).status().code(), Status::Code::kInvalidArgument);
  SimilarityQuery q{base.data(), 64, base.data(), 64, 16, 4, nullptr};
  auto tiny = MakeSimBackend(0);
  EXPECT_EQ(tiny->TopKSimilar(q).status().code(), Status::Code::kOutOfMemory);
  auto sim = MakeSimBackend(64);
  auto r = sim->TopKSimilar(q);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ids, TopKSimilarCpu(q).ids);
  EXPECT_GT(sim->LastBatchBytes(), 64 * 16 * 4);
}

}  // namespace
}  // namespace framemill::gpu
