#include "analysis/av_sync.h"

#include <algorithm>
#include <cmath>

namespace framemill {

SyncSignal Regrid(const std::string& name, const std::vector<double>& times,
                  const std::vector<double>& values, double rate) {
  SyncSignal s{name, 0, rate, {}};
  if (times.size() < 2 || times.size() != values.size()) return s;
  s.t0 = times.front();
  const size_t n = static_cast<size_t>(std::floor((times.back() - times.front()) * rate)) + 1;
  s.v.resize(n);
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    const double t = s.t0 + i / rate;
    while (k + 2 < times.size() && times[k + 1] <= t) ++k;
    const double span = times[k + 1] - times[k];
    const double a = span > 0 ? std::clamp((t - times[k]) / span, 0.0, 1.0) : 0.0;
    s.v[i] = values[k] + a * (values[k + 1] - values[k]);
  }
  return s;
}

SyncSignal EnergyEnvelope(const std::vector<float>& samples, int sample_rate, double t0, double rate,
                          double floor_db) {
  SyncSignal s{"energy", t0, rate, {}};
  const size_t hop = std::max<size_t>(1, static_cast<size_t>(std::lround(sample_rate / rate)));
  s.rate = static_cast<double>(sample_rate) / hop;
  const size_t hops = samples.size() / hop;
  const double floor_energy = std::pow(10.0, floor_db / 10.0);
  s.v.resize(hops);
  for (size_t h = 0; h < hops; ++h) {
    double e = 0;
    for (size_t i = h * hop; i < (h + 1) * hop; ++i) e += double{samples[i]} * samples[i];
    s.v[h] = std::log10(std::max(e / hop, floor_energy));
  }
  return s;
}

SyncSignal OnsetEnvelope(const SyncSignal& energy) {
  // The rise into hop h is placed at hop h's start: where the new sound begins.
  SyncSignal s{"onset", energy.t0, energy.rate, Rises(energy.v)};
  return s;
}

std::vector<double> VisualOnsets(const std::vector<double>& change, const std::vector<double>& luma,
                                 const std::vector<bool>& cut) {
  constexpr double kDarkening = 1.0;  // luma levels (of 255) a frame may lose and still count
  std::vector<bool> skip(change.size(), false);
  for (size_t i = 1; i < change.size(); ++i)
    skip[i] = (i < cut.size() && cut[i]) || (i < luma.size() && luma[i] < luma[i - 1] - kDarkening);
  return Rises(change, skip);
}

std::vector<double> Rises(const std::vector<double>& values, const std::vector<bool>& skip) {
  std::vector<double> out(values.size(), 0.0);
  for (size_t i = 1; i < values.size(); ++i) {
    if (i < skip.size() && skip[i]) continue;
    out[i] = std::max(0.0, values[i] - values[i - 1]);
  }
  return out;
}

namespace {

// Centred moving average over k samples, ignoring NaN; NaN where fewer than half are numbers.
std::vector<double> MovingAverage(const std::vector<double>& x, size_t k) {
  std::vector<double> out(x.size(), std::nan(""));
  if (k <= 1) return x;
  std::vector<double> sum(x.size() + 1, 0.0), cnt(x.size() + 1, 0.0);
  for (size_t i = 0; i < x.size(); ++i) {
    const bool ok = !std::isnan(x[i]);
    sum[i + 1] = sum[i] + (ok ? x[i] : 0.0);
    cnt[i + 1] = cnt[i] + (ok ? 1.0 : 0.0);
  }
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t lo = i >= k / 2 ? i - k / 2 : 0, hi = std::min(x.size(), i + (k + 1) / 2);
    const double n = cnt[hi] - cnt[lo];
    if (n >= 0.5 * k && !std::isnan(x[i])) out[i] = (sum[hi] - sum[lo]) / n;
  }
  return out;
}

}  // namespace

SyncSignal Smooth(const SyncSignal& s, double seconds) {
  return {s.name, s.t0, s.rate, MovingAverage(s.v, static_cast<size_t>(std::lround(seconds * s.rate)))};
}

bool Varies(const SyncSignal& s, double eps) {
  double mean = 0, mag = 0;
  size_t n = 0;
  for (double x : s.v)
    if (!std::isnan(x)) mean += x, mag += std::fabs(x), ++n;
  if (n < 3) return false;
  mean /= n;
  mag /= n;
  double var = 0;
  for (double x : s.v)
    if (!std::isnan(x)) var += (x - mean) * (x - mean);
  return std::sqrt(var / n) > eps * std::max(mag, 1e-12);
}

namespace {

// Linear interpolation of s at time t; NaN outside it.
double At(const SyncSignal& s, double t) {
  const double x = (t - s.t0) * s.rate;
  if (x < 0 || x > static_cast<double>(s.v.size() - 1)) return std::nan("");
  const size_t i = static_cast<size_t>(x);
  if (i + 1 >= s.v.size()) return s.v[i];
  return s.v[i] + (x - i) * (s.v[i + 1] - s.v[i]);
}

// Pearson r of v[j] and a[j + k] over the j where both are numbers; NaN with fewer than
// min_n pairs or a flat side.
double Pearson(const std::vector<double>& v, const std::vector<double>& a, long k, size_t min_n,
               size_t* pairs) {
  double sv = 0, sa = 0, svv = 0, saa = 0, sva = 0;
  size_t n = 0;
  for (size_t j = 0; j < v.size(); ++j) {
    const long i = static_cast<long>(j) + k;
    if (i < 0 || i >= static_cast<long>(a.size()) || std::isnan(a[i]) || std::isnan(v[j])) continue;
    sv += v[j], sa += a[i], svv += v[j] * v[j], saa += a[i] * a[i], sva += v[j] * a[i];
    ++n;
  }
  *pairs = n;
  if (n < min_n) return std::nan("");
  const double cov = sva - sv * sa / n, var_v = svv - sv * sv / n, var_a = saa - sa * sa / n;
  if (var_v <= 1e-12 * n || var_a <= 1e-12 * n) return std::nan("");
  return cov / std::sqrt(var_v * var_a);
}

// Pearson r at every lag k in [-K, K] of the visual part [from_s, to_s) against the audio,
// with the number of sample pairs behind each (0 where fewer than min_n).
void SegmentCurve(const SyncSignal& audio, const SyncSignal& visual, long K, double from_s,
                  double to_s, size_t min_n, std::vector<double>* r, std::vector<double>* n) {
  const double rate = visual.rate;
  const long first = std::max(0L, static_cast<long>(std::ceil((from_s - visual.t0) * rate - 1e-9)));
  const long last = std::min(static_cast<long>(visual.v.size()),
                             static_cast<long>(std::ceil((to_s - visual.t0) * rate - 1e-9)));
  r->assign(2 * K + 1, 0.0);
  n->assign(2 * K + 1, 0.0);
  if (last - first < 3) return;
  // Index j of `v` pairs with index j + K + k of `a` at lag k.
  std::vector<double> v(visual.v.begin() + first, visual.v.begin() + last);
  std::vector<double> a(v.size() + 2 * K);
  const double start = visual.t0 + (first - K) / rate;
  for (size_t i = 0; i < a.size(); ++i) a[i] = At(audio, start + i / rate);
  for (long k = -K; k <= K; ++k) {
    size_t pairs = 0;
    const double c = Pearson(v, a, k + K, min_n, &pairs);
    if (!std::isnan(c)) (*r)[k + K] = c, (*n)[k + K] = static_cast<double>(pairs);
  }
}

// The correlation at every lag index k (lag k - K), each part of the visual signal (a shot:
// its own face, its own scale) correlated on its own and the curves pooled, weighted by
// their sample pairs; NaN where fewer than min_overlap_s of pairs stand behind it.
std::vector<double> PooledCurve(const SyncSignal& audio, const SyncSignal& visual, const SyncOptions& o,
                                long K, std::vector<std::pair<double, double>> parts) {
  if (parts.empty()) parts.push_back({visual.t0, visual.end()});
  std::vector<double> sum(2 * K + 1, 0.0), weight(2 * K + 1, 0.0), r, n;
  double total = 0;
  for (auto [from, to] : parts) total += std::max(0.0, to - from);
  for (auto [from, to] : parts) {
    const double share = total > 0 ? (to - from) / total : 1.0;
    const size_t min_n = static_cast<size_t>(
        std::max(3.0, std::min(o.min_overlap_s * share, o.min_segment_s) * visual.rate));
    SegmentCurve(audio, visual, K, from, to, min_n, &r, &n);
    for (long k = 0; k <= 2 * K; ++k) sum[k] += r[k] * n[k], weight[k] += n[k];
  }
  std::vector<double> corr(2 * K + 1, std::nan(""));
  for (long k = 0; k <= 2 * K; ++k)
    if (weight[k] >= std::max(3.0, o.min_overlap_s * visual.rate)) corr[k] = sum[k] / weight[k];
  return corr;
}

}  // namespace

SyncEstimate EstimateOffset(const SyncSignal& audio, const SyncSignal& visual, const SyncOptions& o,
                            const std::vector<std::pair<double, double>>& segments) {
  SyncEstimate e;
  e.signal = audio.name + "+" + visual.name;
  if (audio.v.size() < 3 || visual.v.size() < 3 || std::fabs(audio.rate - visual.rate) > 1e-6 * visual.rate) {
    e.reason = "too short";
    return e;
  }
  const long K = std::lround(o.max_lag_s * visual.rate);
  const std::vector<double> corr = PooledCurve(audio, visual, o, K, segments);
  long best = -1;
  for (long k = 0; k <= 2 * K; ++k)
    if (!std::isnan(corr[k]) && (best < 0 || corr[k] > corr[best])) best = k;
  if (best < 0) {
    e.reason = "the signals do not overlap long enough, or one is flat";
    return e;
  }
  e.found = true;
  e.peak = corr[best];
  double delta = 0;
  if (best > 0 && best < 2 * K && !std::isnan(corr[best - 1]) && !std::isnan(corr[best + 1])) {
    const double l = corr[best - 1], c = corr[best], rr = corr[best + 1];
    const double den = l - 2 * c + rr;
    if (den < 0) delta = std::clamp(0.5 * (l - rr) / den, -0.5, 0.5);
  }
  e.offset_s = (best - K + delta) / visual.rate;
  // The runner-up: the best local maximum away from the peak.
  const long excl = std::lround(o.exclusion_s * visual.rate);
  double second = -1;
  for (long k = 0; k <= 2 * K; ++k) {
    if (std::labs(k - best) <= excl || std::isnan(corr[k])) continue;
    const bool left_ok = k == 0 || std::isnan(corr[k - 1]) || corr[k] >= corr[k - 1];
    const bool right_ok = k == 2 * K || std::isnan(corr[k + 1]) || corr[k] >= corr[k + 1];
    if (left_ok && right_ok) second = std::max(second, corr[k]);
  }
  e.runner_up = second;
  constexpr double kStrongPeak = 0.3;
  e.confidence = e.peak > 0 ? std::clamp((e.peak - std::max(second, 0.0)) / e.peak, 0.0, 1.0) *
                                  std::min(1.0, e.peak / kStrongPeak)
                            : 0.0;
  if (best == 0 || best == 2 * K) {
    e.confidence = 0;
    e.reason = "the best match is at the edge of the search window";
  }
  return e;
}

}  // namespace framemill
