#include "stages/lighting_stage.h"

#include <gtest/gtest.h>

#include "tests/support/test_support.h"

namespace framemill {
namespace {

ClaimedJob JobFor(const std::string& path, MediaKind kind) {
  ClaimedJob j;
  j.id = 1;
  j.stage = "lighting";
  j.source = path;
  j.kind = kind;
  return j;
}

TEST(LightingStageTest, ImageResultHasTheDocumentedKeys) {
  LightingStage stage(LightingOptions{});
  Outcome out = stage.Run(JobFor(testing::SampleData("apple.jpg"), MediaKind::kImage));
  ASSERT_EQ(out.kind, Outcome::Kind::kDone) << out.error.ToString();
  EXPECT_EQ(out.device, "cpu");
  for (const char* k : {"luminance_percentiles", "exposure_ev", "rms_contrast",
                        "dynamic_range_stops", "color_temperature_k", "light_direction",
                        "clipped_shadows", "clipped_highlights"})
    EXPECT_TRUE(out.result.contains(k)) << k;
  EXPECT_LT(out.result["color_temperature_k"].get<double>(), 4500);  // a warm photo
}

// A JPEG decoded at a reduced scale (lighting.decode_min_side) reports the photo's own
// size and stays within the tolerance bench/README states against a full decode.
TEST(LightingStageTest, AReducedDecodeStaysWithinItsToleranceOfAFullOne) {
  LightingOptions full_opt;
  full_opt.decode_min_side = 0;
  LightingStage full(full_opt), reduced{LightingOptions{}};
  for (const char* name : {"apple.jpg", "baboon.jpg", "building.jpg", "fruits.jpg", "leuvenA.jpg", "starry_night.jpg"}) {
    const ClaimedJob job = JobFor(testing::SampleData(name), MediaKind::kImage);
    Outcome a = full.Run(job), b = reduced.Run(job);
    ASSERT_EQ(a.kind, Outcome::Kind::kDone) << name;
    ASSERT_EQ(b.kind, Outcome::Kind::kDone) << name;
    EXPECT_EQ(b.result["width"], a.result["width"]) << name;
    EXPECT_EQ(b.result["height"], a.result["height"]) << name;
    EXPECT_NEAR(b.result["exposure_ev"].get<double>(), a.result["exposure_ev"].get<double>(), 0.06) << name;
    EXPECT_NEAR(b.result["color_temperature_k"].get<double>(), a.result["color_temperature_k"].get<double>(), 81) << name;
    EXPECT_NEAR(b.result["luminance_percentiles"]["p50"].get<double>(),
                a.result["luminance_percentiles"]["p50"].get<double>(), 0.03) << name;
  }
}

TEST(LightingStageTest, VideoIsAnalysedOverSampledFrames) {
  LightingOptions m;
  m.video_frames = 5;
  LightingStage stage(m);
  Outcome out = stage.Run(JobFor(testing::SampleData("vtest.avi"), MediaKind::kVideo));
  ASSERT_EQ(out.kind, Outcome::Kind::kDone) << out.error.ToString();
  EXPECT_EQ(out.result["frames_sampled"].size(), 5u);
  EXPECT_EQ(out.result["per_frame"].size(), 5u);
  EXPECT_EQ(out.result["media"]["frames"], 795);
  EXPECT_EQ(out.result["media"]["kind"], "video");
}

TEST(LightingStageTest, UndecodableInputFailsPermanentlyWithoutThrowing) {
  testing::TempDir d;
  testing::WriteFile(d / "x.jpg", "not a jpeg");
  LightingStage stage(LightingOptions{});
  Outcome out = stage.Run(JobFor(d / "x.jpg", MediaKind::kImage));
  ASSERT_EQ(out.kind, Outcome::Kind::kFailed);
  EXPECT_FALSE(out.error.IsTransient());
  Outcome v = stage.Run(JobFor(d / "x.jpg", MediaKind::kVideo));
  ASSERT_EQ(v.kind, Outcome::Kind::kFailed);
  EXPECT_NE(v.error.message().find("not a video"), std::string::npos);
}

}  // namespace
}  // namespace framemill
