// The pose stage on real photos with the real MoveNet and BlazePose models.
#include "stages/pose_stage.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

using testing::JobFor;
using testing::ModelsDir;

std::map<std::string, nlohmann::json> ByName(const nlohmann::json& r) {
  std::map<std::string, nlohmann::json> m;
  for (const auto& k : r["keypoints"]) m[k["name"].get<std::string>()] = k;
  return m;
}

Outcome PoseOf(const std::string& file, const std::string& model) {
  PoseOptions c;
  c.model = model;
  PoseStage stage(std::make_shared<models::ModelCache>(ModelsDir()), ModelStageOptions{}, c);
  return stage.Run(JobFor("pose", testing::SampleData(file), MediaKind::kImage));
}

// Confident keypoints lie inside the image; the nose is above the hips.
void ExpectUprightPerson(const Outcome& out, int w, int h, size_t count) {
  ASSERT_EQ(out.kind, Outcome::Kind::kDone) << out.error.ToString();
  EXPECT_EQ(out.device, "cpu");
  ASSERT_EQ(out.result["keypoints"].size(), count);
  int confident = 0;
  for (const auto& k : out.result["keypoints"]) {
    if (k["score"].get<double>() < 0.3) continue;
    if (k["name"].get<std::string>().rfind("auxiliary", 0) == 0) continue;
    ++confident;
    EXPECT_GE(k["x"].get<double>(), 0) << k.dump();
    EXPECT_LT(k["x"].get<double>(), w) << k.dump();
    EXPECT_GE(k["y"].get<double>(), 0) << k.dump();
    EXPECT_LT(k["y"].get<double>(), h) << k.dump();
  }
  EXPECT_GE(confident, 5) << out.result.dump();
  auto kp = ByName(out.result);
  const double nose = kp["nose"]["y"], lhip = kp["left_hip"]["y"], rhip = kp["right_hip"]["y"];
  EXPECT_LT(nose, lhip);
  EXPECT_LT(nose, rhip);
  // And the shoulders are between the two.
  EXPECT_LT(nose, kp["left_shoulder"]["y"].get<double>());
  EXPECT_LT(kp["left_shoulder"]["y"].get<double>(), lhip);
}

TEST(PoseStageTest, MoveNetFindsAnUprightPersonInMessi) {
  FM_REQUIRE_MODEL("movenet-lightning");
  Outcome out = PoseOf("messi5.jpg", "movenet-lightning");
  ExpectUprightPerson(out, 548, 342, 17);
  EXPECT_EQ(out.result["model"], "movenet-lightning");
  EXPECT_GT(out.result["score"].get<double>(), 0.2);
}

TEST(PoseStageTest, MoveNetFindsAnUprightPersonInBasketball) {
  FM_REQUIRE_MODEL("movenet-lightning");
  ExpectUprightPerson(PoseOf("basketball1.png", "movenet-lightning"), 640, 480, 17);
}

TEST(PoseStageTest, BlazePoseGives39LandmarksOfAnUprightPerson) {
  FM_REQUIRE_MODEL("blazepose-full");
  Outcome out = PoseOf("messi5.jpg", "blazepose-full");
  ExpectUprightPerson(out, 548, 342, 39);
  EXPECT_TRUE(out.result.contains("pose_score"));
}

TEST(PoseStageTest, VideoGivesPerFrameKeypointsAndAMissingModelFails) {
  FM_REQUIRE_MODEL("movenet-lightning");
  ModelStageOptions m;
  m.video_frames = 2;
  PoseStage stage(std::make_shared<models::ModelCache>(ModelsDir()), m, PoseOptions{});
  Outcome v = stage.Run(JobFor("pose", testing::SampleData("vtest.avi"), MediaKind::kVideo));
  ASSERT_EQ(v.kind, Outcome::Kind::kDone) << v.error.ToString();
  ASSERT_EQ(v.result["frames"].size(), 2u);
  EXPECT_EQ(v.result["frames"][0]["keypoints"].size(), 17u);
  EXPECT_TRUE(v.result.contains("mean_score"));

  testing::TempDir empty;
  PoseStage none(std::make_shared<models::ModelCache>(empty.path()), ModelStageOptions{}, PoseOptions{});
  Outcome f = none.Run(JobFor("pose", testing::SampleData("messi5.jpg"), MediaKind::kImage));
  ASSERT_EQ(f.kind, Outcome::Kind::kFailed);
  EXPECT_TRUE(f.error.IsNotFound());
  EXPECT_NE(f.error.message().find("movenet-lightning"), std::string::npos);
}

}  // namespace
}  // namespace framemill
