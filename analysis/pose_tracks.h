// Linking the people multi-person pose finds in a video's analysed frames into tracks:
// each person continues the track whose prediction it matches best, by box overlap and by
// keypoint similarity (COCO's OKS), greedily from the best pair. A track is predicted
// where the camera moved its last sighting (when the frame pair's camera motion is known)
// plus its own recent velocity. A shot cut ends every track; a track unseen for longer
// than max_gap_s ends. Plain data and a pure function; thread-safe.
//
// Made to give the same tracks on every device (issue 40): a device's engine in fp16 moves
// person scores by up to 0.05, keypoint scores by up to 0.3 and keypoints by tens of pixels
// against the CPU's fp32 (the three sample videos, bench/README.md "Pose tracks on every
// device"). So fewer decisions turn on one number's side of a line: a track takes people
// down to keep_score but is kept only if one of them reaches start_score (hysteresis, as
// ByteTrack, which also links the stronger people first) and it has min_sightings; a
// keypoint's weight in OKS rises linearly across keypoint_band instead of jumping; and the
// affinity blends in OKS by the keypoints' weight.
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
  double min_keypoint_score = 0.3;  // a keypoint's weight in OKS is 1/2 at this score...
  double keypoint_band = 0.2;  // ...rising from 0 to 1 across this band around it (0: a step)
  double start_score = 0;      // a track needs a person scoring this (pose.min_person_score)...
  double keep_score = 0.10;    // ...and takes people down to this (pose.track_keep_score)
  int min_sightings = 2;       // a track seen fewer times is left out (pose.track_min_sightings)
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

// Tracks, by id (0, 1, ... in order of first appearance). A person is in at most one track;
// people under keep_score in none; a track has min_sightings or more, one at start_score.
std::vector<PoseTrack> LinkPoseTracks(const std::vector<PoseFrame>& frames, cv::Size frame_size,
                                      const PoseTrackOptions& options = {});

// COCO's object keypoint similarity of two poses at the scale of box `a`: the mean over
// keypoints, each weighted by the lower of its two scores on a ramp of `band` centred on
// `min_score` (band 0: only keypoints both scoring min_score count); 0 when none weigh.
// `weight`, when given, gets the keypoints' total weight.
double KeypointSimilarity(const PoseSighting& a, const PoseSighting& b, double min_score,
                          double band = 0, double* weight = nullptr);

}  // namespace framemill
