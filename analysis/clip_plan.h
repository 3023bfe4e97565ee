// Which clips a video's shots make: each shot, less the frames no clip may hold (a gradual
// transition's, or those broken packets spoiled), is one clip, or equal parts of at most max_s when it is longer; what is shorter than
// min_s is left out, with the reason. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace framemill {

struct ClipPlanOptions {
  double min_s = 2;   // clips.min_s: shorter shots are left out
  double max_s = 60;  // clips.max_s: longer shots are split into equal parts of at most this
  bool operator==(const ClipPlanOptions&) const = default;
};

struct FrameRange {
  int64_t start = 0, end = 0;  // source frames [start, end)
  bool operator==(const FrameRange&) const = default;
};

struct PlannedClip {
  FrameRange frames;
  size_t shot = 0;  // the shot it comes from, as motion lists them
  int part = 0, parts = 1;
};

struct DroppedSpan {
  FrameRange frames;
  std::string reason;
};

struct ClipPlan {
  std::vector<PlannedClip> clips;  // in frame order
  std::vector<DroppedSpan> dropped;
};

// `shots` in frame order (motion's), `excluded` the frames no clip may hold, each with the
// reason (listed in `dropped` as they are), `fps` the video's rate (> 0).
ClipPlan PlanClips(const std::vector<FrameRange>& shots, const std::vector<DroppedSpan>& excluded,
                   double fps, const ClipPlanOptions& options);

// Motion's [first, last] (inclusive) runs as excluded spans with `reason`.
std::vector<DroppedSpan> ExcludedRuns(const std::vector<FrameRange>& inclusive, const std::string& reason);

}  // namespace framemill
