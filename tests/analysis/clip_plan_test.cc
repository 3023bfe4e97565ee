#include "analysis/clip_plan.h"

#include <gtest/gtest.h>

namespace framemill {
namespace {

TEST(ClipPlanTest, EachShotLongEnoughIsOneClipAndShortOnesAreListedWithTheReason) {
  // 25 fps: shots of 4 s, 1 s and 3 s.
  const ClipPlan p = PlanClips({{0, 100}, {100, 125}, {125, 200}}, {}, 25, {});
  ASSERT_EQ(p.clips.size(), 2u);
  EXPECT_EQ(p.clips[0].frames, (FrameRange{0, 100}));
  EXPECT_EQ(p.clips[0].shot, 0u);
  EXPECT_EQ(p.clips[1].frames, (FrameRange{125, 200}));
  EXPECT_EQ(p.clips[1].shot, 2u);
  ASSERT_EQ(p.dropped.size(), 1u);
  EXPECT_EQ(p.dropped[0].frames, (FrameRange{100, 125}));
  EXPECT_EQ(p.dropped[0].reason, "shorter than clips.min_s (1.00 s < 2.00 s)");
}

TEST(ClipPlanTest, ALongShotIsSplitIntoEqualPartsOfAtMostMaxS) {
  ClipPlanOptions o;
  o.max_s = 10;
  // 25.3 s at 30 fps: 759 frames, at most 300 a part: 3 parts of 253.
  const ClipPlan p = PlanClips({{0, 759}}, {}, 30, o);
  ASSERT_EQ(p.clips.size(), 3u);
  int64_t at = 0;
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(p.clips[k].frames.start, at);
    EXPECT_EQ(p.clips[k].frames.end - p.clips[k].frames.start, 253);
    EXPECT_EQ(p.clips[k].part, k);
    EXPECT_EQ(p.clips[k].parts, 3);
    at = p.clips[k].frames.end;
  }
  EXPECT_EQ(at, 759);
  // Exactly max_s is one part; a frame more is two.
  EXPECT_EQ(PlanClips({{0, 300}}, {}, 30, o).clips.size(), 1u);
  EXPECT_EQ(PlanClips({{0, 301}}, {}, 30, o).clips.size(), 2u);
  // 29.97 fps: 10 s is 299.7 frames, so at most 299 a part.
  for (const PlannedClip& c : PlanClips({{0, 900}}, {}, 29.97, o).clips)
    EXPECT_LE(c.frames.end - c.frames.start, 299);
}

TEST(ClipPlanTest, NoClipHoldsAFrameOfATransition) {
  // A dissolve over frames 90..101 (inclusive) between two shots that motion split at 96.
  const ClipPlan p =
      PlanClips({{0, 96}, {96, 250}}, ExcludedRuns({{90, 101}}, "a gradual transition between two shots"), 25, {});
  ASSERT_EQ(p.clips.size(), 2u);
  EXPECT_EQ(p.clips[0].frames, (FrameRange{0, 90}));
  EXPECT_EQ(p.clips[1].frames, (FrameRange{102, 250}));
  ASSERT_EQ(p.dropped.size(), 1u);
  EXPECT_EQ(p.dropped[0].frames, (FrameRange{90, 102}));
  EXPECT_EQ(p.dropped[0].reason, "a gradual transition between two shots");
}

TEST(ClipPlanTest, SpoiledFramesSplitAShotAndWhatIsLeftIsJudgedByItsLength) {
  // One shot of 0..300 at 25 fps; broken packets spoiled 100..149 and 280..289 (inclusive).
  const ClipPlan p = PlanClips({{0, 300}}, ExcludedRuns({{100, 149}, {280, 289}}, "broken packets"), 25, {});
  ASSERT_EQ(p.clips.size(), 2u);
  EXPECT_EQ(p.clips[0].frames, (FrameRange{0, 100}));
  EXPECT_EQ(p.clips[1].frames, (FrameRange{150, 280}));
  ASSERT_EQ(p.dropped.size(), 3u);  // the two runs, and 290..299 (0.40 s)
  EXPECT_EQ(p.dropped[0].frames, (FrameRange{100, 150}));
  EXPECT_EQ(p.dropped[0].reason, "broken packets");
  EXPECT_EQ(p.dropped[1].frames, (FrameRange{280, 290}));
  EXPECT_EQ(p.dropped[2].frames, (FrameRange{290, 300}));
  EXPECT_NE(p.dropped[2].reason.find("shorter than clips.min_s"), std::string::npos);
}

TEST(ClipPlanTest, MinSZeroKeepsEveryShotAndNoShotsMakeNoClips) {
  ClipPlanOptions o;
  o.min_s = 0;
  EXPECT_EQ(PlanClips({{0, 1}, {1, 3}}, {}, 25, o).clips.size(), 2u);
  const ClipPlan none = PlanClips({}, {}, 25, {});
  EXPECT_TRUE(none.clips.empty());
  EXPECT_TRUE(none.dropped.empty());
}

}  // namespace
}  // namespace framemill
