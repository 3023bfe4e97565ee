// Pure image analysis behind the `lighting` stage: exposure, contrast, colour temperature and
// dominant light direction of a frame. No I/O and no shared mutable state, so every function
// is safe to call concurrently from worker threads; callers own all inputs and outputs.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/ops.h"
#include <opencv2/core.hpp>

namespace framemill::lighting {

// Luminance is Rec.709 relative luminance of linearised sRGB on a 0..1 scale, because
// exposure and contrast only compose physically in linear light.
struct LightingStats {
  // Luminance percentiles (nearest rank over the analysed pixels).
  double p01 = 0, p05 = 0, p50 = 0, p95 = 0, p99 = 0;
  double mean_luminance = 0;
  // Fraction of pixels whose brightest channel is <= 2/255: crushed to black in every channel.
  // A saturated colour with one zero channel still carries information, so it does not count.
  double clipped_shadows = 0;
  // Fraction of pixels whose darkest channel is >= 253/255: blown to white in every channel.
  double clipped_highlights = 0;
  // exp(mean(log(1e-4 + L))); 1e-4 sits below the smallest non-zero 8-bit sRGB luminance
  // (~3e-4) so it only guards log(0).
  double log_avg_luminance = 0;
  // Exposure bias in stops relative to mid-grey: log2(log_avg_luminance / 0.18).
  double exposure_ev = 0;
  // Standard deviation of luminance.
  double rms_contrast = 0;
  // log2(p99 / p01), both floored at the luminance of sRGB code 1 so black frames give 0, not inf.
  double dynamic_range_stops = 0;
  // McCamy's approximation on the grey-world chromaticity, restricted to the range where the
  // cubic is monotonic and clamped to 1000..25000 K; colours far off the Planckian locus
  // saturate at an end rather than producing nonsense.
  double cct_kelvin = 0;
  // CIE 1931 xy of the grey-world (mean linear RGB) colour; D65 for an all-black frame.
  double chroma_x = 0, chroma_y = 0;
  // Grey-world mean of linear sRGB channels. Kept so Aggregate can pool colour across frames
  // before the non-linear chromaticity/CCT conversion.
  double mean_linear_r = 0, mean_linear_g = 0, mean_linear_b = 0;
  // Dominant light direction: unit vector pointing TOWARDS the light, x right, y UP
  // (lit from above => light_dir_y > 0). (0, 0) when the lighting has no direction.
  // Estimated from the windowed mean luminance gradient of a blurred 64 px thumbnail.
  double light_dir_x = 0, light_dir_y = 0;
  double light_direction_deg = 0;       // atan2(light_dir_y, light_dir_x); 90 = from above
  double light_direction_strength = 0;  // 0 = flat/ambiguous .. 1 = one consistent direction
  int width = 0, height = 0;            // of the input image, not of the internal working copy
};

// The 8-bit BGR copy every statistic is measured on: longest side at most 512 px,
// grey/BGRA converted. Throws std::invalid_argument for empty or unsupported images.
cv::Mat WorkingImage(const cv::Mat& image);

// The frame's statistics from its pixel statistics (computed by a ComputeBackend on
// WorkingImage(image), on the CPU or a GPU) plus the light direction, which is
// measured here on the working image. width/height: of the original image.
LightingStats FromLumaStats(const gpu::LumaStats& stats, const cv::Mat& working_bgr, int width,
                            int height);

// Analyses one 8-bit BGR, BGRA (alpha ignored) or single-channel grey image. Images whose
// longest side exceeds 512 px are area-downscaled first, so results do not depend on resolution.
// Throws std::invalid_argument for an empty image or an unsupported type.
LightingStats AnalyzeFrame(const cv::Mat& image);

// Combines the per-frame stats of a video's sampled frames, each frame weighted equally:
//  - percentiles, mean luminance, clipped fractions, dynamic range: means of per-frame values;
//  - log-average luminance: geometric mean (so exposure_ev is the mean of per-frame EVs);
//  - rms_contrast: pooled standard deviation (within- plus between-frame variance);
//  - colour: grey world over all frames (mean of linear RGB), then chromaticity and CCT;
//  - light direction: mean of strength-weighted direction vectors, re-normalised; its length is
//    the strength, so frames that disagree lower it;
//  - width/height: those of the first frame.
// Throws std::invalid_argument if `frames` is empty.
LightingStats Aggregate(const std::vector<LightingStats>& frames);

// {"luminance_percentiles": {"p1","p5","p50","p95","p99"}, "mean_luminance", "clipped_shadows",
//  "clipped_highlights", "log_average_luminance", "exposure_ev", "rms_contrast",
//  "dynamic_range_stops", "color_temperature_k", "chromaticity": {"x","y"},
//  "light_direction": {"x","y","degrees","strength"}, "width", "height"}
nlohmann::json ToJson(const LightingStats& s);

}  // namespace framemill::lighting
