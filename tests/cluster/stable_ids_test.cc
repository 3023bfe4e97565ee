#include "cluster/stable_ids.h"

#include <gtest/gtest.h>

namespace framemill::cluster {
namespace {

std::vector<std::string> Keys(const std::string& p, int from, int to) {
  std::vector<std::string> k;
  for (int i = from; i < to; ++i) k.push_back(p + std::to_string(i));
  return k;
}

PreviousIds Previous(const std::vector<std::pair<int64_t, std::vector<std::string>>>& clusters,
                     int64_t next) {
  PreviousIds p;
  for (const auto& [id, keys] : clusters)
    for (const auto& k : keys) p.id_of[k] = id;
  p.next_id = next;
  return p;
}

TEST(StableIdsTest, AFirstRunNumbersFromOne) {
  StableIds s = AssignStableIds({Keys("a", 0, 3), Keys("b", 0, 2)}, {});
  EXPECT_EQ(s.id, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(s.next_id, 3);
  EXPECT_TRUE(s.merges.empty());
  EXPECT_TRUE(s.splits.empty());
}

TEST(StableIdsTest, ClustersThatGrewKeepTheirIdsInAnyOrderAndNewOnesGetFreshIds) {
  PreviousIds prev = Previous({{4, Keys("a", 0, 5)}, {9, Keys("b", 0, 5)}}, 12);
  // This run lists b first, with new members, then a newcomer, then a (grown).
  StableIds s = AssignStableIds({Keys("b", 0, 8), Keys("c", 0, 3), Keys("a", 0, 6)}, prev);
  EXPECT_EQ(s.id, (std::vector<int64_t>{9, 12, 4}));
  EXPECT_EQ(s.next_id, 13);
  EXPECT_TRUE(s.merges.empty());
  EXPECT_TRUE(s.splits.empty());
  EXPECT_TRUE(s.retired.empty());
}

TEST(StableIdsTest, AMergeKeepsTheLargerSharesIdAndRecordsTheOther) {
  PreviousIds prev = Previous({{1, Keys("a", 0, 5)}, {2, Keys("b", 0, 3)}}, 3);
  std::vector<std::string> both = Keys("a", 0, 5);
  for (auto& k : Keys("b", 0, 3)) both.push_back(k);
  StableIds s = AssignStableIds({both}, prev);
  EXPECT_EQ(s.id, (std::vector<int64_t>{1}));
  ASSERT_EQ(s.merges.size(), 1u);
  EXPECT_EQ(s.merges[0].id, 1);
  EXPECT_EQ(s.merges[0].others, (std::vector<int64_t>{2}));
  EXPECT_EQ(s.retired, (std::vector<int64_t>{2}));
}

TEST(StableIdsTest, ASplitKeepsTheIdOnTheLargerPartAndRecordsTheNewOne) {
  PreviousIds prev = Previous({{5, Keys("a", 0, 10)}}, 6);
  StableIds s = AssignStableIds({Keys("a", 0, 3), Keys("a", 3, 10)}, prev);
  EXPECT_EQ(s.id, (std::vector<int64_t>{6, 5}));
  ASSERT_EQ(s.splits.size(), 1u);
  EXPECT_EQ(s.splits[0].id, 5);
  EXPECT_EQ(s.splits[0].others, (std::vector<int64_t>{6}));
  EXPECT_EQ(s.next_id, 7);
}

TEST(StableIdsTest, IdsOfClustersThatDissolvedAreNeverReused) {
  PreviousIds prev = Previous({{1, Keys("a", 0, 4)}, {2, Keys("b", 0, 4)}}, 3);
  StableIds s = AssignStableIds({Keys("b", 0, 4), Keys("z", 0, 4)}, prev);
  EXPECT_EQ(s.id, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(s.retired, (std::vector<int64_t>{1}));
}

}  // namespace
}  // namespace framemill::cluster
