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

}  // namespace
}  // namespace framemill::cluster
