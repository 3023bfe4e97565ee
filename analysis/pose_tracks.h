// Linking the people multi-person pose finds in a video's analysed frames into tracks:
// each person continues the track whose prediction it matches best, by box overlap and by
// keypoint similarity (COCO's OKS), greedily from the best pair. A track is predicted
// where the camera moved its last sighting (when the frame pair's camera motion is known)
// plus its own recent velocity. A shot cut ends every track; a track unseen for longer
// than max_gap_s ends. Plain data and a pure function; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <opencv2/core.hpp>

namespace framemill {

struct PosePoint {
  float x = 0, y = 0, score = 0;  // source pixels
};

struct PoseSighting {
  cv::Rect2f box;                     // source pixels
  std::array<PosePoint, 17> keypoints;  // COCO order
  float score = 0;                    // the person's score
};

// How the background moved from the previous analysed frame to this one.
struct FrameCamera {
  bool known = false;     // false: no estimate (no motion analysis, or it failed)
  double dx = 0, dy = 0;  // source px per source frame (content moving right: +dx)
  double zoom = 1;        // scale per source frame, about the frame's centre
  bool cut = false;       // a new shot starts at this frame
};

struct PoseFrame {
  int64_t frame = 0;  // source frame index
  double time_s = 0;
  FrameCamera camera;
  std::vector<PoseSighting> people;
};

struct PoseTrackOptions {
  double min_affinity = 0.3;   // 0.5 IoU + 0.5 OKS below this never links (pose.track_min_affinity)
  double max_gap_s = 1.0;      // a track unseen longer ends (pose.track_max_gap_s)
  double min_keypoint_score = 0.3;  // keypoints below do not count in OKS
  bool use_camera = true;      // false: ignore FrameCamera (for measuring what it buys)

  bool operator==(const PoseTrackOptions&) const = default;
};

struct TrackedPose {
  int64_t frame = 0;
  size_t person = 0;  // index into that PoseFrame's people
};
struct PoseTrack {
  int id = 0;  // 0, 1, ... in order of first appearance
  std::vector<TrackedPose> frames;
};

// Tracks, by id. Every person of every frame is in exactly one track.
std::vector<PoseTrack> LinkPoseTracks(const std::vector<PoseFrame>& frames, cv::Size frame_size,
                                      const PoseTrackOptions& options = {});

// COCO's object keypoint similarity of two poses (keypoints both score at least
// min_score; 0 when none do), at the scale of box `a`.
double KeypointSimilarity(const PoseSighting& a, const PoseSighting& b, double min_score);

}  // namespace framemill
