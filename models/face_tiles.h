// Face detection at every size. BlazeFace sees the frame squeezed into 256x256, so a
// face narrower than about a ninth of the frame is lost (a group photo yields none).
// The frame is also covered by overlapping square tiles at a pyramid of sizes; each
// tile's faces are mapped back to the frame and merged with the whole frame's.
// Pure functions; thread-safe.
#pragma once

#include <vector>

#include <opencv2/core.hpp>

#include "models/decode.h"

namespace framemill::models {

struct TileOptions {
  int input_size = 256;    // the detector's input side
  int min_face_px = 32;    // the smallest face side (frame pixels) to look for
  int max_tiles = 48;      // per frame; past it the smallest tiles are given up
  float overlap = 0.25f;   // of a tile's side shared with its neighbour

  bool operator==(const TileOptions&) const = default;
};

// The smallest face, in detector-input pixels, that BlazeFace finds reliably:
// measured on the Solvay photo (recall 0.97 at 28-36 px, 0.6-0.7 at 14-18 px).
constexpr int kSmallestFaceInput = 28;

struct TilePlan {
  // Square, smallest first. The last one is larger than the frame, which sits at its
  // centre on black: a face that fills a close-up is too large for BlazeFace to find
  // in the frame itself (measured: 7 of 12 whole close-ups found, 9 of 12 with it).
  std::vector<cv::Rect> tiles;
  int min_face_px = 0;          // what the plan can find; larger than asked when tiles ran out
};
TilePlan PlanFaceTiles(cv::Size frame, const TileOptions& opt);

// Whether a face found in `tile` is whole there: it keeps clear of every tile edge that
// lies inside the frame (a neighbouring tile sees that face whole), and it is no wider
// than kLargestFaceInTile of the tile (the next larger tile, or the frame, sees it).
constexpr float kLargestFaceInTile = 0.6f;
bool WholeInTile(const FaceBox& face, const cv::Rect& tile, cv::Size frame, float margin_px);

// Maps a face found in a tile's own pixels to frame pixels.
FaceBox FromTile(FaceBox face, const cv::Rect& tile);

// MediaPipe's weighted NMS over candidates in frame pixels, strongest first: each kept
// face is the score-weighted mean of the candidates whose IoU with it exceeds `iou`, and a
// weaker candidate lying mostly inside it (intersection over its own area >= `containment`,
// 0 disables) is dropped: on a close-up, BlazeFace also boxes the eyes-and-nose region.
std::vector<FaceBox> MergeFaces(std::vector<FaceBox> candidates, float iou, float containment,
                                int max_faces);

}  // namespace framemill::models
