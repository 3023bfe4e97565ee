// Strangers let into a cluster by density are turned out (cluster/cluster.h).
#include "cluster/cluster.h"

#include <gtest/gtest.h>

#include <cmath>

namespace framemill::cluster {
namespace {

// Unit vectors in 3-d at `cosine` from the x axis, spread around it.
void Around(float cosine, int count, Embeddings* e) {
  const float s = std::sqrt(1 - cosine * cosine);
  for (int i = 0; i < count; ++i) {
    const float phi = 6.2831853f * i / count;
    e->data.insert(e->data.end(), {cosine, s * std::cos(phi), s * std::sin(phi)});
  }
  e->n += count;
}

TEST(PruneStrangersTest, AMemberFarFromItsClustersMeanBecomesNoise) {
  Embeddings e;
  e.dim = 3;
  Around(0.95f, 6, &e);  // points 0-5: one person
  e.data.insert(e.data.end(), {0.5f, 0.8660254f, 0});  // point 6: a stranger, 60 degrees off
  e.n += 1;
  Around(-0.95f, 3, &e);  // points 7-9: another person, on the far side
  Clustering c;
  c.clusters = 2;
  c.label = {0, 0, 0, 0, 0, 0, 0, 1, 1, 1};
  c.strength.assign(10, 1.f);
  c.stability = {5, 3};
  PruneStrangers(e, 0.7f, 3, &c);
  EXPECT_EQ(c.clusters, 2);
  EXPECT_EQ(c.label, std::vector<int>({0, 0, 0, 0, 0, 0, -1, 1, 1, 1}));
  EXPECT_EQ(c.strength[6], 0.f);
  EXPECT_EQ(c.stability, std::vector<float>({5, 3}));
}

TEST(PruneStrangersTest, AClusterLeftTooSmallDissolvesAndTheRestAreRenumbered) {
  Embeddings e;
  e.dim = 3;
  Around(0.95f, 2, &e);                             // 0-1
  e.data.insert(e.data.end(), {0.3f, 0, 0.9539392f});  // 2: joined them through density
  e.n += 1;
  Around(-0.95f, 4, &e);                            // 3-6
  Clustering c;
  c.clusters = 2;
  c.label = {0, 0, 0, 1, 1, 1, 1};
  c.strength.assign(7, 1.f);
  c.stability = {2, 4};
  PruneStrangers(e, 0.7f, 3, &c);
  EXPECT_EQ(c.clusters, 1);
  EXPECT_EQ(c.label, std::vector<int>({-1, -1, -1, 0, 0, 0, 0}));
  EXPECT_EQ(c.stability, std::vector<float>({4}));
  // Turned off, nothing changes.
  Clustering same;
  same.clusters = 1;
  same.label = {0, 0, 0, -1, -1, -1, -1};
  same.strength.assign(7, 1.f);
  PruneStrangers(e, -1.f, 3, &same);
  EXPECT_EQ(same.label, std::vector<int>({0, 0, 0, -1, -1, -1, -1}));
}

}  // namespace
}  // namespace framemill::cluster
