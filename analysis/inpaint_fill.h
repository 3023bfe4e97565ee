// Filling a hole in an image: the algorithms behind the inpaint stage, and the quality
// measures its table is made with (bench/inpaint_bench). Pure functions of their inputs;
// thread-safe. Every method leaves the pixels outside the hole byte-identical.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <opencv2/core.hpp>

#include "base/status.h"
#include "gpu/ops.h"

namespace framemill {

enum class InpaintMethod {
  kTelea,         // OpenCV's fast marching (Telea 2004): smooth, for thin and small holes
  kTeleaCoarse,   // ours: Telea on a copy reduced 2-8x, scaled back into a wide hole
  kNavierStokes,  // OpenCV's Navier-Stokes fill (Bertalmio 2001)
  kExemplar,      // ours: multi-scale patch voting over a PatchMatch field (Wexler 2007)
  kFsrFast,       // xphoto's frequency selective reconstruction, fast preset
  kShiftMap,      // xphoto's shift-map (He and Sun 2012)
  kPyramid,       // ours: harmonic fill solved coarse to fine (gpu/ops.h HoleFill), on a device
};
// telea, ns, exemplar, fsr_fast, shiftmap, telea_coarse, pyramid
std::string_view InpaintMethodName(InpaintMethod m);
// InvalidArgument naming the valid ones.
Result<InpaintMethod> ParseInpaintMethod(std::string_view name);
std::vector<InpaintMethod> AllInpaintMethods();

struct ExemplarOptions {
  int patch_radius = 3;        // 7x7 patches
  int coarse_iterations = 8;   // EM steps (search, then vote) at the coarsest level...
  int fine_iterations = 3;     // ...falling to this many at the finest
  int search_iterations = 4;   // PatchMatch iterations in a level's first search
  int refine_iterations = 2;   //   and in each later one (the field carries over)
  uint32_t seed = 1;
};

// The patch search, on whatever device the caller chose; null: PatchMatchCpu.
using PatchSearchFn = std::function<Result<gpu::PatchMatchResult>(const gpu::PatchMatchTask&,
                                                                  const gpu::PatchMatchSpec&)>;
// The harmonic fill of a task (the hole's box), on whatever device the caller chose; null:
// HoleFillCpu.
using HoleFillFn = std::function<Result<cv::Mat>(const gpu::HoleFillTask&, const gpu::HoleFillSpec&)>;
// Where a method's heavy steps run; a null member runs on the CPU.
struct InpaintDevice {
  PatchSearchFn search;  // kExemplar's patch search
  HoleFillFn fill;       // kPyramid's fill
};

// The fraction of the image the hole covers, its pixels, and how far its pixels are from the
// nearest known one (outside the image counts as known): at most (its half-width: a stroke
// 9 px wide has 5) and on average.
struct HoleShape {
  double coverage = 0;
  int64_t pixels = 0;
  double half_width = 0;
  double mean_distance = 0;
};
HoleShape MeasureHole(const cv::Mat& hole);

// The bounding box of a mask's nonzero pixels grown by `margin` on every side, within the
// mask; empty when the mask is.
cv::Rect HoleBox(const cv::Mat& mask, int margin);

// Fills the pixels where `hole` (CV_8U, the image's size) is nonzero in `bgr` (CV_8UC3).
// InvalidArgument for other types or sizes; an empty hole returns the image as it is.
// kExemplar falls back to kTelea where no whole patch of the image is known. kPyramid fills
// the hole's box (grown by kPyramidMargin). `shape` is the hole's MeasureHole when the
// caller has it (kTeleaCoarse needs it; null: measured here).
Result<cv::Mat> Inpaint(const cv::Mat& bgr, const cv::Mat& hole, InpaintMethod method,
                        const ExemplarOptions& options = {}, const InpaintDevice& device = {},
                        const HoleShape* shape = nullptr);
// The known border kPyramid keeps around the hole's box: the harmonic fill depends on the
// ring of known pixels around the hole alone; the border gives its coarse levels context.
inline constexpr int kPyramidMargin = 8;

// How many times kTeleaCoarse reduces the image for a hole: 1 (plain Telea) for a hole under
// kCoarseMinPixels, else the largest of 2, 4, 8 that keeps the hole's mean distance to the
// known pixels at kCoarseMinReducedDistance reduced pixels or more. Measured (bench/README
// "Inpainting"): a wide hole filled reduced is as good as Telea at full size or better (it
// averages more of the surroundings) at a tenth of the time; a thin one loses its edges.
inline constexpr int64_t kCoarseMinPixels = 32768;
inline constexpr double kCoarseMinReducedDistance = 6;
int CoarseFactor(const HoleShape& hole);

// The method inpaint.method `auto` picks for a hole: kTeleaCoarse where CoarseFactor reduces,
// else kTelea (both run on the hole's bounding box, not the whole image). Measured on real
// photos (bench/inpaint_bench --benchmarks=quality; bench/README "Inpainting"): at 1, 5 and
// 15% of a 1 MP photo it is at least Telea's PSNR in the hole, at 8-30 ms a photo, where
// fsr_fast (the earlier choice under 3%: +0.9 dB on small holes) took 0.2-1.4 s. FSR, shift-map
// and the exemplar fill are chosen by name (inpaint.method).
// On a device the inpaint stage picks kPyramid instead (stages/inpaint_stage.cc): +1.3 to
// +2 dB over Telea at every size, in a few milliseconds.
InpaintMethod ChooseInpaintMethod(const HoleShape& hole);

// Quality inside the hole (where `hole` is nonzero), against the original: PSNR in dB
// over the three channels, and the mean of SSIM's map (11x11 Gaussian window, sigma 1.5,
// on the luma) over the hole's pixels.
double HolePsnr(const cv::Mat& original, const cv::Mat& filled, const cv::Mat& hole);
double HoleSsim(const cv::Mat& original, const cv::Mat& filled, const cv::Mat& hole);

}  // namespace framemill
