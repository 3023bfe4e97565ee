// Near-duplicate signatures and grouping (cluster/near_duplicates.h) on real photos.
#include "cluster/near_duplicates.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "tests/support/test_support.h"

namespace framemill::cluster {
namespace {

cv::Mat Photo(const char* name) { return cv::imread(testing::SampleData(name), cv::IMREAD_COLOR); }

std::vector<float> Unit(std::vector<float> v) {
  double n = 0;
  for (float x : v) n += double(x) * x;
  for (float& x : v) x = static_cast<float>(x / std::sqrt(n));
  return v;
}

TEST(NearDuplicatesTest, ASignatureSurvivesItsJsonAndAResizedCopyHashesClose) {
  const cv::Mat messi = Photo("messi5.jpg");
  cv::Mat half;
  cv::resize(messi, half, cv::Size(), 0.5, 0.5, cv::INTER_AREA);
  const PictureSignature a = MakeSignature(messi, {3, 4, 0});
  EXPECT_FLOAT_EQ(a.embedding[0], 0.6f);
  EXPECT_EQ(a.pixels, 548 * 342);
  EXPECT_GT(a.sharpness, 0);
  auto back = SignatureFromJson(ToJson(a));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->phash, a.phash);
  for (size_t i = 0; i < a.embedding.size(); ++i) EXPECT_NEAR(back->embedding[i], a.embedding[i], 1.0 / 127);
  EXPECT_EQ(back->pixels, a.pixels);
  EXPECT_LE(HammingDistance(a.phash, MakeSignature(half, {1}).phash), 8);
  EXPECT_GT(HammingDistance(a.phash, MakeSignature(Photo("fruits.jpg"), {1}).phash), 8);
  EXPECT_FALSE(SignatureFromJson(nlohmann::json{{"phash", "zz"}, {"embedding", ""}}).ok());
}

// The hash joins on its own; a pair only the embedding proposes waits for the check; the
// representative is the largest, then the largest file.
TEST(NearDuplicatesTest, TheHashJoinsTheEmbeddingAsksAndTheLargestRepresents) {
  std::vector<PictureSignature> p(5);
  p[0].phash = 0x00000000000000FFull, p[0].pixels = 100, p[0].embedding = Unit({1, 0, 0});
  p[1].phash = 0x00000000000000FEull, p[1].pixels = 400, p[1].embedding = Unit({0, 1, 0});  // 1 bit from p[0]
  p[2].phash = 0xFFFF0000FFFF0000ull, p[2].pixels = 400, p[2].bytes = 9, p[2].embedding = Unit({0, 0, 1});
  p[3].phash = 0x0F0F0F0F0F0F0F0Full, p[3].pixels = 400, p[3].bytes = 5, p[3].embedding = Unit({0.05f, 0, 1});
  p[4].phash = 0xF0F0F0F0F0F0F0F0ull, p[4].pixels = 50, p[4].embedding = Unit({-1, 0, 0});
  NearDuplicateOptions o;
  int asked = 0;
  auto refuse = [&](size_t, size_t) { return ++asked, false; };
  auto groups = GroupNearDuplicates(p, o, refuse);
  ASSERT_TRUE(groups.ok());
  ASSERT_EQ(groups->size(), 1u) << "the embedding's pair was refused";
  EXPECT_EQ((*groups)[0].representative, 1u);
  ASSERT_EQ((*groups)[0].members.size(), 1u);
  EXPECT_EQ((*groups)[0].members[0].signal, "phash");
  EXPECT_EQ(asked, 1);
  groups = GroupNearDuplicates(p, o, [](size_t, size_t) { return true; });
  ASSERT_TRUE(groups.ok());
  ASSERT_EQ(groups->size(), 2u);
  EXPECT_EQ((*groups)[1].representative, 2u) << "equal pixels: the larger file";
  EXPECT_EQ((*groups)[1].members[0].signal, "embedding");
  // Beyond exact_up_to the neighbours come from HNSW: the same groups here.
  o.exact_up_to = 2;
  GroupingStats stats;
  auto approx = GroupNearDuplicates(p, o, [](size_t, size_t) { return true; }, &stats);
  ASSERT_TRUE(approx.ok());
  EXPECT_EQ(stats.neighbours, "hnsw");
  ASSERT_EQ(approx->size(), 2u);
  EXPECT_EQ((*approx)[1].representative, 2u);
}

// A group is a set of items: a video's frames (one item) matched by two copies make one
// group of three items, not a group per frame; one item's frames alone make none.
TEST(NearDuplicatesTest, AnItemIsInOneGroupWhicheverOfItsFramesMatched) {
  std::vector<PictureSignature> p(6);
  const uint64_t scene_a = 0x00000000000000FFull, scene_b = 0xFFFF0000FFFF0000ull, far = 0x0F0F0F0F0F0F0F0Full;
  p[0].phash = scene_a, p[0].pixels = 400, p[0].embedding = Unit({1, 0, 0});  // video 0, frame 1
  p[1].phash = scene_b, p[1].pixels = 400, p[1].embedding = Unit({0, 1, 0});  // video 0, frame 2
  p[2].phash = scene_a, p[2].pixels = 100, p[2].embedding = Unit({1, 0, 0});  // copy 1 of frame 1
  p[3].phash = scene_b, p[3].pixels = 100, p[3].embedding = Unit({0, 1, 0});  // copy 2 of frame 2
  p[4].phash = far, p[4].pixels = 100, p[4].embedding = Unit({0, 0, 1});      // video 4, frame 1
  p[5].phash = ~far, p[5].pixels = 100, p[5].embedding = Unit({0, 0.3f, -1});  // video 4, frame 2
  const std::vector<int64_t> items = {0, 0, 1, 2, 4, 4};
  auto refuse = [](size_t, size_t) { return false; };
  auto per_picture = GroupNearDuplicates(p, NearDuplicateOptions{}, refuse);
  ASSERT_TRUE(per_picture.ok());
  EXPECT_EQ(per_picture->size(), 2u) << "without items: one group per matched frame";
  auto groups = GroupNearDuplicates(p, NearDuplicateOptions{}, refuse, nullptr, items);
  ASSERT_TRUE(groups.ok());
  ASSERT_EQ(groups->size(), 1u) << "video 4's frames alone are no group";
  EXPECT_EQ((*groups)[0].representative, 0u);
  std::set<size_t> members;
  for (const Link& m : (*groups)[0].members) members.insert(m.other);
  EXPECT_EQ(members, (std::set<size_t>{1, 2, 3}));
  EXPECT_FALSE(GroupNearDuplicates(p, NearDuplicateOptions{}, refuse, nullptr, {0, 1}).ok());
}

// A dataset of blank frames shares one hash: one group, formed in linear pairs.
TEST(NearDuplicatesTest, ThousandsOfIdenticalHashesMakeOneGroupWithoutAPairEach) {
  std::vector<PictureSignature> p(6'000);
  std::mt19937_64 rng(29);  // the other pictures' hashes: random, far from each other
  for (size_t i = 0; i < p.size(); ++i) {
    p[i].phash = i < 5'000 ? 0 : rng() | 1;
    p[i].pixels = 100;
    p[i].embedding = Unit({1, float(i % 7), float(i % 11)});
  }
  NearDuplicateOptions o;
  GroupingStats st;
  auto groups = GroupNearDuplicates(p, o, [](size_t, size_t) { return false; }, &st);
  ASSERT_TRUE(groups.ok());
  ASSERT_GE(groups->size(), 1u);
  EXPECT_EQ((*groups)[0].members.size(), 4'999u);
  EXPECT_LT(st.proposed_by_hash, 5'100) << "chained, not every pair";
}

}  // namespace
}  // namespace framemill::cluster
