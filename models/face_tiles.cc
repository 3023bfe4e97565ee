#include "models/face_tiles.h"

#include <algorithm>
#include <cmath>

#include "media/geometry.h"

namespace framemill::models {
namespace {

// Evenly spaced starts of tiles of `side` over `extent`, neighbours sharing >= overlap.
std::vector<int> Starts(int extent, int side, float overlap) {
  if (extent <= side) return {0};
  const double step = side * (1.0 - overlap);
  const int n = static_cast<int>(std::ceil((extent - side) / step)) + 1;
  std::vector<int> s(n);
  for (int i = 0; i < n; ++i)
    s[i] = static_cast<int>(std::lround(static_cast<double>(i) * (extent - side) / (n - 1)));
  return s;
}

std::vector<cv::Rect> Level(cv::Size frame, int side, float overlap) {
  std::vector<cv::Rect> out;
  for (int y : Starts(frame.height, side, overlap))
    for (int x : Starts(frame.width, side, overlap)) out.emplace_back(x, y, side, side);
  return out;
}

cv::Rect2f Rect(const FaceBox& f) { return {f.x1, f.y1, f.x2 - f.x1, f.y2 - f.y1}; }

}  // namespace

TilePlan PlanFaceTiles(cv::Size frame, const TileOptions& opt) {
  // Tile side T finds faces from kSmallestFaceInput * T / input up to
  // kLargestFaceInTile * T: doubling T from the smallest leaves no gap between levels,
  // and tiles no larger than the frame's short side (the whole frame covers the rest).
  const int shortest = std::min(frame.width, frame.height);
  int side = std::max(8, static_cast<int>(std::ceil(static_cast<double>(opt.input_size) *
                                                    opt.min_face_px / kSmallestFaceInput)));
  std::vector<std::vector<cv::Rect>> levels;
  for (; side <= shortest; side *= 2) levels.push_back(Level(frame, side, opt.overlap));
  // Past the budget, give up the smallest tiles first: they are the most numerous.
  size_t total = 0;
  for (const auto& l : levels) total += l.size();
  size_t first = 0;
  while (first < levels.size() && total > static_cast<size_t>(std::max(0, opt.max_tiles)))
    total -= levels[first++].size();
  TilePlan plan;
  for (size_t i = first; i < levels.size(); ++i)
    plan.tiles.insert(plan.tiles.end(), levels[i].begin(), levels[i].end());
  const int longest = std::max(frame.width, frame.height);
  const int smallest = plan.tiles.empty() ? longest : plan.tiles.front().width;
  plan.tiles.emplace_back(frame.width / 2 - longest, frame.height / 2 - longest, 2 * longest,
                          2 * longest);
  plan.min_face_px = first == 0 && !plan.tiles.empty()
                         ? opt.min_face_px
                         : static_cast<int>(std::ceil(static_cast<double>(smallest) *
                                                      kSmallestFaceInput / opt.input_size));
  return plan;
}

bool WholeInTile(const FaceBox& f, const cv::Rect& tile, cv::Size frame, float margin) {
  if (f.x2 - f.x1 > kLargestFaceInTile * tile.width) return false;
  if (tile.x > 0 && f.x1 < tile.x + margin) return false;
  if (tile.y > 0 && f.y1 < tile.y + margin) return false;
  if (tile.x + tile.width < frame.width && f.x2 > tile.x + tile.width - margin) return false;
  if (tile.y + tile.height < frame.height && f.y2 > tile.y + tile.height - margin) return false;
  return true;
}

FaceBox FromTile(FaceBox f, const cv::Rect& tile) {
  const cv::Point2f o(static_cast<float>(tile.x), static_cast<float>(tile.y));
  f.x1 += o.x; f.x2 += o.x;
  f.y1 += o.y; f.y2 += o.y;
  for (auto& k : f.keypoints) k += o;
  return f;
}

std::vector<FaceBox> MergeFaces(std::vector<FaceBox> c, float iou, float containment,
                                int max_faces) {
  std::stable_sort(c.begin(), c.end(),
                   [](const FaceBox& a, const FaceBox& b) { return a.score > b.score; });
  std::vector<bool> used(c.size(), false);
  std::vector<FaceBox> blended;
  for (size_t i = 0; i < c.size(); ++i) {
    if (used[i]) continue;
    const cv::Rect2f ri = Rect(c[i]);
    FaceBox acc{};
    float wsum = 0;
    for (size_t j = i; j < c.size(); ++j) {
      if (used[j] || (j != i && IoU(ri, Rect(c[j])) <= iou)) continue;
      const float w = c[j].score;
      wsum += w;
      acc.x1 += w * c[j].x1; acc.y1 += w * c[j].y1;
      acc.x2 += w * c[j].x2; acc.y2 += w * c[j].y2;
      for (int k = 0; k < 6; ++k) acc.keypoints[k] += w * c[j].keypoints[k];
      used[j] = true;
    }
    acc.x1 /= wsum; acc.y1 /= wsum; acc.x2 /= wsum; acc.y2 /= wsum;
    for (auto& k : acc.keypoints) k /= wsum;
    acc.score = c[i].score;
    blended.push_back(acc);
  }
  // Containment between blended faces (still strongest first): a part of a face, boxed
  // by several anchors, is judged by its blended box.
  std::vector<FaceBox> out;
  for (const FaceBox& f : blended) {
    if (static_cast<int>(out.size()) >= max_faces) break;
    const cv::Rect2f rf = Rect(f);
    bool inside = false;
    for (const FaceBox& k : out)
      inside |= containment > 0 && rf.area() > 0 && (Rect(k) & rf).area() >= containment * rf.area();
    if (!inside) out.push_back(f);
  }
  return out;
}

}  // namespace framemill::models
