#include "jobs/stage_graph.h"

#include <gtest/gtest.h>

namespace framemill {
namespace {

StageGraph Sample() {
  StageGraph g;
  std::string err;
  EXPECT_TRUE(g.Add({"categorize", true, true, {}, false}, &err));
  EXPECT_TRUE(g.Add({"faces", true, true, {"categorize"}, false}, &err));
  EXPECT_TRUE(g.Add({"motion", false, true, {}, false}, &err));
  EXPECT_TRUE(g.Add({"face_clusters", false, false, {"faces"}, true}, &err));
  return g;
}

TEST(StageGraphTest, ClosureAddsDependenciesInDependencyOrder) {
  StageGraph g = Sample();
  std::string err;
  EXPECT_EQ(g.Closure({"face_clusters"}, &err),
            (std::vector<std::string>{"categorize", "faces", "face_clusters"}));
  EXPECT_EQ(g.Closure({"motion", "categorize"}, &err),
            (std::vector<std::string>{"categorize", "motion"}));
  EXPECT_EQ(g.Closure({"all"}, &err).size(), 4u);
}

TEST(StageGraphTest, UnknownStageIsAnErrorListingTheValidOnes) {
  StageGraph g = Sample();
  std::string err;
  EXPECT_TRUE(g.Closure({"faces", "pose"}, &err).empty());
  EXPECT_NE(err.find("'pose'"), std::string::npos);
  EXPECT_NE(err.find("categorize, faces, motion, face_clusters"), std::string::npos) << err;
}

TEST(StageGraphTest, RejectsDuplicatesAndUnknownDependencies) {
  StageGraph g = Sample();
  std::string err;
  EXPECT_FALSE(g.Add({"faces", true, true, {}, false}, &err));
  EXPECT_NE(err.find("twice"), std::string::npos);
  // Dependencies must already exist, which also rules out cycles.
  EXPECT_FALSE(g.Add({"x", true, true, {"y"}, false}, &err));
  EXPECT_NE(err.find("unknown stage 'y'"), std::string::npos);
}

TEST(StageGraphTest, AtMostOneStageDownloadsUrlItems) {
  StageGraph g;
  std::string err;
  EXPECT_EQ(g.Downloader(), nullptr);
  StageSpec fetch{"fetch", true, true, {}, false, true};
  ASSERT_TRUE(g.Add(fetch, &err)) << err;
  ASSERT_NE(g.Downloader(), nullptr);
  EXPECT_EQ(g.Downloader()->name, "fetch");
  StageSpec other{"mirror", true, true, {}, false, true};
  EXPECT_FALSE(g.Add(other, &err));
  EXPECT_NE(err.find("already does"), std::string::npos) << err;
}

TEST(StageGraphTest, AppliesToFollowsMediaKindsAndScope) {
  StageGraph g = Sample();
  EXPECT_TRUE(g.Find("faces")->AppliesTo(MediaKind::kImage));
  EXPECT_FALSE(g.Find("motion")->AppliesTo(MediaKind::kImage));
  EXPECT_TRUE(g.Find("motion")->AppliesTo(MediaKind::kVideo));
  EXPECT_TRUE(g.Find("face_clusters")->AppliesTo(MediaKind::kDataset));
  EXPECT_FALSE(g.Find("face_clusters")->AppliesTo(MediaKind::kImage));
  EXPECT_FALSE(g.Find("faces")->AppliesTo(MediaKind::kDataset));
}

}  // namespace
}  // namespace framemill
