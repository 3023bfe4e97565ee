#include "analysis/lighting_analysis.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include <opencv2/imgproc.hpp>

namespace framemill::lighting {
namespace {

// Everything is measured on a copy whose longest side is at most this; statistics of a 512 px
// image are already stable and this bounds per-frame cost for 4K/8K inputs.
constexpr int kWorkingMaxSide = 512;
// Light direction is a low-frequency property; at this size texture and object edges are
// averaged away and what remains is the illumination gradient.
constexpr int kDirectionMaxSide = 64;

constexpr double kMidGrey = 0.18;
constexpr double kLogDelta = 1e-4;

// D65, the sRGB white point: the chromaticity of a neutral (R=G=B) image.
constexpr double kD65x = 0.3127;
constexpr double kD65y = 0.3290;

constexpr double kMinCct = 1000.0;
constexpr double kMaxCct = 25000.0;

double SrgbToLinear(double v) {
  return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4);
}

// Luminance of sRGB code value 1 in every channel: the darkest non-black 8-bit level.
const double kMinCodeLuminance = SrgbToLinear(1.0 / 255.0);

// Read-only after construction (magic-static init is thread-safe), so sharing it is fine.
const cv::Mat& SrgbToLinearLut() {
  static const cv::Mat lut = [] {
    cv::Mat m(1, 256, CV_32F);
    for (int i = 0; i < 256; ++i) m.at<float>(i) = static_cast<float>(SrgbToLinear(i / 255.0));
    return m;
  }();
  return lut;
}

cv::Mat DownscaleToFit(const cv::Mat& src, int max_side) {
  const int longest = std::max(src.cols, src.rows);
  if (longest <= max_side) return src;
  const double scale = static_cast<double>(max_side) / longest;
  const cv::Size size(std::max(1, static_cast<int>(std::lround(src.cols * scale))),
                      std::max(1, static_cast<int>(std::lround(src.rows * scale))));
  cv::Mat dst;
  // INTER_AREA averages whole source pixels, so downscaling neither aliases nor invents extremes.
  cv::resize(src, dst, size, 0, 0, cv::INTER_AREA);
  return dst;
}

// Downscaling happens on the 8-bit sRGB data: it keeps memory bounded for huge frames, and the
// gamma-space averaging error is confined to high-contrast edges.
cv::Mat ToWorkingBgr(const cv::Mat& image) {
  if (image.empty()) throw std::invalid_argument("lighting::AnalyzeFrame: empty image");
  if (image.depth() != CV_8U ||
      (image.channels() != 1 && image.channels() != 3 && image.channels() != 4)) {
    throw std::invalid_argument(
        "lighting::AnalyzeFrame: expected 8-bit grey, BGR or BGRA image");
  }
  cv::Mat small = DownscaleToFit(image, kWorkingMaxSide);
  if (small.channels() == 1) {
    cv::Mat bgr;
    cv::cvtColor(small, bgr, cv::COLOR_GRAY2BGR);
    return bgr;
  }
  if (small.channels() == 4) {
    cv::Mat bgr;
    cv::cvtColor(small, bgr, cv::COLOR_BGRA2BGR);
    return bgr;
  }
  return small;
}

struct Chromaticity {
  double x, y;
};

// sRGB (D65) linear RGB -> CIE XYZ -> xy.
Chromaticity ChromaticityFromLinearRgb(double r, double g, double b) {
  const double X = 0.4124564 * r + 0.3575761 * g + 0.1804375 * b;
  const double Y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b;
  const double Z = 0.0193339 * r + 0.1191920 * g + 0.9503041 * b;
  const double sum = X + Y + Z;
  if (!(sum > 1e-12)) return {kD65x, kD65y};
  return {X / sum, Y / sum};
}

// McCamy (1992): CCT = 449 n^3 + 3525 n^2 + 6823.3 n + 5520.33, n = (x - 0.3320) / (0.1858 - y).
// The cubic has a local minimum at n ~ -1.28 (~1620 K); beyond it the formula turns back up, so
// deep reds would read as daylight. n is clamped to the monotonic branch. Points at or below the
// epicentre's y are hopelessly off-locus (violet/magenta) and saturate by hue side.
double McCamyCct(double x, double y) {
  constexpr double kXe = 0.3320;
  constexpr double kYe = 0.1858;
  constexpr double kMonotonicMinN = -1.2795;
  const double denom = kYe - y;
  if (denom >= -1e-9) return x < kXe ? kMaxCct : kMinCct;
  const double n = std::max((x - kXe) / denom, kMonotonicMinN);
  const double cct = ((449.0 * n + 3525.0) * n + 6823.3) * n + 5520.33;
  return std::clamp(cct, kMinCct, kMaxCct);
}

void SetColour(double r, double g, double b, LightingStats& s) {
  s.mean_linear_r = r;
  s.mean_linear_g = g;
  s.mean_linear_b = b;
  const Chromaticity c = ChromaticityFromLinearRgb(r, g, b);
  s.chroma_x = c.x;
  s.chroma_y = c.y;
  s.cct_kelvin = McCamyCct(c.x, c.y);
}

void SetDirection(double vx, double vy, double strength, LightingStats& s) {
  const double norm = std::hypot(vx, vy);
  if (!(norm > 1e-12) || !(strength > 1e-9)) {
    s.light_dir_x = s.light_dir_y = s.light_direction_deg = s.light_direction_strength = 0;
    return;
  }
  s.light_dir_x = vx / norm;
  s.light_dir_y = vy / norm;
  s.light_direction_deg = std::atan2(s.light_dir_y, s.light_dir_x) * 180.0 / std::numbers::pi;
  s.light_direction_strength = std::clamp(strength, 0.0, 1.0);
}

double DynamicRangeStops(double p01, double p99) {
  return std::log2(std::max(p99, kMinCodeLuminance) / std::max(p01, kMinCodeLuminance));
}

// Light direction from the luminance gradient of a heavily downscaled, blurred frame. On a lit
// surface brightness increases towards the light, and a bright sky/lamp region is itself the
// light, so the summed gradient vector points towards the light.
//
// The gradient is weighted by a separable Welch window (1-u^2)(1-v^2). Without a window the mean
// gradient telescopes to (last row - first row), i.e. depends only on the border pixels; with it,
// integrating by parts shows the sum equals the luminance dipole moment (centroid of brightness
// relative to the image centre), which uses every pixel. Strength is |sum w*g| / sum w*|g|: 1 when
// all gradients agree, 0 when they cancel out. Both are invariant to exposure scaling because
// linear luminance is used.
void EstimateLightDirection(const cv::Mat& luminance, LightingStats& s) {
  const cv::Mat small = DownscaleToFit(luminance, kDirectionMaxSide);
  if (small.rows < 3 || small.cols < 3) {
    SetDirection(0, 0, 0, s);
    return;
  }
  cv::Mat blurred;
  cv::GaussianBlur(small, blurred, cv::Size(0, 0), 1.5, 1.5, cv::BORDER_REPLICATE);
  cv::Mat gx, gy;
  cv::Sobel(blurred, gx, CV_32F, 1, 0, 3, 1.0, 0.0, cv::BORDER_REPLICATE);
  cv::Sobel(blurred, gy, CV_32F, 0, 1, 3, 1.0, 0.0, cv::BORDER_REPLICATE);

  auto welch = [](int n) {
    cv::Mat w(n, 1, CV_32F);
    for (int i = 0; i < n; ++i) {
      const double u = 2.0 * i / (n - 1) - 1.0;
      w.at<float>(i) = static_cast<float>(1.0 - u * u);
    }
    return w;
  };
  const cv::Mat window = welch(blurred.rows) * welch(blurred.cols).t();

  cv::Mat mag;
  cv::magnitude(gx, gy, mag);
  const double sx = gx.dot(window);
  const double sy = gy.dot(window);
  const double total = mag.dot(window);
  // A float-noise floor: a truly uniform frame yields exact zeros, near-uniform ones tiny sums.
  if (!(total > 1e-9)) {
    SetDirection(0, 0, 0, s);
    return;
  }
  // Image rows grow downward; the reported y axis points up.
  SetDirection(sx, -sy, std::hypot(sx, sy) / total, s);
}

}  // namespace

cv::Mat WorkingImage(const cv::Mat& image) { return ToWorkingBgr(image); }

LightingStats FromLumaStats(const gpu::LumaStats& ls, const cv::Mat& working_bgr, int width,
                            int height) {
  if (ls.pixels <= 0 || static_cast<int>(ls.histogram.size()) != gpu::LumaStats::kBins)
    throw std::invalid_argument("lighting::FromLumaStats: empty statistics");
  LightingStats s;
  s.width = width;
  s.height = height;
  const double n = static_cast<double>(ls.pixels);
  s.clipped_shadows = ls.clipped_shadows / n;
  s.clipped_highlights = ls.clipped_highlights / n;
  SetColour(ls.sum_r / n, ls.sum_g / n, ls.sum_b / n, s);
  s.mean_luminance = ls.sum_l / n;
  s.rms_contrast = std::sqrt(std::max(0.0, ls.sum_l2 / n - s.mean_luminance * s.mean_luminance));
  s.log_avg_luminance = std::exp(ls.sum_log_l / n);
  s.exposure_ev = std::log2(s.log_avg_luminance / kMidGrey);

  // Nearest-rank percentiles read off the histogram (bins over sqrt(L), so the error
  // is under half a bin: ~1e-4 in L at mid-grey, far less in the shadows).
  static constexpr std::array<double, 5> kQ = {0.01, 0.05, 0.50, 0.95, 0.99};
  std::array<double, 5> p{};
  int64_t seen = 0;
  size_t q = 0;
  for (int bin = 0; bin < gpu::LumaStats::kBins && q < kQ.size(); ++bin) {
    seen += ls.histogram[bin];
    while (q < kQ.size() && seen > std::llround(kQ[q] * (n - 1))) p[q++] = gpu::LumaBinCenter(bin);
  }
  s.p01 = p[0];
  s.p05 = p[1];
  s.p50 = p[2];
  s.p95 = p[3];
  s.p99 = p[4];
  s.dynamic_range_stops = DynamicRangeStops(s.p01, s.p99);

  cv::Mat linear, luminance;
  cv::LUT(working_bgr, SrgbToLinearLut(), linear);
  cv::transform(linear, luminance, cv::Matx13f(0.0722f, 0.7152f, 0.2126f));
  EstimateLightDirection(luminance, s);
  return s;
}

LightingStats AnalyzeFrame(const cv::Mat& image) {
  const cv::Mat bgr = ToWorkingBgr(image);
  return FromLumaStats(gpu::LumaStatsCpu(bgr), bgr, image.cols, image.rows);
}

LightingStats Aggregate(const std::vector<LightingStats>& frames) {
  if (frames.empty()) throw std::invalid_argument("lighting::Aggregate: no frames");
  const double n = static_cast<double>(frames.size());
  LightingStats a;
  a.width = frames.front().width;
  a.height = frames.front().height;

  double log_sum = 0, sq_sum = 0, r = 0, g = 0, b = 0, vx = 0, vy = 0;
  for (const LightingStats& f : frames) {
    a.p01 += f.p01 / n;
    a.p05 += f.p05 / n;
    a.p50 += f.p50 / n;
    a.p95 += f.p95 / n;
    a.p99 += f.p99 / n;
    a.mean_luminance += f.mean_luminance / n;
    a.clipped_shadows += f.clipped_shadows / n;
    a.clipped_highlights += f.clipped_highlights / n;
    a.dynamic_range_stops += f.dynamic_range_stops / n;
    log_sum += std::log(std::max(f.log_avg_luminance, 1e-300));
    // E[L^2] per frame; pooled variance = E[L^2] - E[L]^2 over all frames' pixels.
    sq_sum += f.rms_contrast * f.rms_contrast + f.mean_luminance * f.mean_luminance;
    r += f.mean_linear_r / n;
    g += f.mean_linear_g / n;
    b += f.mean_linear_b / n;
    vx += f.light_dir_x * f.light_direction_strength / n;
    vy += f.light_dir_y * f.light_direction_strength / n;
  }
  a.log_avg_luminance = std::exp(log_sum / n);
  a.exposure_ev = std::log2(a.log_avg_luminance / kMidGrey);
  a.rms_contrast = std::sqrt(std::max(0.0, sq_sum / n - a.mean_luminance * a.mean_luminance));
  SetColour(r, g, b, a);
  SetDirection(vx, vy, std::hypot(vx, vy), a);
  return a;
}

nlohmann::json ToJson(const LightingStats& s) {
  return {
      {"luminance_percentiles",
       {{"p1", s.p01}, {"p5", s.p05}, {"p50", s.p50}, {"p95", s.p95}, {"p99", s.p99}}},
      {"mean_luminance", s.mean_luminance},
      {"clipped_shadows", s.clipped_shadows},
      {"clipped_highlights", s.clipped_highlights},
      {"log_average_luminance", s.log_avg_luminance},
      {"exposure_ev", s.exposure_ev},
      {"rms_contrast", s.rms_contrast},
      {"dynamic_range_stops", s.dynamic_range_stops},
      {"color_temperature_k", s.cct_kelvin},
      {"chromaticity", {{"x", s.chroma_x}, {"y", s.chroma_y}}},
      {"light_direction",
       {{"x", s.light_dir_x},
        {"y", s.light_dir_y},
        {"degrees", s.light_direction_deg},
        {"strength", s.light_direction_strength}}},
      {"width", s.width},
      {"height", s.height},
  };
}

}  // namespace framemill::lighting
