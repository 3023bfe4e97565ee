#include "analysis/clip_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace framemill {

namespace {

// `shot` without the excluded frames: what is left of it, in order.
std::vector<FrameRange> WithoutExcluded(FrameRange shot, const std::vector<DroppedSpan>& excluded) {
  std::vector<FrameRange> left = {shot};
  for (const DroppedSpan& x : excluded) {
    const FrameRange& t = x.frames;
    std::vector<FrameRange> next;
    for (const FrameRange& r : left) {
      if (t.end <= r.start || t.start >= r.end) {
        next.push_back(r);
        continue;
      }
      if (t.start > r.start) next.push_back({r.start, t.start});
      if (t.end < r.end) next.push_back({t.end, r.end});
    }
    left = std::move(next);
  }
  return left;
}

std::string Seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f s", s);
  return b;
}

}  // namespace

std::vector<DroppedSpan> ExcludedRuns(const std::vector<FrameRange>& inclusive, const std::string& reason) {
  std::vector<DroppedSpan> out;
  for (const FrameRange& t : inclusive) out.push_back({{t.start, t.end + 1}, reason});
  return out;
}

ClipPlan PlanClips(const std::vector<FrameRange>& shots, const std::vector<DroppedSpan>& excluded,
                   double fps, const ClipPlanOptions& options) {
  ClipPlan plan;
  plan.dropped = excluded;
  for (size_t s = 0; s < shots.size(); ++s) {
    for (const FrameRange& r : WithoutExcluded(shots[s], excluded)) {
      const int64_t frames = r.end - r.start;
      const double seconds = double(frames) / fps;
      if (seconds + 1e-9 < options.min_s) {
        plan.dropped.push_back({r, "shorter than clips.min_s (" + Seconds(seconds) + " < " +
                                       Seconds(options.min_s) + ")"});
        continue;
      }
      // Parts of at most max_frames: every part's length, frames/parts rounded either way, is.
      const int64_t max_frames = std::max<int64_t>(1, static_cast<int64_t>(std::floor(options.max_s * fps + 1e-9)));
      const int parts = static_cast<int>((frames + max_frames - 1) / max_frames);
      for (int p = 0; p < parts; ++p) {
        // Equal parts, by frames: part p is [start + p*frames/parts, start + (p+1)*frames/parts).
        const int64_t a = r.start + frames * p / parts, b = r.start + frames * (p + 1) / parts;
        plan.clips.push_back({{a, b}, s, p, parts});
      }
    }
  }
  std::stable_sort(plan.dropped.begin(), plan.dropped.end(),
            [](const DroppedSpan& x, const DroppedSpan& y) { return x.frames.start < y.frames.start; });
  return plan;
}

}  // namespace framemill
