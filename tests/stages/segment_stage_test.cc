// The segment stage on real photos with the real selfie and ISNet models: masks
// written as PNG artifacts, coverage and bbox consistent with them.
#include "stages/segment_stage.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

using testing::JobFor;
using testing::ModelsDir;

// The PNG at the result's path agrees with the result and the image.
void ExpectMaskMatches(const Outcome& out, const cv::Size& image) {
  ASSERT_EQ(out.kind, Outcome::Kind::kDone) << out.error.ToString();
  ASSERT_EQ(out.artifacts.size(), 1u);
  EXPECT_EQ(out.artifacts[0], out.result["mask"].get<std::string>());
  cv::Mat m = cv::imread(out.artifacts[0], cv::IMREAD_UNCHANGED);
  ASSERT_FALSE(m.empty()) << out.artifacts[0];
  ASSERT_EQ(m.type(), CV_8UC1);
  ASSERT_EQ(m.size(), image);
  EXPECT_EQ(cv::countNonZero(m) + cv::countNonZero(m == 0), static_cast<int>(m.total()));
  EXPECT_EQ(cv::countNonZero(m == 255), cv::countNonZero(m));  // binary: 0 or 255
  const double coverage = out.result["coverage"];
  EXPECT_NEAR(coverage, cv::countNonZero(m) / static_cast<double>(m.total()), 1e-9);
  const cv::Rect bb = cv::boundingRect(m);
  ASSERT_TRUE(out.result["bbox"].is_array());
  EXPECT_EQ(out.result["bbox"], (nlohmann::json{bb.x, bb.y, bb.width, bb.height}));
}

TEST(SegmentStageTest, SelfieMaskOfAPersonIsWrittenAsAPng) {
  FM_REQUIRE_MODEL("selfie");
  testing::TempDir out;
  SegmentStage stage(std::make_shared<models::ModelCache>(ModelsDir()), ModelStageOptions{}, SegmentOptions{},
                     out.path());
  for (const auto& [file, item] : std::vector<std::pair<std::string, int64_t>>{
           {"messi5.jpg", 7}, {"basketball1.png", 8}}) {
    const ClaimedJob job = JobFor("segment", testing::SampleData(file), MediaKind::kImage, item);
    Outcome o = stage.Run(job);
    const cv::Mat img = cv::imread(testing::SampleData(file));
    ExpectMaskMatches(o, img.size());
    EXPECT_EQ(o.result["model"], "selfie");
    EXPECT_EQ(o.artifacts[0], stage.MaskPath(job, -1));
    EXPECT_EQ(o.artifacts[0].rfind(out.path(), 0), 0u);
    const double c = o.result["coverage"];
    EXPECT_GT(c, 0.01) << file;
    EXPECT_LT(c, 0.90) << file;
  }
}

// A worker that lost its lease may still be writing when the job's new holder writes:
// each claim's mask has its own name, so neither overwrites the other.
TEST(SegmentStageTest, EachClaimWritesItsOwnMask) {
  FM_REQUIRE_MODEL("selfie");
  testing::TempDir out;
  SegmentStage stage(std::make_shared<models::ModelCache>(ModelsDir()), ModelStageOptions{},
                     SegmentOptions{}, out.path());
  ClaimedJob first = JobFor("segment", testing::SampleData("messi5.jpg"), MediaKind::kImage, 7);
  ClaimedJob second = first;
  first.lease_token = 0x1111;
  second.lease_token = 0x2222;
  Outcome a = stage.Run(first);
  const std::string first_bytes = testing::ReadFile(a.artifacts.at(0));
  Outcome b = stage.Run(second);
  ASSERT_EQ(b.kind, Outcome::Kind::kDone);
  EXPECT_NE(a.artifacts.at(0), b.artifacts.at(0));
  EXPECT_EQ(testing::ReadFile(a.artifacts.at(0)), first_bytes);
  EXPECT_TRUE(std::filesystem::exists(b.artifacts.at(0)));
}

TEST(SegmentStageTest, VideoFramesEachGetAMask) {
  FM_REQUIRE_MODEL("selfie");
  testing::TempDir out;
  ModelStageOptions m;
  m.video_frames = 3;
  SegmentStage stage(std::make_shared<models::ModelCache>(ModelsDir()), m, SegmentOptions{}, out.path());
  const ClaimedJob job = JobFor("segment", testing::SampleData("vtest.avi"), MediaKind::kVideo, 4);
  Outcome o = stage.Run(job);
  ASSERT_EQ(o.kind, Outcome::Kind::kDone) << o.error.ToString();
  ASSERT_EQ(o.result["frames"].size(), 3u);
  ASSERT_EQ(o.artifacts.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const auto& f = o.result["frames"][k];
    EXPECT_EQ(o.artifacts[k], stage.MaskPath(job, f["frame"].get<int64_t>()));
    EXPECT_TRUE(std::filesystem::exists(o.artifacts[k]));
  }
  EXPECT_TRUE(o.result.contains("mean_coverage"));
}

TEST(SegmentStageTest, IsnetMaskOfMessi) {
  FM_REQUIRE_MODEL("isnet");
  testing::TempDir out;
  SegmentOptions c;
  c.model = "isnet";
  SegmentStage stage(std::make_shared<models::ModelCache>(ModelsDir()), ModelStageOptions{}, c, out.path());
  Outcome o = stage.Run(JobFor("segment", testing::SampleData("messi5.jpg"), MediaKind::kImage));
  ExpectMaskMatches(o, cv::Size(548, 342));
  EXPECT_EQ(o.result["model"], "isnet");
  const double cov = o.result["coverage"];
  EXPECT_GT(cov, 0.01);
  EXPECT_LT(cov, 0.90);
}

TEST(SegmentStageTest, CorruptImageFailsAndMissingModelFailsWithTheHint) {
  FM_REQUIRE_MODEL("selfie");
  testing::TempDir d;
  testing::WriteFile(d / "x.png", "not a png at all");
  SegmentStage stage(std::make_shared<models::ModelCache>(ModelsDir()), ModelStageOptions{}, SegmentOptions{}, d / "out");
  const ClaimedJob job = JobFor("segment", d / "x.png", MediaKind::kImage);
  Outcome bad = stage.Run(job);
  ASSERT_EQ(bad.kind, Outcome::Kind::kFailed);
  EXPECT_FALSE(bad.error.IsTransient()) << bad.error.ToString();
  EXPECT_FALSE(std::filesystem::exists(stage.MaskPath(job, -1)));

  SegmentStage none(std::make_shared<models::ModelCache>(d / "no-models"), ModelStageOptions{}, SegmentOptions{}, d / "out");
  Outcome f = none.Run(JobFor("segment", testing::SampleData("messi5.jpg"), MediaKind::kImage));
  ASSERT_EQ(f.kind, Outcome::Kind::kFailed);
  EXPECT_TRUE(f.error.IsNotFound());
  EXPECT_NE(f.error.message().find("framemill models fetch"), std::string::npos);
}

}  // namespace
}  // namespace framemill
