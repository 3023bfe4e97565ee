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
