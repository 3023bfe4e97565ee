#include "analysis/motion_analysis.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include <opencv2/calib3d.hpp>
#include <opencv2/imgproc.hpp>

namespace framemill {

const std::vector<std::pair<std::string, int>>& FlowPresets() {
  static const std::vector<std::pair<std::string, int>> presets = {
      {"ultrafast", cv::DISOpticalFlow::PRESET_ULTRAFAST},
      {"fast", cv::DISOpticalFlow::PRESET_FAST},
      {"medium", cv::DISOpticalFlow::PRESET_MEDIUM}};
  return presets;
}

std::string FlowPresetName(int preset) {
  for (const auto& [name, value] : FlowPresets())
    if (value == preset) return name;
  return std::to_string(preset);
}

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kMinInliers = 0.25;  // below, the frame pair has no trustworthy background
constexpr double kBorder = 0.05;      // flow at the frame's edge sees content leave or enter

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  double m = v[mid];
  if (v.size() % 2 == 0) m = (m + *std::max_element(v.begin(), v.begin() + mid)) / 2;
  return m;
}

cv::Rect Interior(cv::Size s) {
  const int bx = static_cast<int>(s.width * kBorder), by = static_cast<int>(s.height * kBorder);
  return {bx, by, s.width - 2 * bx, s.height - 2 * by};
}

// The whole picture slid from `a` to `b` (zero-mean, unit-std luma, CV_32F): the shift that
// best aligns them (phase correlation: b(x) ~ a(x - d)), of the width, and the mean absolute
// difference where they overlap once aligned. A pan too fast for the flow leaves a small one;
// two shots, whatever shift their correlation's peak gives, a large one.
struct Slide {
  double shift = 0, residual = -1;
};
Slide SlideBetween(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat window;
  cv::createHanningWindow(window, a.size(), CV_32F);
  // Copies: OpenCV 4.6's phaseCorrelate multiplies its inputs by the window in place when
  // their size is already a DFT size (320x180 is), and these are the frames' own luma, which
  // the cut tests read again (the across-black residual fell from 1.012 to 0.448 without them).
  const cv::Point2d d = cv::phaseCorrelate(a.clone(), b.clone(), window);
  const int dx = static_cast<int>(std::lround(d.x)), dy = static_cast<int>(std::lround(d.y));
  const int w = a.cols - std::abs(dx), h = a.rows - std::abs(dy);
  Slide s;
  s.shift = std::hypot(d.x, d.y) / std::max(1, a.cols);
  if (w < a.cols / 2 || h < a.rows / 2) return s;  // overlapping by less than half: no slide
  const cv::Rect in_a(std::max(0, -dx), std::max(0, -dy), w, h), in_b(std::max(0, dx), std::max(0, dy), w, h);
  const cv::Rect inner = Interior(in_a.size());
  s.residual = cv::mean(cv::abs(a(in_a)(inner) - b(in_b)(inner)))[0];
  return s;
}

// The robust camera model: a similarity transform (translation, rotation, uniform scale)
// fitted by RANSAC to flow samples on a grid, refined on its inliers.
struct Similarity {
  cv::Matx23d m = cv::Matx23d(1, 0, 0, 0, 1, 0);
  std::vector<cv::Point2f> inlier_flow;
  double inliers = 0;
  double median_length = 0;  // of every sample's flow, analysis px
};

Similarity FitCamera(const cv::Mat& flow) {
  const cv::Rect in = Interior(flow.size());
  // About 750 samples at 320 px (the peer's script fits 300): width/48 gave 1,680, and
  // RANSAC's cost with them, for no accuracy the camera benchmark could see (bench/README).
  const int step = std::max(4, flow.cols / 32);
  std::vector<cv::Point2f> from, to;
  for (int y = in.y; y < in.y + in.height; y += step)
    for (int x = in.x; x < in.x + in.width; x += step) {
      const cv::Point2f f = flow.at<cv::Point2f>(y, x);
      from.emplace_back(float(x), float(y));
      to.emplace_back(float(x) + f.x, float(y) + f.y);
    }
  Similarity s;
  std::vector<double> lengths;
  for (size_t i = 0; i < from.size(); ++i) lengths.push_back(cv::norm(to[i] - from[i]));
  s.median_length = Median(std::move(lengths));
  if (from.size() < 8) return s;
  std::vector<uchar> mask;
  cv::Mat m = cv::estimateAffinePartial2D(from, to, mask, cv::RANSAC, 0.75, 2000, 0.995, 10);
  if (m.empty()) return s;
  s.m = cv::Matx23d(m);
  for (size_t i = 0; i < from.size(); ++i)
    if (mask[i]) s.inlier_flow.push_back(to[i] - from[i]);
  s.inliers = double(s.inlier_flow.size()) / from.size();
  return s;
}

// The 45-degree sector (0 right, 2 down, 4 left, 6 up; image y points down) nearest to the
// direction of (x, y): round(atan2(y, x) / 45) mod 8, decided by comparisons with
// tan(22.5 deg) instead of a trigonometric call per pixel.
int Sector(float x, float y) {
  constexpr float kTan22_5 = 0.41421356f;
  const float ax = std::abs(x), ay = std::abs(y);
  if (ay <= kTan22_5 * ax) return x >= 0 ? 0 : 4;
  if (ax < kTan22_5 * ay) return y > 0 ? 2 : 6;
  if (y > 0) return x > 0 ? 1 : 3;
  return x > 0 ? 7 : 5;
}

SubjectMotion Residual(const cv::Mat& flow, const cv::Matx23d& m, double to_source,
                       double moving_px) {
  const cv::Rect in = Interior(flow.size());
  std::vector<float> speed;
  speed.reserve(size_t(in.area()));
  std::array<double, 8> weight{};
  std::array<cv::Point2d, 8> sum{};
  double total = 0;
  size_t moving = 0;
  // In float: the flow itself is float, and this runs over every interior pixel.
  const float s = static_cast<float>(to_source), thr = static_cast<float>(moving_px);
  const float a = float(m(0, 0)) - 1, b = float(m(0, 1)), c = float(m(0, 2));
  const float d = float(m(1, 0)), e = float(m(1, 1)) - 1, g = float(m(1, 2));
  for (int y = in.y; y < in.y + in.height; ++y) {
    const auto* f = flow.ptr<cv::Point2f>(y);
    const float fy = float(y);
    for (int x = in.x; x < in.x + in.width; ++x) {
      const float fx = float(x);
      const float rx = (f[x].x - (a * fx + b * fy + c)) * s;
      const float ry = (f[x].y - (d * fx + e * fy + g)) * s;
      const float v = std::sqrt(rx * rx + ry * ry);
      speed.push_back(v);
      total += v;
      if (v <= thr) continue;
      ++moving;
      const int sector = Sector(rx, ry);
      weight[sector] += v;
      sum[sector] += cv::Point2d(rx, ry);
    }
  }
  SubjectMotion out;
  if (speed.empty()) return out;
  out.mean = total / speed.size();
  const size_t k = std::min(speed.size() - 1, size_t(0.95 * speed.size()));
  std::nth_element(speed.begin(), speed.begin() + k, speed.end());
  out.p95 = speed[k];
  out.moving_fraction = double(moving) / speed.size();
  const auto top = std::max_element(weight.begin(), weight.end()) - weight.begin();
  if (weight[top] > 0) {
    double deg = std::atan2(sum[top].y, sum[top].x) * 180 / kPi;
    out.direction_deg = deg < 0 ? deg + 360 : deg;
  }
  return out;
}

// The shape of the frame's luma: 32 bins over [-3, 3] standard deviations about its mean.
// Counted on the 8-bit levels (an integer histogram) and folded, since every pixel of one
// level lands in the same bin; counting the float image cost more (with the camera grid's
// coarser step, one thread went from 495 to 558 frames/s on vtest.avi: bench/README).
cv::Mat NormalisedLumaHistogram(const cv::Mat& gray, double mean, double stddev) {
  constexpr int kBins = 32;
  constexpr double kLo = -3, kHi = 3;
  const int levels[] = {256};
  const float range[] = {0, 256};
  const float* ranges[] = {range};
  const int channel[] = {0};
  cv::Mat by_level;
  cv::calcHist(&gray, 1, channel, cv::Mat(), by_level, 1, levels, ranges);
  const double sd = std::max(stddev, 1.0);
  cv::Mat out = cv::Mat::zeros(1, kBins, CV_32F);
  for (int v = 0; v < 256; ++v) {
    const double z = (v - mean) / sd;
    if (z < kLo || z >= kHi) continue;
    const int bin = std::min(kBins - 1, static_cast<int>((z - kLo) * kBins / (kHi - kLo)));
    out.at<float>(bin) += by_level.at<float>(v);
  }
  return out;
}

// Jitter: the RMS of the camera's displacement about its running median (5 pairs), the
// shake a tripod or a smooth pan does not have.
double Jitter(const std::vector<cv::Point2d>& d) {
  if (d.size() < 3) return 0;
  double sq = 0;
  for (size_t i = 0; i < d.size(); ++i) {
    const size_t lo = i < 2 ? 0 : i - 2, hi = std::min(d.size(), i + 3);
    std::vector<double> xs, ys;
    for (size_t j = lo; j < hi; ++j) xs.push_back(d[j].x), ys.push_back(d[j].y);
    const double ex = d[i].x - Median(xs), ey = d[i].y - Median(ys);
    sq += ex * ex + ey * ey;
  }
  return std::sqrt(sq / d.size());
}

ShotMotion Summarise(const std::vector<const PairMotion*>& pairs, int width) {
  ShotMotion s;
  std::vector<double> dx, dy, zoom, rot;
  std::vector<cv::Point2d> shake;
  for (const PairMotion* p : pairs) {
    s.subject.mean += p->subject.mean;
    s.subject.p95 += p->subject.p95;
    s.subject.moving_fraction += p->subject.moving_fraction;
    if (!p->camera.valid) continue;
    dx.push_back(p->camera.dx), dy.push_back(p->camera.dy);
    zoom.push_back(p->camera.zoom), rot.push_back(p->camera.rotation_deg);
    shake.emplace_back(p->camera.dx, p->camera.dy);
  }
  if (!pairs.empty()) {
    s.subject.mean /= pairs.size(), s.subject.p95 /= pairs.size();
    s.subject.moving_fraction /= pairs.size();
    std::vector<double> dirs;
    for (const PairMotion* p : pairs)
      if (p->subject.moving_fraction > 0) dirs.push_back(p->subject.direction_deg);
    s.subject.direction_deg = Median(dirs);
  }
  s.camera.valid = !dx.empty();
  s.camera.dx = Median(dx), s.camera.dy = Median(dy);
  s.camera.zoom = dx.empty() ? 1 : Median(zoom);
  s.camera.rotation_deg = Median(rot);
  s.jitter = Jitter(shake);
  s.label = s.camera.valid ? CameraLabel(s.camera, s.jitter, width) : "unknown";
  return s;
}

nlohmann::json CameraJson(const ShotMotion& s) {
  return {{"dx", s.camera.dx},       {"dy", s.camera.dy},
          {"zoom", s.camera.zoom},   {"rotation_deg", s.camera.rotation_deg},
          {"label", s.label},        {"jitter", s.jitter}};
}

nlohmann::json SubjectJson(const SubjectMotion& s) {
  return {{"mean", s.mean},
          {"p95", s.p95},
          {"moving_fraction", s.moving_fraction},
          {"direction_deg", s.direction_deg}};
}

}  // namespace

std::string CameraLabel(const CameraMotion& c, double jitter, int width) {
  // Sizes in source px per frame, relative to the frame: what a viewer would notice.
  const double noticeable = std::max(0.5, 0.001 * width);
  const double zoom_px = std::abs(std::log(c.zoom)) * width / 2;  // the frame edge's travel
  const double travel = std::hypot(c.dx, c.dy);
  // A steady motion names the shot when it outweighs the shake around it.
  if (std::max(zoom_px, travel) > std::max(noticeable, jitter)) {
    if (zoom_px > travel) return "zoom";
    return std::abs(c.dx) >= std::abs(c.dy) ? "pan" : "tilt";
  }
  return jitter > noticeable ? "handheld shake" : "static";
}

std::vector<DecisionParameter> DecisionParameters(MotionAnalysisOptions* o) {
  TransitionFinderOptions* t = &o->transitions;
  return {{"cut_histogram", &o->cut_histogram},
          {"cut_residual", &o->cut_residual},
          {"isolated_cut", &o->isolated_cut},
          {"isolated_histogram", &o->isolated_histogram},
          {"isolated_residual", &o->isolated_residual},
          {"slide_min_shift", &o->slide_min_shift},
          {"slide_residual", &o->slide_residual},
          {"ramp_ratio", &o->ramp_ratio},
          {"ramp_max_s", &o->ramp_max_s},
          {"flat_std", &o->flat_std},
          {"flat_luma", &o->flat_luma},
          {"transitions.lag_s", &t->lag_s},
          {"transitions.max_s", &t->max_s},
          {"transitions.change", &t->change},
          {"transitions.mixed_lo", &t->mixed_lo},
          {"transitions.min_mixed", nullptr, &t->min_mixed},
          {"transitions.max_fit_ratio", &t->max_fit_ratio},
          {"transitions.max_step", &t->max_step},
          {"transitions.residual_rise", &t->residual_rise},
          {"transitions.min_residual", &t->min_residual},
          {"transitions.edge", &t->edge},
          {"transitions.max_camera", &t->max_camera},
          {"transitions.bump_min_mixed", nullptr, &t->bump_min_mixed},
          {"transitions.span_margin", &t->span_margin},
          {"transitions.widen_ratio", &t->widen_ratio},
          {"transitions.wipe_fit_ratio", &t->wipe_fit_ratio},
          {"transitions.wipe_sweep", &t->wipe_sweep}};
}

MotionAnalyser::MotionAnalyser(MotionAnalysisOptions options, cv::Size source_size,
                               cv::Size analysis_size, double analysed_fps, FlowFn flow)
    : options_(options),
      source_(source_size),
      scale_(source_size.width > 0 ? double(analysis_size.width) / source_size.width : 1),
      flow_(std::move(flow)),
      finder_(options.transitions, analysed_fps),
      analysed_fps_(analysed_fps > 0 ? analysed_fps : 25) {
  if (!flow_) {
    cv::Ptr<cv::DISOpticalFlow> dis = cv::DISOpticalFlow::create(options.preset);
    flow_ = [dis](const cv::Mat& from, const cv::Mat& to) -> Result<cv::Mat> {
      cv::Mat f;
      dis->calc(from, to, f);
      return f;
    };
  }
}

MotionAnalyser::Frame MotionAnalyser::Prepare(int64_t index, const cv::Mat& bgr) const {
  Frame f;
  f.index = index;
  cv::cvtColor(bgr, f.gray, cv::COLOR_BGR2GRAY);
  cv::Scalar mean, stddev;
  cv::meanStdDev(f.gray, mean, stddev);
  f.flat = stddev[0] < options_.flat_std && mean[0] < options_.flat_luma;
  f.luma = mean[0];
  f.gray.convertTo(f.normalised, CV_32F, 1.0 / std::max(stddev[0], 1.0),
                   -mean[0] / std::max(stddev[0], 1.0));
  // Hue x saturation (both unchanged when a fade scales the light) over pixels that are
  // not dark, plus the normalised luma's shape.
  cv::Mat hsv, dark_free;
  cv::cvtColor(bgr, hsv, cv::COLOR_BGR2HSV);
  cv::inRange(hsv, cv::Scalar(0, 0, 24), cv::Scalar(180, 256, 256), dark_free);
  const int hs_bins[] = {16, 4};
  const float h_range[] = {0, 180}, s_range[] = {0, 256};
  const float* hs_ranges[] = {h_range, s_range};
  const int hs_channels[] = {0, 1};
  cv::Mat hs;
  cv::calcHist(&hsv, 1, hs_channels, dark_free, hs, 2, hs_bins, hs_ranges);
  hs = hs.reshape(1, 1);
  cv::Mat luma = NormalisedLumaHistogram(f.gray, mean[0], stddev[0]);
  cv::normalize(hs, hs, 1, 0, cv::NORM_L1);
  cv::normalize(luma, luma, 1, 0, cv::NORM_L1);
  cv::hconcat(hs * 0.5, luma * 0.5, f.histogram);
  return f;
}

Result<PairMotion> MotionAnalyser::Compare(const Frame& a, const Frame& b, double time_s) {
  PairMotion p;
  p.frame = b.index;
  p.time_s = time_s;
  p.gap = std::max<int64_t>(1, b.index - a.index);
  p.flat = b.flat;
  p.from_flat = a.flat;
  p.luma = b.luma;
  p.histogram_change = cv::compareHist(a.histogram, b.histogram, cv::HISTCMP_BHATTACHARYYA);
  auto computed = flow_(a.gray, b.gray);
  if (!computed.ok()) return computed.status();
  const cv::Mat flow = std::move(computed).value();
  // The later frame pulled back along the flow onto the earlier one: what motion explains.
  cv::Mat map(flow.size(), CV_32FC2);
  for (int y = 0; y < flow.rows; ++y) {
    const auto* f = flow.ptr<cv::Point2f>(y);
    auto* m = map.ptr<cv::Point2f>(y);
    for (int x = 0; x < flow.cols; ++x) m[x] = cv::Point2f(float(x) + f[x].x, float(y) + f[x].y);
  }
  cv::Mat warped;
  cv::remap(b.normalised, warped, map, cv::noArray(), cv::INTER_LINEAR, cv::BORDER_REPLICATE);
  const cv::Rect in = Interior(flow.size());
  p.residual = cv::mean(cv::abs(a.normalised(in) - warped(in)))[0];

  const double to_source = 1.0 / scale_ / double(p.gap);
  const Similarity s = FitCamera(flow);
  if (!a.flat && !b.flat && s.inliers >= kMinInliers) {
    std::vector<double> dx, dy;
    for (const auto& f : s.inlier_flow) dx.push_back(f.x), dy.push_back(f.y);
    p.camera.valid = true;
    p.camera.dx = Median(dx) * to_source;
    p.camera.dy = Median(dy) * to_source;
    const double zoom = std::hypot(s.m(0, 0), s.m(1, 0));
    p.camera.zoom = std::pow(zoom, 1.0 / double(p.gap));
    p.camera.rotation_deg = std::atan2(s.m(1, 0), s.m(0, 0)) * 180 / kPi / double(p.gap);
  }
  p.camera.inliers = s.inliers;
  p.camera.flow_speed = s.median_length * to_source;
  p.subject = Residual(flow, p.camera.valid ? s.m : cv::Matx23d(1, 0, 0, 0, 1, 0), to_source,
                       options_.moving_px);
  if (IsCutStep(p)) {  // rare: the one pair of a cut, or a pan too fast for the flow
    const Slide slide = SlideBetween(a.normalised, b.normalised);
    p.slide_shift = slide.shift, p.slide_residual = slide.residual;
  }
  return p;
}

// The change a cut is placed by: the mean absolute difference of two consecutive source
// frames' thumbnails (the transition finder's). At a cut it is the new picture against the
// old; within a shot, a frame's motion, smaller the higher the source's rate.
void MotionAnalyser::Step(int64_t index, const cv::Mat& thumb) {
  if (!last_thumb_.empty() && last_thumb_.size() == thumb.size()) {
    const double change = cv::norm(last_thumb_, thumb, cv::NORM_L1) / double(thumb.total());
    if (change > sharpest_change_) sharpest_ = index, sharpest_change_ = change;
    changes_.emplace_back(index, change);
  }
  last_thumb_ = thumb;
}

void MotionAnalyser::Skipped(int64_t index, const cv::Mat& bgr) {
  cv::Mat gray;
  cv::cvtColor(bgr, gray, cv::COLOR_BGR2GRAY);
  Step(index, TransitionThumbnail(gray));
}

Status MotionAnalyser::Add(int64_t index, double time_s, const cv::Mat& bgr) {
  Frame f = Prepare(index, bgr);
  const cv::Mat thumb = TransitionThumbnail(f.gray);  // the finder's too
  Step(index, thumb);
  const int64_t sharpest = sharpest_ >= 0 ? sharpest_ : index;
  sharpest_ = -1, sharpest_change_ = -1;
  if (frames_++ == 0) first_luma_ = f.luma;
  if (previous_.index >= 0) {
    auto pair = Compare(previous_, f, time_s);
    if (!pair.ok()) return pair.status();
    pair->sharpest = std::clamp(sharpest, previous_.index + 1, index);
    pairs_.push_back(std::move(pair).value());
    skip_change_.push_back(1.0);  // until the next frame arrives
    wide_change_.push_back(1.0);  // until the frame after the next
    across_flat_.emplace_back();
    if (before_previous_.index >= 0)  // the pair before this one ended at previous_
      skip_change_[skip_change_.size() - 2] =
          cv::compareHist(before_previous_.histogram, f.histogram, cv::HISTCMP_BHATTACHARYYA);
    if (wide_change_.size() >= 3 && !third_last_histogram_.empty())
      wide_change_[wide_change_.size() - 3] =
          cv::compareHist(third_last_histogram_, f.histogram, cv::HISTCMP_BHATTACHARYYA);
    if (previous_.flat && !f.flat && last_solid_.index >= 0) {
      auto across = Compare(last_solid_, f, time_s);
      if (!across.ok()) return across.status();
      across_flat_.back() = std::move(across).value();
    }
  }
  const bool paired = !pairs_.empty() && pairs_.back().frame == f.index;
  // The camera's speed for the transition finder's gate; where no camera model fits two
  // pictures (a fast pan's blur), the flow's own median speed: not 0, which let pans through.
  double speed = 0;
  if (paired) {
    const CameraMotion& c = pairs_.back().camera;
    if (c.valid) speed = std::hypot(c.dx, c.dy) / std::max(1, source_.width);
    else if (!pairs_.back().flat && !pairs_.back().from_flat) speed = c.flow_speed / std::max(1, source_.width);
  }
  const bool hard_step = paired && IsCutStep(pairs_.back()) && !IsSlide(pairs_.back());
  finder_.Add(f.index, thumb, f.histogram, f.flat, paired ? pairs_.back().residual : 0, speed, hard_step);
  if (!f.flat) last_solid_ = f;
  third_last_histogram_ = before_previous_.histogram;
  before_previous_ = std::move(previous_);
  previous_ = std::move(f);
  return Status::OK();
}

size_t MotionAnalyser::CutAfterFlatRun(size_t last) const {
  size_t first = last;  // the run: pairs first..last-1 end on flat frames
  while (first > 0 && pairs_[first - 1].flat) --first;
  auto luma_before = [&](size_t i) { return i == 0 ? first_luma_ : pairs_[i - 1].luma; };
  // Cut straight to black: the new shot starts with the black.
  constexpr double kAbruptDrop = 40;  // gray levels in one frame; a fade takes many steps
  if (luma_before(first) - pairs_[first].luma > kAbruptDrop) return first;
  // A fade out and in: the new shot starts where the light comes back.
  double darkest = pairs_[first].luma;
  for (size_t i = first; i < last; ++i) darkest = std::min(darkest, pairs_[i].luma);
  size_t k = first;
  for (size_t i = first; i < last; ++i)
    if (pairs_[i].luma <= darkest + 0.5) k = i + 1;  // past the last darkest frame
  return std::min(k, last);
}

std::optional<GradualTransition> MotionAnalyser::FadeAround(size_t last, size_t cut) const {
  constexpr double kStep = 1.0;  // gray levels a frame of a fade changes by, at least
  auto luma = [&](size_t i) { return pairs_[i].luma; };
  size_t first = last;  // the run: pairs first..last-1 end on flat frames
  while (first > 0 && pairs_[first - 1].flat) --first;
  size_t out = first;   // back over the fade out: each frame darker than the one before
  while (out > 0 && luma(out - 1) < (out >= 2 ? luma(out - 2) : first_luma_) - kStep) --out;
  size_t in = last;     // on over the fade in: each frame brighter than the one before
  while (in + 1 < pairs_.size() && luma(in + 1) > luma(in) + kStep && !pairs_[in + 1].cut) ++in;
  // No light fading on either side: a cut into a dark or flat picture (a night sky), not a fade.
  if (out == first && in == last) return std::nullopt;
  return GradualTransition{pairs_[out].frame, pairs_[in].frame, pairs_[cut].frame, "fade"};
}

void MotionAnalyser::DecideCuts() {
  for (size_t i = 0; i < pairs_.size(); ++i) {
    PairMotion& p = pairs_[i];
    if (across_flat_[i]) {
      // A flat run (black, a fade): a new shot only if what comes out of it is not what
      // went in; it starts at or before this pair.
      if (IsCutStep(*across_flat_[i])) {
        const size_t cut = CutAfterFlatRun(i);
        pairs_[cut].cut = true;
        if (auto fade = FadeAround(i, cut)) fades_.push_back(*fade);
      }
    } else if (!p.flat && !p.from_flat) {
      // A flash is one frame, or two, unlike the frames on either side, which agree with
      // each other: the pair into it or the pair out of it. (Two-frame flashes were 6 of the
      // 7 false boundaries left on the training videos, bench/README.md, issue 74.)
      const double agree = options_.cut_histogram / 2;
      const bool flash_here = skip_change_[i] < agree || wide_change_[i] < agree;
      const bool flash_before = (i > 0 && skip_change_[i - 1] < agree) || (i > 1 && wide_change_[i - 2] < agree);
      // A change of histogram as large as a cut's that the frames either side undo is a flash,
      // even where this pair alone changes (a two-frame flash's pairs in and out each do, and
      // its residual is a lone one); a cut within one fixed camera changes the histogram less.
      const bool flash = p.histogram_change >= options_.cut_histogram && (flash_here || flash_before);
      p.cut = !flash && ((IsCutStep(p) && !IsSlide(p)) || IsIsolatedCut(i));
    }
  }
}

bool MotionAnalyser::IsIsolatedCut(size_t i) const {
  if (i == 0 || i + 1 >= pairs_.size()) return false;
  const PairMotion &p = pairs_[i], &before = pairs_[i - 1], &after = pairs_[i + 1];
  if (after.flat) return false;  // (the branch that asks has neither side of p flat)
  return p.residual >= options_.isolated_residual &&
         p.residual >= options_.isolated_cut * std::max(before.residual, after.residual) &&
         p.histogram_change >=
             options_.isolated_histogram * std::max(before.histogram_change, after.histogram_change);
}

bool MotionAnalyser::IsCutStep(const PairMotion& p) const {
  return p.histogram_change > options_.cut_histogram && p.residual > options_.cut_residual;
}

bool MotionAnalyser::IsSlide(const PairMotion& p) const {
  return p.slide_residual >= 0 && p.slide_shift >= options_.slide_min_shift &&
         p.slide_residual <= options_.slide_residual;
}

// Pair p touches a frame of [first, last]: it spans source frames frame - gap to frame.
static bool Touches(const PairMotion& p, const GradualTransition& t) {
  return p.frame >= t.first && p.frame - p.gap <= t.last;
}

bool MotionAnalyser::IsHardCutInSpan(size_t i) const {
  // A dissolve's steps change every pair about alike; a hard cut a few frames before or after
  // one changes its pair alone: isolated_cut times its neighbours' residual, as a cut within
  // one fixed camera (the same measure, chosen on the labelled set).
  const PairMotion& p = pairs_[i];
  const double before = i > 0 ? pairs_[i - 1].residual : 0;
  const double after = i + 1 < pairs_.size() ? pairs_[i + 1].residual : 0;
  return IsCutStep(p) && p.residual >= options_.isolated_cut * std::max(before, after);
}

GradualTransition MotionAnalyser::OverSkipped(GradualTransition t) const {
  for (const PairMotion& p : pairs_) {
    if (p.frame == t.first) t.first = p.cut ? std::max(p.frame - p.gap + 1, p.sharpest) : p.frame - p.gap + 1;
    if (p.frame > t.last) {  // the first analysed frame after the span
      t.last = std::max(t.last, (p.cut ? std::min(p.frame, p.sharpest) : p.frame) - 1);
      break;
    }
  }
  return t;
}

// The lower quartile of the changes into source frames [from, to]; -1 with fewer than three.
double MotionAnalyser::QuietChange(int64_t from, int64_t to) const {
  std::vector<double> v;
  if (!changes_.empty()) to = std::min(to, changes_.back().first);  // frames seen
  for (int64_t i = from; i <= to; ++i) v.push_back(ChangeAt(i));
  return v.size() < 3 ? -1 : AtFraction(std::move(v), 0.25);
}

GradualTransition MotionAnalyser::Widened(GradualTransition t, const std::vector<GradualTransition>& all,
                                          const std::vector<int64_t>& cuts) const {
  constexpr double kStep = 1.0;  // gray levels a frame of a fade changes by, at least (FadeAround)
  const double ratio = options_.transitions.widen_ratio;
  if (!(ratio > 0)) return t;
  int64_t lo = 0, hi = std::numeric_limits<int64_t>::max();  // the shots' first frames around it
  for (int64_t c : cuts) {
    if (c <= t.first) lo = std::max(lo, c);
    if (c > t.last) hi = std::min(hi, c);
  }
  for (const GradualTransition& o : all) {  // nor into another transition
    if (o.last < t.first) lo = std::max(lo, o.last + 1);
    if (o.first > t.last) hi = std::min(hi, o.first);
  }
  const int64_t reach = std::max<int64_t>(t.last - t.first + 1, 2);  // at most its length again
  // Before: frame first - 1 is mixed when it changed from the frame before it as a mix does.
  const double before = QuietChange(std::max(lo + 1, t.first - 1 - 2 * reach), t.first - 2);
  const double floor_before = std::max(kStep, ratio * before);
  for (const int64_t stop = t.first - reach; before >= 0 && t.first - 1 > lo && t.first > stop &&
                                             ChangeAt(t.first - 1) >= floor_before;)
    --t.first;
  // After: frame last + 1 is mixed when the frame after it still changed as a mix does.
  const double after = QuietChange(t.last + 3, std::min(hi - 1, t.last + 2 + 2 * reach));
  const double floor_after = std::max(kStep, ratio * after);
  for (const int64_t stop = t.last + reach; after >= 0 && t.last + 2 < hi && t.last < stop &&
                                            ChangeAt(t.last + 2) >= floor_after;)
    ++t.last;
  return t;
}

void MotionAnalyser::Place(MotionSummary* out, const std::vector<GradualTransition>& dissolves) {
  std::vector<GradualTransition> spans = fades_;
  for (const GradualTransition& t : dissolves) {
    // A fade through black already spans what its fade in looks like: a mix of dark and light.
    const bool in_fade = std::any_of(fades_.begin(), fades_.end(), [&](const GradualTransition& f) {
      return t.first <= f.last && t.last >= f.first;
    });
    if (in_fade) continue;
    GradualTransition span = t;
    for (size_t i = 0; i < pairs_.size(); ++i) {
      PairMotion& p = pairs_[i];
      if (!Touches(p, t)) continue;
      if (p.frame == t.cut) {
        p.cut = true;
      } else if (p.cut && IsHardCutInSpan(i)) {  // kept: the span stops short of it
        if (p.frame > t.cut) span.last = std::min(span.last, p.frame - p.gap);
        else span.first = std::max(span.first, p.frame);
      } else {
        p.cut = false;
      }
    }
    spans.push_back(span);
  }
  for (const GradualTransition& t : spans) out->transitions.push_back(OverSkipped(t));
  for (const PairMotion& p : pairs_) {
    if (!p.cut) continue;
    out->cuts.push_back(p.sharpest);
    const bool spanned = std::any_of(out->transitions.begin(), out->transitions.end(), [&](const GradualTransition& t) {
      return t.first <= p.sharpest && p.sharpest <= t.last + 1;
    });
    if (!spanned)
      if (auto ramp = RampAround(p.sharpest)) out->transitions.push_back(*ramp);
  }
  std::vector<GradualTransition> widened;
  for (const GradualTransition& t : out->transitions) widened.push_back(Widened(t, out->transitions, out->cuts));
  out->transitions = std::move(widened);
  std::sort(out->transitions.begin(), out->transitions.end(),
            [](const GradualTransition& a, const GradualTransition& b) { return a.first < b.first; });
}

double MotionAnalyser::ChangeAt(int64_t index) const {
  auto it = std::lower_bound(changes_.begin(), changes_.end(), std::make_pair(index, -1.0));
  return it != changes_.end() && it->first == index ? it->second : 0;
}

std::optional<GradualTransition> MotionAnalyser::RampAround(int64_t cut) const {
  // Frame k is mixed when it and the frame after it changed as the cut did: A A m m m B B.
  const double floor = options_.ramp_ratio * ChangeAt(cut);
  if (!(floor > 0)) return std::nullopt;
  // The frames of ramp_max_s at the source's rate: analysed_fps_ times the pairs' gap there.
  int64_t gap = 1;
  for (const PairMotion& p : pairs_)
    if (p.frame >= cut) { gap = p.gap; break; }
  const auto reach = static_cast<int64_t>(std::ceil(options_.ramp_max_s * analysed_fps_ * double(gap)));
  int64_t first = cut, last = cut;  // last: the last frame that changed as the cut did
  while (cut - first < reach && ChangeAt(first - 1) >= floor) --first;
  while (last - cut < reach && ChangeAt(last + 1) >= floor) ++last;
  if (first == cut && last == cut) return std::nullopt;
  return GradualTransition{first, last - 1, cut, "dissolve"};
}

bool MotionAnalyser::InTransition(const PairMotion& p, const MotionSummary& s) const {
  for (const GradualTransition& t : s.transitions)
    if (Touches(p, t)) return true;  // the pair touches a mixed frame
  return false;
}

MotionSummary MotionAnalyser::Finish(int64_t frames_total) {
  DecideCuts();
  MotionSummary out;
  Place(&out, finder_.Finish());

  // Shots: the pairs between cuts; a pair that crosses a cut belongs to none.
  int64_t start = 0;
  std::vector<const PairMotion*> shot, all;
  auto close = [&](int64_t end) {
    ShotMotion s = Summarise(shot, source_.width);
    s.start = start, s.end = end;
    out.shots.push_back(s);
    shot.clear();
  };
  for (const PairMotion& p : pairs_) {
    if (p.cut) {
      close(p.sharpest);
      start = p.sharpest;
      continue;
    }
    if (InTransition(p, out)) continue;
    shot.push_back(&p);
    all.push_back(&p);
  }
  close(std::max(frames_total, start + 1));
  out.overall = Summarise(all, source_.width);
  out.overall.start = 0, out.overall.end = std::max<int64_t>(frames_total, 1);
  // Shake is measured within shots: the jumps between shots' motions are not shake.
  double shake = 0;
  for (const ShotMotion& s : out.shots) shake += s.jitter * double(s.end - s.start);
  out.overall.jitter = shake / double(std::max<int64_t>(1, out.shots.back().end));
  if (out.overall.camera.valid)
    out.overall.label = CameraLabel(out.overall.camera, out.overall.jitter, source_.width);
  return out;
}

std::string MotionAnalyser::SeriesCsv() const {
  std::string csv =
      "frame,time_s,gap,camera_valid,dx,dy,zoom,rotation_deg,inliers,subject_mean,subject_p95,"
      "moving_fraction,direction_deg,histogram_change,residual,luma,flat,cut,slide_shift,"
      "slide_residual\n";
  char line[512];
  for (const PairMotion& p : pairs_) {
    std::snprintf(line, sizeof line,
                  "%lld,%.4f,%lld,%d,%.4f,%.4f,%.6f,%.5f,%.3f,%.4f,%.4f,%.4f,%.1f,%.4f,%.4f,%.1f,%d,%d,"
                  "%.4f,%.4f\n",
                  static_cast<long long>(p.frame), p.time_s, static_cast<long long>(p.gap),
                  p.camera.valid, p.camera.dx, p.camera.dy, p.camera.zoom, p.camera.rotation_deg,
                  p.camera.inliers, p.subject.mean, p.subject.p95, p.subject.moving_fraction,
                  p.subject.direction_deg, p.histogram_change, p.residual, p.luma, p.flat, p.cut,
                  p.slide_shift, p.slide_residual);
    csv += line;
  }
  return csv;
}

nlohmann::json MotionJson(const MotionSummary& s, double fps, int64_t frames_analysed,
                          cv::Size analysis_size) {
  nlohmann::json transitions = nlohmann::json::array();
  for (const GradualTransition& t : s.transitions) transitions.push_back({t.first, t.last});
  nlohmann::json shots = nlohmann::json::array();
  for (const ShotMotion& shot : s.shots)
    shots.push_back({{"start", shot.start}, {"end", shot.end},
                     {"camera", CameraJson(shot)}, {"subject", SubjectJson(shot.subject)}});
  return {{"fps", fps},
          {"frames_analysed", frames_analysed},
          {"analysis_size", {analysis_size.width, analysis_size.height}},
          {"camera", CameraJson(s.overall)},
          {"subject", SubjectJson(s.overall.subject)},
          {"cuts", s.cuts},
          {"transitions", transitions},
          {"shots", shots}};
}

}  // namespace framemill
