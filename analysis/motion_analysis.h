// Motion in a video, from dense optical flow between consecutive analysed frames: the
// camera's motion (a similarity transform fitted robustly to the flow), the subjects'
// motion (the flow the camera does not explain), and shot cuts. Fed one frame at a time,
// in order, by one thread; a MotionAnalyser serves one video.
#pragma once

#include <optional>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/video/tracking.hpp>

#include "analysis/gradual_transitions.h"
#include "base/status.h"

namespace framemill {

// The thresholds as bench/shot_search.py chose them on the labelled set's 43 training videos
// (issue 74 part 4, bench/README.md "Shot boundaries on video nobody tuned on (issue 74, part
// 4)"): two sweeps over the 26 DecisionParameters, training cost 129 -> 93.
struct MotionAnalysisOptions {
  int preset = cv::DISOpticalFlow::PRESET_FAST;  // motion.flow_preset
  double moving_px = 1.0;       // residual speed (source px per frame) above which a pixel moves
  double cut_histogram = 0.4116;  // histogram change (Bhattacharyya distance) a cut needs...
  double cut_residual = 0.45;      // ...together with this flow-compensated residual (in luma std)
  // A cut between two moments of one fixed camera changes little (people elsewhere on the same
  // street: histogram 0.03-0.14, residual 0.14-0.21) but changes it at one pair only: its
  // residual at least `isolated_cut` times the larger of the two neighbouring pairs', its
  // histogram change at least `isolated_histogram` times theirs, and the residual at least
  // `isolated_residual`. Chosen on the labelled set (bench/README.md): the four such cuts of
  // held-out-2 to -4 at 4.1-5.4x and 1.8-4.4x; every other pair with a residual over 0.08 at
  // most 2.3x (a flash, whose histogram change is 1.0x: it changes two pairs, as a wing beat).
  double isolated_cut = 3.0;
  double isolated_histogram = 1.05;
  double isolated_residual = 0.07;
  // A whip pan (the picture sliding faster than the flow can follow) changes a pair as a cut
  // does, but one shift of the whole picture explains it: at least `slide_min_shift` of the
  // width (phase correlation), leaving a residual at most `slide_residual` (luma std) where the
  // two overlap. Chosen on the labelled set's training videos (bench/README.md, issue 74).
  double slide_min_shift = 0.04;
  double slide_residual = 0.3;
  // A transition too short for the finder (a 5-frame fade through white, a fast wipe) is found
  // as a cut; the frames around it that change, from the source frame before, at least
  // `ramp_ratio` times as much as the cut's own frame does are its mixed frames, up to
  // `ramp_max_s` on each side, and go to no clip. Chosen on the training videos with the rest.
  double ramp_ratio = 0.7;
  double ramp_max_s = 0.35;
  double flat_std = 4.9;       // luma std (of 255) below which a dark frame is flat (black, faded)...
  double flat_luma = 60.0;      // ...when its mean luma is below this: a white wall is a picture
  TransitionFinderOptions transitions;  // cross-fades and dissolves

  bool operator==(const MotionAnalysisOptions&) const = default;
};

// The boundary decision's named thresholds, each by the name bench/shot_search.py varies it
// under: motion's (cut_histogram, ...) and the transition finder's (transitions.change, ...).
// Exactly one of `real` and `whole` is set.
struct DecisionParameter {
  std::string name;
  double* real = nullptr;
  int* whole = nullptr;
};
std::vector<DecisionParameter> DecisionParameters(MotionAnalysisOptions* options);

// DIS optical flow's presets by the names motion.flow_preset takes, and a preset's name.
const std::vector<std::pair<std::string, int>>& FlowPresets();
std::string FlowPresetName(int preset);

// The camera's motion from one analysed frame to the next, per source frame.
struct CameraMotion {
  bool valid = false;     // false: too few points agree (a cut, a flat frame)
  double dx = 0, dy = 0;  // median background content displacement, source px per frame
  double zoom = 1;        // scale per frame
  double rotation_deg = 0;
  double inliers = 0;     // fraction of flow samples the model explains
  // The median flow's length over every sample, source px per frame: how fast the picture
  // moves when no camera model fits (a fast pan's blur, a whip pan), where dx, dy are 0.
  double flow_speed = 0;
};

// The residual flow, source px per frame. Over a shot: the mean of the pairs' values.
struct SubjectMotion {
  double mean = 0, p95 = 0, moving_fraction = 0;
  double direction_deg = 0;  // dominant direction of the moving pixels: 0 right, 90 down
};

// From the previous analysed frame to `frame`.
struct PairMotion {
  int64_t frame = 0;       // source index of the later frame
  double time_s = 0;
  int64_t gap = 1;         // source frames between the two
  CameraMotion camera;
  SubjectMotion subject;
  double histogram_change = 0;  // Bhattacharyya distance of the two frames' histograms
  double residual = 0;          // mean |later warped by the flow - earlier|, luma normalised
  double luma = 0;              // the later frame's mean luma (0-255)
  bool flat = false;            // the later frame is flat: no cut is decided from it alone
  bool from_flat = false;       // the earlier frame is flat
  // Measured only where the pair changes as a cut does (IsCutStep): the shift of the whole
  // picture that best aligns the two frames, of the width, and the residual (luma std) of
  // their overlap once aligned; -1 where not measured.
  double slide_shift = 0;
  double slide_residual = -1;
  bool cut = false;             // a new shot starts at `frame`...
  // ...or, when the pair spans skipped frames (gap > 1: analysis below the source's rate),
  // at this one: the later frame of the consecutive pair, among every source frame from the
  // earlier analysed frame to `frame`, whose TransitionThumbnails differ most (Skipped). `frame` when
  // gap is 1 or the frames between were not shown.
  int64_t sharpest = 0;
};

struct ShotMotion {
  int64_t start = 0, end = 0;  // source frames [start, end)
  CameraMotion camera;         // medians over the shot's frame pairs
  std::string label;           // static, pan, tilt, zoom, handheld shake
  double jitter = 0;           // frame-to-frame camera shake, source px per frame
  SubjectMotion subject;
};

struct MotionSummary {
  std::vector<int64_t> cuts;       // source frames where a new shot starts
  // Gradual transitions between shots (cross-fades, dissolves, fades through black), each
  // with a cut inside it: the frames of a transition belong to no shot's figures.
  std::vector<GradualTransition> transitions;
  std::vector<ShotMotion> shots;
  ShotMotion overall;              // over every pair within a shot
};

// Dense flow between two 8-bit gray frames of the analysis size, CV_32FC2: from(x) ~
// to(x + flow(x)). Empty: DIS on the CPU (options.preset).
using FlowFn = std::function<Result<cv::Mat>(const cv::Mat& from, const cv::Mat& to)>;

class MotionAnalyser {
 public:
  // `source_size`: the video's frame size; frames arrive scaled to `analysis_size`, at
  // `analysed_fps` frames per second of video.
  MotionAnalyser(MotionAnalysisOptions options, cv::Size source_size, cv::Size analysis_size,
                 double analysed_fps, FlowFn flow = nullptr);

  // The next analysed frame (8-bit BGR at the analysis size), in order. Fails only when
  // the flow does (a device error other than running out of memory).
  Status Add(int64_t index, double time_s, const cv::Mat& bgr);
  // A source frame between two analysed ones (analysis below the source's rate), in order
  // with them: only its thumbnail is kept, to place a cut on the exact source frame where the
  // new shot starts, and transitions' ends on the skipped frames beside them.
  void Skipped(int64_t index, const cv::Mat& bgr);
  // Decides the cuts (a flash is looked at from both sides), then the shots.
  MotionSummary Finish(int64_t frames_total);

  const std::vector<PairMotion>& pairs() const { return pairs_; }
  int64_t frames_analysed() const { return frames_; }

  // The per-pair series as CSV, a line per pair (the artifact).
  std::string SeriesCsv() const;

 private:
  struct Frame {
    int64_t index = -1;
    cv::Mat gray, normalised;  // normalised: zero mean, unit std (float)
    cv::Mat histogram;
    double luma = 0;
    bool flat = false;
  };
  Frame Prepare(int64_t index, const cv::Mat& bgr) const;
  // The pair where the new shot starts when pair `last` ends a flat run that separates
  // two shots.
  size_t CutAfterFlatRun(size_t last) const;
  Result<PairMotion> Compare(const Frame& a, const Frame& b, double time_s);
  void DecideCuts();
  // The pair changes as a cut does: its histogram (cut_histogram) and what the flow cannot
  // explain (cut_residual), before flashes and fades are looked at.
  bool IsCutStep(const PairMotion& p) const;
  // The pair is a whip pan: the picture slid as a whole (slide_min_shift, slide_residual).
  bool IsSlide(const PairMotion& p) const;
  bool IsIsolatedCut(size_t i) const;  // pair i alone changes: a cut within one fixed camera
  // A fade through black between two shots, around the flat run that pair `last` ends: from
  // the first frame of the fade out to the last of the fade in, the cut at `cut`; none when
  // the light fades on neither side of the run.
  std::optional<GradualTransition> FadeAround(size_t last, size_t cut) const;
  // Marks each dissolve's cut on pairs_ (a cut found inside its span is its cut, unless it is
  // a hard cut of its own: then the span ends before it), then lists the cuts, each at its
  // exact source frame, and every transition in order, its ends widened over skipped frames.
  void Place(MotionSummary* out, const std::vector<GradualTransition>& dissolves);
  // A hard cut of its own: pair i alone changes, as a cut would, inside a transition's span.
  bool IsHardCutInSpan(size_t i) const;
  // Widens [first, last] over the skipped frames next to its ends (any may be mixed).
  GradualTransition OverSkipped(GradualTransition t) const;
  // Widens t out to where the picture stops changing more than the shot beside it does
  // (transitions.widen_ratio times its lower quartile, and a fade's step at least), by at most
  // its own length on each side, never past a cut (`cuts`: the new shots' first frames) nor into
  // another of `all`. The ends a span's ramp fit leaves short (bench/README.md, issue 74 part 5).
  GradualTransition Widened(GradualTransition t, const std::vector<GradualTransition>& all,
                            const std::vector<int64_t>& cuts) const;
  // The lower quartile of Step's changes into source frames [from, to]; -1 with fewer than 3.
  double QuietChange(int64_t from, int64_t to) const;
  bool InTransition(const PairMotion& p, const MotionSummary& s) const;
  // The frames around the cut at source frame `cut` that change about as much as it does
  // (ramp_ratio, ramp_max_s), as a transition; none when only the cut's frame changes.
  std::optional<GradualTransition> RampAround(int64_t cut) const;
  double ChangeAt(int64_t index) const;  // Step's change into source frame `index`; 0 unseen
  // The next source frame's TransitionThumbnail, seen (analysed or skipped): what the pairs
  // since the last analysed frame changed most.
  void Step(int64_t index, const cv::Mat& thumb);

  MotionAnalysisOptions options_;
  cv::Size source_;
  double scale_;  // analysis px per source px
  FlowFn flow_;
  Frame previous_, before_previous_;
  Frame last_solid_;                   // the last frame that was not flat
  TransitionFinder finder_;
  std::vector<GradualTransition> fades_;  // between shots, found in DecideCuts
  std::vector<PairMotion> pairs_;
  // Per pair: the histogram change from the frame before it to the frame after it (a
  // flash differs from both neighbours, which agree); and for a pair that ends a flat
  // run, the comparison with the last frame before the run (a fade between two shots).
  std::vector<double> skip_change_;
  // Per pair: the histogram change from the frame before it to the frame two after it (a
  // two-frame flash); and the histogram of the analysed frame three back, to make it.
  std::vector<double> wide_change_;
  cv::Mat third_last_histogram_;
  std::vector<std::optional<PairMotion>> across_flat_;
  cv::Mat last_thumb_;           // the last source frame's seen (analysed or skipped)
  // Every source frame seen after the first: its index and its thumbnail's change from the
  // frame seen before it, in order (8 + 8 bytes a frame).
  std::vector<std::pair<int64_t, double>> changes_;
  double analysed_fps_ = 25;
  int64_t sharpest_ = -1;        // since the last analysed frame: the frame that changed most...
  double sharpest_change_ = -1;  // ...and by how much
  int64_t frames_ = 0;
  double first_luma_ = 0;
};

// The result JSON (the contract's keys) for a summary.
nlohmann::json MotionJson(const MotionSummary& s, double fps, int64_t frames_analysed,
                          cv::Size analysis_size);

// A camera label from medians and jitter (source px per frame) for a frame of `width`.
std::string CameraLabel(const CameraMotion& median, double jitter, int width);

}  // namespace framemill
