#include "jobs/clip_totals.h"

#include <gtest/gtest.h>

namespace framemill {
namespace {

TEST(ClipTotalsTest, CountsEachClipAndItsSecondsAndNothingOfAResultWithoutClips) {
  const ClipTotals t = ClipTotalsOf(
      R"({"mode": "encode", "clips": [{"start_s": 0.0, "end_s": 4.0}, {"start_s": 6.0, "end_s": 8.5}],
          "dropped": [{"start_frame": 100, "end_frame": 150, "reason": "short"}]})");
  EXPECT_EQ(t.clips, 2);
  EXPECT_DOUBLE_EQ(t.seconds, 6.5);
  EXPECT_EQ(ClipTotalsOf(R"({"clips": []})").clips, 0);
  EXPECT_EQ(ClipTotalsOf("not json").clips, 0);
  EXPECT_EQ(ClipTotalsOf(R"({"clips": "none"})").clips, 0);
}

}  // namespace
}  // namespace framemill
