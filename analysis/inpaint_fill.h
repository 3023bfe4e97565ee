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
  kNavierStokes,  // OpenCV's Navier-Stokes fill (Bertalmio 2001)
  kExemplar,      // ours: multi-scale patch voting over a PatchMatch field (Wexler 2007)
  kFsrFast,       // xphoto's frequency selective reconstruction, fast preset
  kShiftMap,      // xphoto's shift-map (He and Sun 2012)
};
std::string_view InpaintMethodName(InpaintMethod m);  // telea, ns, exemplar, fsr_fast, shiftmap
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

// Fills the pixels where `hole` (CV_8U, the image's size) is nonzero in `bgr` (CV_8UC3).
// InvalidArgument for other types or sizes; an empty hole returns the image as it is.
// kExemplar falls back to kTelea where no whole patch of the image is known.
Result<cv::Mat> Inpaint(const cv::Mat& bgr, const cv::Mat& hole, InpaintMethod method,
                        const ExemplarOptions& options = {}, const PatchSearchFn& search = nullptr);

// The fraction of the image the hole covers, and its half-width: the largest distance
// (pixels) from a hole pixel to the nearest known one. A stroke 9 px wide has 5.
struct HoleShape {
  double coverage = 0;
  double half_width = 0;
};
HoleShape MeasureHole(const cv::Mat& hole);

// The method inpaint.method `auto` picks for a hole: the best measured on real photos
// for its size (bench/inpaint_bench --benchmarks=quality; bench/README "Inpainting").
// Holes under kSmallHoleCoverage get fsr_fast, larger ones telea: the exemplar fill is
// chosen by name (inpaint.method), for textures and structure that diffusion blurs.
inline constexpr double kSmallHoleCoverage = 0.03;
InpaintMethod ChooseInpaintMethod(const HoleShape& hole);

// Quality inside the hole (where `hole` is nonzero), against the original: PSNR in dB
// over the three channels, and the mean of SSIM's map (11x11 Gaussian window, sigma 1.5,
// on the luma) over the hole's pixels.
double HolePsnr(const cv::Mat& original, const cv::Mat& filled, const cv::Mat& hole);
double HoleSsim(const cv::Mat& original, const cv::Mat& filled, const cv::Mat& hole);

}  // namespace framemill
