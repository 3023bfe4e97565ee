// The pose stage on real photos with the real MoveNet and BlazePose models.
#include "stages/pose_stage.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "tests/support/test_support.h"

namespace framemill {
namespace {

std::string ModelsDir() {
  const char* e = std::getenv("FRAMEMILL_MODELS");
  return e != nullptr && *e != '\0' ? e : FRAMEMILL_SOURCE_DIR "/.cache/models";
}

// Skips (or, with FRAMEMILL_REQUIRE_MODELS=1, fails) when the model is not installed.
#define REQUIRE_MODEL(name)                                                              \
  do {                                                                                   \
    auto m_ = models::ModelStore(ModelsDir()).Open(name);                                \
    if (!m_.ok()) {                                                                      \
      const char* r_ = std::getenv("FRAMEMILL_REQUIRE_MODELS");                          \
      if (r_ != nullptr && std::string(r_) == "1") FAIL() << m_.status().ToString();     \
      GTEST_SKIP() << "model " << name << " not installed in " << ModelsDir();           \
    }                                                                                    \
  } while (0)

ClaimedJob JobFor(const std::string& stage, const std::string& path, MediaKind kind,
                  int64_t item = 1) {
  ClaimedJob j;
  j.id = item;
  j.item_id = item;
  j.stage = stage;
  j.source = path;
  j.kind = kind;
  return j;
}

std::map<std::string, nlohmann::json> ByName(const nlohmann::json& r) {
  std::map<std::string, nlohmann::json> m;
  for (const auto& k : r["keypoints"]) m[k["name"].get<std::string>()] = k;
  return m;
}

StageOutput PoseOf(const std::string& file, const std::string& model) {
  PoseConfig c;
  c.model = model;
  PoseStage stage(std::make_shared<ModelPool>(ModelsDir()), MediaConfig{}, c);
  return stage.Run(JobFor("pose", testing::SampleData(file), MediaKind::kImage));
}

// Confident keypoints lie inside the image; the nose is above the hips.
void ExpectUprightPerson(const StageOutput& out, int w, int h, size_t count) {
  ASSERT_EQ(out.kind, StageOutput::Kind::kDone) << out.error.ToString();
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
  REQUIRE_MODEL("movenet-lightning");
  StageOutput out = PoseOf("messi5.jpg", "movenet-lightning");
  ExpectUprightPerson(out, 548, 342, 17);
  EXPECT_EQ(out.result["model"], "movenet-lightning");
  EXPECT_GT(out.result["score"].get<double>(), 0.2);
}

TEST(PoseStageTest, MoveNetFindsAnUprightPersonInBasketball) {
  REQUIRE_MODEL("movenet-lightning");
  ExpectUprightPerson(PoseOf("basketball1.png", "movenet-lightning"), 640, 480, 17);
}

TEST(PoseStageTest, BlazePoseGives39LandmarksOfAnUprightPerson) {
  REQUIRE_MODEL("blazepose-full");
  StageOutput out = PoseOf("messi5.jpg", "blazepose-full");
  ExpectUprightPerson(out, 548, 342, 39);
  EXPECT_TRUE(out.result.contains("pose_score"));
}

TEST(PoseStageTest, VideoGivesPerFrameKeypointsAndAMissingModelFails) {
  REQUIRE_MODEL("movenet-lightning");
  MediaConfig m;
  m.model_frames = 2;
  PoseStage stage(std::make_shared<ModelPool>(ModelsDir()), m, PoseConfig{});
  StageOutput v = stage.Run(JobFor("pose", testing::SampleData("vtest.avi"), MediaKind::kVideo));
  ASSERT_EQ(v.kind, StageOutput::Kind::kDone) << v.error.ToString();
  ASSERT_EQ(v.result["frames"].size(), 2u);
  EXPECT_EQ(v.result["frames"][0]["keypoints"].size(), 17u);
  EXPECT_TRUE(v.result.contains("mean_score"));

  testing::TempDir empty;
  PoseStage none(std::make_shared<ModelPool>(empty.path()), MediaConfig{}, PoseConfig{});
  StageOutput f = none.Run(JobFor("pose", testing::SampleData("messi5.jpg"), MediaKind::kImage));
  ASSERT_EQ(f.kind, StageOutput::Kind::kFailed);
  EXPECT_TRUE(f.error.IsNotFound());
  EXPECT_NE(f.error.message().find("movenet-lightning"), std::string::npos);
}

}  // namespace
}  // namespace framemill
