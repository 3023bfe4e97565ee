#include "media/geometry.h"

#include <gtest/gtest.h>

namespace framemill {
namespace {

TEST(GeometryTest, IoUOfKnownOverlaps) {
  const cv::Rect2f a(0, 0, 2, 2);
  EXPECT_FLOAT_EQ(IoU(a, a), 1.f);
  EXPECT_FLOAT_EQ(IoU(a, cv::Rect2f(1, 0, 2, 2)), 2.f / 6.f);   // half of each
  EXPECT_FLOAT_EQ(IoU(a, cv::Rect2f(1, 1, 2, 2)), 1.f / 7.f);   // a corner
  EXPECT_FLOAT_EQ(IoU(cv::Rect2f(0, 0, 4, 4), cv::Rect2f(1, 1, 2, 2)), 4.f / 16.f);  // inside
  EXPECT_FLOAT_EQ(IoU(a, cv::Rect2f(1.5f, 0.5f, 2, 2)), IoU(cv::Rect2f(1.5f, 0.5f, 2, 2), a));
}

TEST(GeometryTest, BoxesThatDoNotOverlapAndEmptyBoxesHaveNone) {
  const cv::Rect2f a(0, 0, 2, 2);
  EXPECT_EQ(IoU(a, cv::Rect2f(2, 0, 2, 2)), 0.f);   // sharing an edge
  EXPECT_EQ(IoU(a, cv::Rect2f(5, 5, 1, 1)), 0.f);   // apart
  EXPECT_EQ(IoU(a, cv::Rect2f(0, 3, 2, 2)), 0.f);   // overlapping in x only
  EXPECT_EQ(IoU(cv::Rect2f(1, 1, 0, 0), cv::Rect2f(1, 1, 0, 0)), 0.f);  // no union at all
  EXPECT_EQ(IoU(a, cv::Rect2f(1, 1, 0, 0)), 0.f);   // a point inside
}

// Corners {x1, y1, x2, y2}, as the faces stage's results hold boxes: the same measure.
TEST(GeometryTest, CornersGiveTheSameAsRectangles) {
  const float a[4] = {10, 20, 110, 220}, b[4] = {60, 70, 160, 270}, far[4] = {500, 500, 510, 510};
  EXPECT_FLOAT_EQ(IoU(a, b), IoU(cv::Rect2f(10, 20, 100, 200), cv::Rect2f(60, 70, 100, 200)));
  EXPECT_FLOAT_EQ(IoU(a, b), 50.f * 150.f / (2 * 100.f * 200.f - 50.f * 150.f));
  EXPECT_FLOAT_EQ(IoU(a, a), 1.f);
  EXPECT_EQ(IoU(a, far), 0.f);
}

}  // namespace
}  // namespace framemill
