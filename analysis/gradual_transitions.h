// Gradual transitions between two shots in a stream of analysed frames: a cross-fade or a
// dissolve, where every frame is a mix of the shot before and the shot after. Found in two
// steps. A candidate is a run of frames whose colour histogram differs from the frame `lag`
// frames earlier by more than a cut would (each step of a dissolve alone is too small to be a
// cut). It is a transition when the frames inside it are mixes of the frames on either side:
// fitting each one, blurred and small, as (1 - a) * before + a * after, `a` rises from 0 to 1
// over several frames, the fit explains some frame better than either side alone, and the
// optical flow explains the mixed frames far worse than the frames on either side. A hard
// cut has no frame in between (its `a` jumps), a pan's middle frames fit as mixes of its
// ends nearly as well but the flow follows them, and a fade through black inside one shot
// is not a change of histogram (motion's histograms are normalised for light). The two sides
// are tried in turn: two lags before the change was first seen, the frame just before it, and
// the frames around the run where the flow residual rises (for a cross-fade between two moving
// shots, or one at the end of a change too long to look at whole). Streamed:
// memory is bounded by the longest transition looked for. Fades through black between two shots are motion's flat runs
// (analysis/motion_analysis.h), not this.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace framemill {

// The thresholds were chosen by bench/shot_search.py on the labelled set's training videos:
// bench/README.md, "Shot boundaries on video nobody tuned on" (issue 74).
struct TransitionFinderOptions {
  double lag_s = 0.5;          // the frame a candidate is compared with is this much earlier
  double max_s = 2.94;         // longer changes (a slow pan into new content) are not looked at
  double change = 0.105;       // histogram change (Bhattacharyya) that opens a candidate
  double mixed_lo = 0.05145;    // a frame with `a` in [mixed_lo, 1 - mixed_lo] is a mix...
  int min_mixed = 2;           // ...and a transition has at least this many
  double max_fit_ratio = 0.75;  // the mix's error over the nearer side's, at most (best frame)
  double max_step = 0.42;       // a frame's `a` above the frame before's, at most (else a cut)
  double residual_rise = 2.5;   // the mixed frames' flow residual over the sides', at least...
  double min_residual = 0.06;   // ...and at least this (motion's residual, luma std)
  double edge = 0.009604;       // `a` within this of 0 or 1: one side only (the sides' residual)
  // A run of high flow residual places the sides only with the camera slower than this (of
  // the width per frame; transitions' runs at most 0.6%, fast pans' and the shake's 3-7.5%),
  // and is a transition only with this many mixed frames (the three found so 7-12; the one
  // false candidate it gave and cockatoo.mp4's wing beats 1-3).
  double max_camera = 0.0294;
  int bump_min_mixed = 5;
  // The span reaches this fraction of its half-length past the ramp's ends at 0 and 1: the
  // faint ends of a mix that is not linear (a shaking shot's, a wipe's) go to no clip.
  double span_margin = 0.392;
  // Then each end goes on over the source frames that still change at least this many times as
  // much as the shot beside it does (motion's MotionAnalyser::Widened); 0: not at all.
  double widen_ratio = 2.0;
  // A wipe: each part of the picture is one side or the other, never a mix, and the parts
  // change side in order across the picture. Cells of the thumbnail (8 x 6) are fitted to the
  // nearer side: a frame whose cells fit at most `wipe_fit_ratio` of the nearer side's error
  // (over the whole frame), the share of cells on the after side rising as a mix's `a`, and
  // the frame each cell changes side at correlated at least `wipe_sweep` with its position
  // (left to right, or top to bottom).
  double wipe_fit_ratio = 0.5;
  double wipe_sweep = 0.8;

  bool operator==(const TransitionFinderOptions&) const = default;
};

// The value at `fraction` of the way up `v` (0.5: the upper median of an even count; 0.25: the
// lower quartile). `v` must not be empty.
double AtFraction(std::vector<double> v, double fraction);

// A frame as the finder compares frames: 8-bit gray made CV_32F, about 64 px wide, blurred
// 3x3. Motion also places cuts between analysed frames by it (MotionAnalyser::Skipped).
cv::Mat TransitionThumbnail(const cv::Mat& gray);

struct GradualTransition {
  int64_t first = 0, last = 0;  // source frames, inclusive: every mixed frame
  int64_t cut = 0;              // where the new shot starts (the first frame more after than before)
  std::string kind;             // "dissolve", "wipe" or "fade" (through black)
};

class TransitionFinder {
 public:
  // `analysed_fps`: analysed frames per second of video.
  TransitionFinder(TransitionFinderOptions options, double analysed_fps);

  // The next analysed frame in order: its source index, its TransitionThumbnail, its histogram (motion's),
  // whether it is flat (a flat frame ends any candidate: fades are decided elsewhere), and
  // the residual of the flow from the frame before (motion's PairMotion::residual; 0 for the
  // first), and whether the step from the frame before is as large as a hard cut's (motion's
  // cut test on the pair): a candidate open across it ends before it, and no later one reaches
  // back over it (a cut a few frames after a dissolve made one candidate of both, whose sides
  // fitted neither).
  void Add(int64_t index, const cv::Mat& thumbnail, const cv::Mat& histogram, bool flat,
           double residual, double camera_speed = 0, bool hard_step = false);
  // Every transition found, in order, once the last frame has been added.
  std::vector<GradualTransition> Finish();

 private:
  struct Thumb {
    int64_t index = 0;
    cv::Mat small;  // CV_32F, blurred and about 64 px wide
    cv::Mat histogram;
    double residual = 0;
    double camera_speed = 0;  // of the width per frame; 0 when not known
  };
  // The frames from the before side `a` to the after side `b` (positions in recent_), each
  // fitted as a mix of the two.
  struct Profile {
    std::vector<double> mix;  // per frame: how much of the after side it is
    int mixed = 0;            // frames that are clearly both
    double best_ratio = 1;    // the best fit's error over the nearer side's error
    double max_step = 0;      // the largest rise of `mix` from one frame to the next
    double residual_in = 0;   // mean flow residual of the mixed frames
    double residual_out = 0;  // median flow residual of the frames that are one side only
  };
  Profile Measure(size_t a, size_t b) const;
  // The frames from `a` to `b` as a wipe: Profile's mix is the share of cells on the after
  // side, best_ratio the cells' fit; `sweep` how far the cells change side in order.
  Profile MeasureWipe(size_t a, size_t b, double* sweep) const;
  bool IsWipe(const Profile& p, double sweep) const;
  bool IsTransition(const Profile& p) const;
  // Sides placed where the flow residual rises: the residual around it, and wider sides for
  // the span.
  struct Bump {
    double sides = 0;
    size_t wide_a = 0, wide_b = 0;
  };
  void Evaluate(size_t a, size_t b, const Bump* bump = nullptr);
  bool AddSpan(const Profile& p, size_t a, const char* kind = "dissolve");
  void EvaluateOpen(size_t open, size_t b, bool too_long);
  std::optional<std::pair<size_t, size_t>> ResidualBump(size_t lo, size_t hi, double* sides) const;
  void Reset();

  TransitionFinderOptions options_;
  size_t lag_ = 1, max_frames_ = 1;
  std::deque<Thumb> recent_;
  std::optional<size_t> open_;  // the candidate's first frame, a position in recent_
  bool too_long_ = false;       // the open candidate outgrew max_s
  std::vector<GradualTransition> found_;
};

}  // namespace framemill
