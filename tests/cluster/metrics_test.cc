#include "cluster/metrics.h"

#include <gtest/gtest.h>

namespace framemill::cluster {
namespace {

TEST(MetricsTest, IdenticalUpToRenamingIsPerfect) {
  Agreement a = Compare({0, 0, 1, 1, 2}, {5, 5, 3, 3, 9});
  EXPECT_DOUBLE_EQ(a.ari, 1.0);
  EXPECT_DOUBLE_EQ(a.purity, 1.0);
  EXPECT_EQ(a.merged, 0);
  EXPECT_EQ(a.split, 0);
}

TEST(MetricsTest, AKnownValue) {
  // The example of sklearn's adjusted_rand_score docs: [0,0,1,2] vs [0,0,1,1] -> 0.5714...
  EXPECT_NEAR(Compare({0, 0, 1, 2}, {0, 0, 1, 1}).ari, 0.571428571, 1e-6);
}

TEST(MetricsTest, MergesSplitsAndNoiseAreCounted) {
  // Person 0 split over clusters 0 and 1; cluster 2 merges persons 1 and 2; one face noise.
  Agreement a = Compare({0, 0, 0, 0, 1, 1, 2, 2, 2}, {0, 0, 1, 1, 2, 2, 2, 2, -1});
  EXPECT_EQ(a.split, 1);
  EXPECT_EQ(a.merged, 1);
  EXPECT_EQ(a.noise, 1);
  EXPECT_NEAR(a.purity, 6.0 / 8.0, 1e-12);
  EXPECT_LT(a.ari, 1.0);
}

TEST(MetricsTest, PairwiseAndBCubedByHand) {
  // Truth {a a a b b}, found {x x y y y}: 4 true pairs, 4 found pairs, 2 in both.
  // BCubed per point: precision 1, 1, 1/3, 2/3, 2/3; recall 2/3, 2/3, 1/3, 1, 1.
  Agreement a = Compare({0, 0, 0, 1, 1}, {0, 0, 1, 1, 1});
  EXPECT_NEAR(a.pair_precision, 0.5, 1e-12);
  EXPECT_NEAR(a.pair_recall, 0.5, 1e-12);
  EXPECT_NEAR(a.pair_f, 0.5, 1e-12);
  EXPECT_NEAR(a.bcubed_precision, 11.0 / 15.0, 1e-12);
  EXPECT_NEAR(a.bcubed_recall, 11.0 / 15.0, 1e-12);
  // Noise is a singleton: calling everyone noise is precise and recalls nothing of a pair.
  Agreement n = Compare({0, 0}, {-1, -1});
  EXPECT_DOUBLE_EQ(n.pair_precision, 1.0);
  EXPECT_DOUBLE_EQ(n.pair_recall, 0.0);
  EXPECT_DOUBLE_EQ(n.bcubed_precision, 1.0);
  EXPECT_DOUBLE_EQ(n.bcubed_recall, 0.5);
}

}  // namespace
}  // namespace framemill::cluster
