// Tiling for small faces and the merge of overlapping detections (models/face_tiles.h).
#include "models/face_tiles.h"

#include <gtest/gtest.h>

#include <map>

namespace framemill::models {
namespace {

FaceBox Box(float x1, float y1, float x2, float y2, float score) {
  FaceBox f;
  f.x1 = x1; f.y1 = y1; f.x2 = x2; f.y2 = y2;
  f.score = score;
  return f;
}

// Tiles of one size cover every pixel of the frame, and a face of up to
// kLargestFaceInTile of the tile lies whole inside one of them.
void ExpectLevelCovers(const std::vector<cv::Rect>& tiles, int side, cv::Size frame) {
  const int face = static_cast<int>(side * 0.25f);  // the overlap: any face this wide fits
  for (int y = 0; y + face <= frame.height; y += 7)
    for (int x = 0; x + face <= frame.width; x += 7) {
      bool whole = false;
      for (const cv::Rect& t : tiles)
        if (t.width == side && (cv::Rect(x, y, face, face) & t).area() == face * face) whole = true;
      ASSERT_TRUE(whole) << "a " << face << " px face at " << x << "," << y << ", tiles of " << side;
    }
}

TEST(FaceTilesTest, APyramidOfDoublingTilesCoversTheFrameAndEndsWithAZoomOut) {
  TileOptions o;  // 256 input, faces from 32 px
  const cv::Size frame(1280, 926);
  TilePlan p = PlanFaceTiles(frame, o);
  // 256 * 32 / 28 = 293 px, then 586; 1172 is past the short side.
  std::map<int, int> per_side;
  for (const cv::Rect& t : p.tiles) ++per_side[t.width];
  ASSERT_EQ(per_side.size(), 3u);
  EXPECT_EQ(per_side.begin()->first, 293);
  EXPECT_EQ(per_side[586], 6);
  EXPECT_EQ(per_side[2560], 1);
  EXPECT_EQ(p.min_face_px, 32);
  for (const cv::Rect& t : p.tiles) {
    EXPECT_EQ(t.width, t.height);
    if (t.width != 2560) {
      EXPECT_EQ(t & cv::Rect({}, frame), t) << "tiles stay inside the frame";
    }
  }
  ExpectLevelCovers(p.tiles, 293, frame);
  ExpectLevelCovers(p.tiles, 586, frame);
  // The zoom-out tile holds the whole frame at its centre.
  const cv::Rect zoom = p.tiles.back();
  EXPECT_EQ(zoom.x + zoom.width / 2, 640);
  EXPECT_EQ(zoom.y + zoom.height / 2, 463);
}

TEST(FaceTilesTest, PastTheBudgetTheSmallestTilesGoAndTheSmallestFaceSaysSo) {
  TileOptions o;
  o.max_tiles = 10;
  TilePlan p = PlanFaceTiles(cv::Size(1280, 926), o);
  for (const cv::Rect& t : p.tiles) EXPECT_NE(t.width, 293);
  EXPECT_EQ(p.tiles.size(), 7u);  // six of 586 and the zoom-out
  EXPECT_EQ(p.min_face_px, 65);   // ceil(586 * 28 / 256)
  o.max_tiles = 0;
  p = PlanFaceTiles(cv::Size(1280, 926), o);
  EXPECT_EQ(p.tiles.size(), 1u);
  EXPECT_EQ(p.min_face_px, 140);  // the whole frame: ceil(1280 * 28 / 256)
}

TEST(FaceTilesTest, AFrameSmallerThanATileGetsOnlyTheZoomOut) {
  TilePlan p = PlanFaceTiles(cv::Size(200, 150), TileOptions{});
  ASSERT_EQ(p.tiles.size(), 1u);
  EXPECT_EQ(p.tiles[0], cv::Rect(100 - 200, 75 - 200, 400, 400));
}

TEST(FaceTilesTest, AFaceCutByAnInnerTileEdgeOrTooLargeForTheTileIsLeftToOthers) {
  const cv::Size frame(1000, 1000);
  const cv::Rect tile(300, 0, 300, 300);  // its top edge is the frame's, the others inner
  EXPECT_TRUE(WholeInTile(Box(350, 0, 400, 50, 1), tile, frame, 2));   // at the frame's edge
  EXPECT_FALSE(WholeInTile(Box(300, 50, 350, 100, 1), tile, frame, 2));  // against the left
  EXPECT_FALSE(WholeInTile(Box(500, 50, 599, 100, 1), tile, frame, 2));  // against the right
  EXPECT_FALSE(WholeInTile(Box(350, 250, 400, 299, 1), tile, frame, 2));  // against the bottom
  EXPECT_FALSE(WholeInTile(Box(310, 10, 500, 200, 1), tile, frame, 2));  // 190 > 0.6 * 300
  const FaceBox moved = FromTile(Box(10, 20, 30, 40, 1), tile);
  EXPECT_EQ(moved.x1, 310);
  EXPECT_EQ(moved.y2, 40);
}

TEST(FaceTilesTest, OverlapsAreBlendedAndAWeakerBoxInsideAStrongerOneIsDropped) {
  std::vector<FaceBox> c = {
      Box(0, 0, 100, 100, 0.9f),     // the face
      Box(10, 0, 110, 100, 0.6f),    // the same face, shifted: blended in
      Box(30, 40, 70, 80, 0.65f),    // the eyes and nose, wholly inside: dropped
      Box(60, 10, 130, 80, 0.55f),   // 57% inside (IoU 0.23): dropped at 0.5
      Box(300, 300, 340, 340, 0.7f)  // another face
  };
  auto merged = MergeFaces(c, 0.3f, 0.5f, 100);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_NEAR(merged[0].x1, (0.9f * 0 + 0.6f * 10) / 1.5f, 1e-4);
  EXPECT_NEAR(merged[0].score, 0.9f, 1e-6);
  EXPECT_EQ(merged[1].x1, 300);
  // Without containment the inner boxes stay: the fault the close-up test catches.
  EXPECT_EQ(MergeFaces(c, 0.3f, 0, 100).size(), 4u);
  EXPECT_EQ(MergeFaces(c, 0.3f, 0.5f, 1).size(), 1u);
}

}  // namespace
}  // namespace framemill::models
