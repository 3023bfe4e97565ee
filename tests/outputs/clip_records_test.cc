#include "outputs/clip_records.h"

#include <gtest/gtest.h>

namespace framemill {
namespace {

using nlohmann::json;

json Clip(int64_t start, int64_t end, double fps = 25) {
  return {{"index", 0}, {"start_frame", start}, {"end_frame", end}, {"start_s", start / fps},
          {"end_s", end / fps}, {"bytes", 10}, {"artifact", "/x.mp4"},
          {"motion", {{"camera", {{"label", "pan"}}}, {"subject", {{"mean", 0.8}}}}}};
}

std::map<std::string, json> Results() {
  return {
      {"categorize", {{"frames", json::array({
           {{"frame", 10}, {"categories", json::array({{{"label", "dog"}, {"score", 0.7}}})}},
           {{"frame", 60}, {"categories", json::array({{{"label", "dog"}, {"score", 0.9}},
                                                       {{"label", "person"}, {"score", 0.95}}})}},
           {{"frame", 130}, {"categories", json::array({{{"label", "cat"}, {"score", 0.8}}})}}})}}},
      {"faces", {{"frames", json::array({{{"frame", 20}, {"count", 1}}, {{"frame", 70}, {"count", 3}},
                                         {{"frame", 140}, {"count", 5}}})}}},
      {"pose", {{"frames", json::array({{{"frame", 130}, {"people", 2}}})}}},
      {"audio_sync", {{"offset_ms", 40.0}, {"shots", json::array({
           {{"start_s", 0.0}, {"end_s", 1.0}, {"offset_ms", 20.0}, {"confidence", 0.5}},
           {{"start_s", 1.0}, {"end_s", 6.0}, {"offset_ms", 80.0}, {"confidence", 0.9}}})}}}};
}

TEST(ClipRecordsTest, WhatIsFoundInsideTheSpanOnlyWithBestScoresAndFrameCounts) {
  const json c = ClipContents(Clip(0, 100), Results());
  ASSERT_TRUE(c["labels"].is_array());
  ASSERT_EQ(c["labels"].size(), 2u);
  EXPECT_EQ(c["labels"][0], json({{"label", "person"}, {"score", 0.95}, {"frames", 1}}));
  EXPECT_EQ(c["labels"][1], json({{"label", "dog"}, {"score", 0.9}, {"frames", 2}}));  // not cat's frame 130
  EXPECT_EQ(c["faces"], 3);      // the most in one frame inside, not frame 140's 5
  EXPECT_TRUE(c["people"].is_null());  // pose analysed no frame inside: said, not guessed
  EXPECT_EQ(c["analysed"], json({{"categorize", 2}, {"faces", 2}, {"pose", 0}}));
  EXPECT_EQ(c["audio"]["offset_ms"], 80.0);  // the shot it overlaps most: 1-4 s of 0-4 s
}

TEST(ClipRecordsTest, AStageThatHasNotRunIsNullAndNotCountedAsAnalysed) {
  const json c = ClipContents(Clip(0, 100), {});
  EXPECT_TRUE(c["labels"].is_null());
  EXPECT_TRUE(c["faces"].is_null());
  EXPECT_TRUE(c["audio"].is_null());
  EXPECT_TRUE(c["analysed"].empty());
}

TEST(ClipRecordsTest, FiltersReadTheClipsDurationCameraMotionAndContents) {
  json clip = Clip(0, 100);  // 4 s, pan, subject 0.8
  clip.update(ClipContents(clip, Results()));
  const ExportFilter none;
  ClipFilter f;
  EXPECT_TRUE(ClipPasses(f, none, clip));
  f.min_duration_s = 4.5;
  EXPECT_FALSE(ClipPasses(f, none, clip));
  f = {};
  f.max_duration_s = 3;
  EXPECT_FALSE(ClipPasses(f, none, clip));
  f = {};
  ASSERT_TRUE(ParseCameras("static, zoom", &f.cameras).ok());
  EXPECT_FALSE(ClipPasses(f, none, clip));
  f.cameras.push_back("pan");
  EXPECT_TRUE(ClipPasses(f, none, clip));
  f = {};
  f.min_subject_motion = 1.0;
  EXPECT_FALSE(ClipPasses(f, none, clip));
  ExportFilter labels;
  labels.labels = {"cat"};  // seen in the video, but not inside this clip
  EXPECT_FALSE(ClipPasses({}, labels, clip));
  labels.labels = {"dog"};
  EXPECT_TRUE(ClipPasses({}, labels, clip));
  labels.no_labels = {"person"};
  EXPECT_FALSE(ClipPasses({}, labels, clip));
  ExportFilter faces;
  faces.min_faces = 4;
  EXPECT_FALSE(ClipPasses({}, faces, clip));
  faces.min_faces = 2;
  EXPECT_TRUE(ClipPasses({}, faces, clip));
  json unanalysed = Clip(0, 100);
  unanalysed.update(ClipContents(unanalysed, {}));
  EXPECT_FALSE(ClipPasses({}, faces, unanalysed));  // no faces analysed there: not passed
  std::vector<std::string> cameras;
  EXPECT_FALSE(ParseCameras("dolly", &cameras).ok());
}

}  // namespace
}  // namespace framemill
