// The categorize stage on real photos and a real video with the real CenterNet model.
#include "stages/categorize_stage.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <tuple>
#include <set>

#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

using testing::JobFor;
using testing::ModelsDir;

std::set<std::string> Labels(const nlohmann::json& r) {
  std::set<std::string> s;
  for (const auto& c : r["categories"]) s.insert(c["label"].get<std::string>());
  return s;
}

// Every object's label, shown or kept below the threshold.
std::set<std::string> ObjectLabels(const nlohmann::json& r) {
  std::set<std::string> s;
  for (const auto& o : r["objects"]) s.insert(o["label"].get<std::string>());
  return s;
}

// The default detector (yolov8s) and the one a user who cannot take an AGPL model sets.
TEST(CategorizeStageTest, FindsPeopleInRealPhotosWithBoxesInsideTheImage) {
  for (const std::string detector : {CategorizeOptions{}.detector, std::string("centernet")}) {
    FM_REQUIRE_MODEL(detector);
    auto pool = std::make_shared<models::ModelCache>(ModelsDir());
    CategorizeOptions defaults;
    defaults.detector = detector;
    CategorizeStage stage(pool, ModelStageOptions{}, defaults);
    for (const auto& [file, w, h] : std::vector<std::tuple<std::string, int, int>>{
             {"messi5.jpg", 548, 342}, {"basketball1.png", 640, 480}}) {
      Outcome out = stage.Run(JobFor("categorize", testing::SampleData(file), MediaKind::kImage));
      ASSERT_EQ(out.kind, Outcome::Kind::kDone) << file << ": " << out.error.ToString();
      EXPECT_EQ(out.device, "cpu");
      EXPECT_EQ(out.result["model"], detector);
      EXPECT_EQ(out.result["media"]["width"], w);
      EXPECT_TRUE(ObjectLabels(out.result).count("person")) << file << ": " << out.result["objects"].dump();
      // Categories are ranked by score, and every object is inside the image.
      double prev = 2;
      for (const auto& c : out.result["categories"]) {
        EXPECT_LE(c["score"].get<double>(), prev);
        prev = c["score"].get<double>();
      }
      for (const auto& o : out.result["objects"]) {
        const auto& b = o["box"];
        // Kept down to the floor; marked when below the shown threshold, and only then.
        EXPECT_GE(o["score"].get<double>(), defaults.floor);
        EXPECT_EQ(o.value("below_threshold", false), o["score"].get<double>() < ShownScore(defaults)) << o.dump();
        EXPECT_LE(b[0].get<double>(), b[2].get<double>());
        EXPECT_LE(b[1].get<double>(), b[3].get<double>());
        EXPECT_GE(b[0].get<double>(), 0);
        EXPECT_LE(b[2].get<double>(), w);
        EXPECT_LE(b[3].get<double>(), h);
      }
    }
  }
}

TEST(CategorizeStageTest, MessiHasASportsBall) {
  FM_REQUIRE_MODEL(CategorizeOptions{}.detector);
  CategorizeOptions c;
  c.min_score = 0.1;
  CategorizeStage stage(std::make_shared<models::ModelCache>(ModelsDir()), ModelStageOptions{}, c);
  Outcome out = stage.Run(JobFor("categorize", testing::SampleData("messi5.jpg"), MediaKind::kImage));
  ASSERT_EQ(out.kind, Outcome::Kind::kDone) << out.error.ToString();
  EXPECT_TRUE(Labels(out.result).count("sports ball")) << out.result["categories"].dump();
}

// The drawings of coloured shapes that CenterNet calls "umbrella" at 0.38 and 0.51
// (bench/README "Objects worth believing"): nothing is shown, what it saw is kept, marked.
TEST(CategorizeStageTest, ShapesShowNoObjectsAndKeepWhatTheModelSawMarked) {
  FM_REQUIRE_MODEL(CategorizeOptions{}.detector);
  CategorizeStage stage(std::make_shared<models::ModelCache>(ModelsDir()), ModelStageOptions{}, CategorizeOptions{});
  for (const char* file : {"pic5.png", "pic6.png"}) {
    Outcome out = stage.Run(JobFor("categorize", testing::SampleData(file), MediaKind::kImage));
    ASSERT_EQ(out.kind, Outcome::Kind::kDone) << file << ": " << out.error.ToString();
    EXPECT_TRUE(out.result["categories"].empty()) << file << ": " << out.result["categories"].dump();
    ASSERT_TRUE(ObjectLabels(out.result).count("umbrella")) << file << ": " << out.result["objects"].dump();
    for (const auto& o : out.result["objects"]) EXPECT_TRUE(o.value("below_threshold", false)) << o.dump();
  }
}

// What curators filter on first: photo or drawing, and NSFW classes, on real pictures.
TEST(CategorizeStageTest, PhotosAndDrawingsAreToldApartWithNsfwClasses) {
  FM_REQUIRE_MODEL(CategorizeOptions{}.detector);
  FM_REQUIRE_MODEL("nsfw");
  CategorizeStage stage(std::make_shared<models::ModelCache>(ModelsDir()), ModelStageOptions{}, CategorizeOptions{});
  for (const auto& [file, type] : std::vector<std::pair<std::string, std::string>>{
           {"messi5.jpg", "photo"}, {"fruits.jpg", "photo"}, {"HappyFish.jpg", "drawing"}, {"pic5.png", "drawing"}}) {
    Outcome out = stage.Run(JobFor("categorize", testing::SampleData(file), MediaKind::kImage));
    ASSERT_EQ(out.kind, Outcome::Kind::kDone) << file << ": " << out.error.ToString();
    const auto& r = out.result;
    ASSERT_TRUE(r.contains("content") && r.contains("nsfw")) << file << ": " << r.dump();
    EXPECT_EQ(r["content"]["type"], type) << file << ": " << r["content"].dump();
    EXPECT_GE(r["content"]["p"].get<double>(), 0.5);
    double sum = 0;
    for (const char* k : {"drawing", "hentai", "neutral", "porn", "sexy"}) sum += r["nsfw"][k].get<double>();
    EXPECT_NEAR(sum, 1.0, 1e-4) << r["nsfw"].dump();
    EXPECT_NEAR(r["nsfw"]["unsafe"].get<double>(), r["nsfw"]["porn"].get<double>() + r["nsfw"]["hentai"].get<double>(), 1e-6);
    EXPECT_LT(r["nsfw"]["unsafe"].get<double>(), 0.2) << file << ": " << r["nsfw"].dump();
  }
}

TEST(CategorizeStageTest, BatchWithACorruptImageFailsOnlyThatJob) {
  FM_REQUIRE_MODEL(CategorizeOptions{}.detector);
  testing::TempDir d;
  testing::WriteTruncated(testing::SampleData("messi5.jpg"), d / "cut.jpg", 0.4);
  CategorizeStage stage(std::make_shared<models::ModelCache>(ModelsDir()), ModelStageOptions{}, CategorizeOptions{});
  std::vector<ClaimedJob> jobs = {
      JobFor("categorize", testing::SampleData("basketball1.png"), MediaKind::kImage, 1),
      JobFor("categorize", d / "cut.jpg", MediaKind::kImage, 2),
      JobFor("categorize", testing::SampleData("messi5.jpg"), MediaKind::kImage, 3)};
  std::atomic<bool> stop{false};
  auto outs = stage.RunBatch(jobs, StageContext{nullptr, &stop});
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0].kind, Outcome::Kind::kDone) << outs[0].error.ToString();
  ASSERT_EQ(outs[1].kind, Outcome::Kind::kFailed);
  EXPECT_TRUE(outs[1].error.IsCorruption()) << outs[1].error.ToString();
  EXPECT_FALSE(outs[1].error.IsTransient());
  EXPECT_EQ(outs[2].kind, Outcome::Kind::kDone) << outs[2].error.ToString();
  stop = true;  // a stopped worker gets nothing started
  EXPECT_TRUE(stage.RunBatch(jobs, StageContext{nullptr, &stop}).empty());
}

TEST(CategorizeStageTest, VideoIsCategorisedOverSampledFrames) {
  FM_REQUIRE_MODEL(CategorizeOptions{}.detector);
  ModelStageOptions m;
  m.video_frames = 3;
  CategorizeStage stage(std::make_shared<models::ModelCache>(ModelsDir()), m, CategorizeOptions{});
  Outcome out = stage.Run(JobFor("categorize", testing::SampleData("vtest.avi"), MediaKind::kVideo));
  ASSERT_EQ(out.kind, Outcome::Kind::kDone) << out.error.ToString();
  ASSERT_EQ(out.result["frames"].size(), 3u);
  EXPECT_EQ(out.result["media"]["kind"], "video");
  EXPECT_TRUE(Labels(out.result).count("person")) << out.result["categories"].dump();  // pedestrians
  for (const auto& f : out.result["frames"]) EXPECT_TRUE(f.contains("objects") && f.contains("content"));
  EXPECT_EQ(out.result["content"]["type"], "photo") << out.result["content"].dump();  // a street camera
  EXPECT_TRUE(out.result["nsfw"].contains("unsafe"));
}

TEST(CategorizeStageTest, MissingModelFailsEachJobWithTheInstallHint) {
  testing::TempDir empty;
  CategorizeStage stage(std::make_shared<models::ModelCache>(empty.path()), ModelStageOptions{}, CategorizeOptions{});
  std::vector<ClaimedJob> jobs = {
      JobFor("categorize", testing::SampleData("messi5.jpg"), MediaKind::kImage, 1),
      JobFor("categorize", testing::SampleData("vtest.avi"), MediaKind::kVideo, 2)};
  auto outs = stage.RunBatch(jobs, StageContext{});
  ASSERT_EQ(outs.size(), 2u);
  for (const auto& o : outs) {
    ASSERT_EQ(o.kind, Outcome::Kind::kFailed);
    EXPECT_TRUE(o.error.IsNotFound());
    EXPECT_NE(o.error.message().find("framemill models fetch"), std::string::npos) << o.error.ToString();
  }
}

}  // namespace
}  // namespace framemill
