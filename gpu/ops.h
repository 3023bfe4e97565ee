// The device operations framemill runs, with their CPU reference implementations.
// A backend (CPU, CUDA, sim) computes the same function; the CPU one here is the
// reference the GPU results are tested against. Plain data; functions are
// thread-safe. No CUDA headers: this file is seen by every backend's callers.
#pragma once

#include <cstdint>
#include <vector>

#include <opencv2/core.hpp>

#include "base/status.h"
#include "engine/tensor.h"

namespace framemill::gpu {

// Per-image pixel statistics behind the lighting stage, on linear-light Rec.709
// luminance L of sRGB-decoded pixels. The histogram is over sqrt(L) so that the
// dark end, where percentiles of underexposed photos live, is resolved finely.
struct LumaStats {
  static constexpr int kBins = 4096;
  std::vector<uint32_t> histogram;  // kBins counts, bin = min(kBins-1, floor(sqrt(L)*kBins))
  int64_t pixels = 0;
  double sum_l = 0, sum_l2 = 0;
  double sum_log_l = 0;              // sum of log(1e-4 + L)
  double sum_r = 0, sum_g = 0, sum_b = 0;  // linear channels
  int64_t clipped_shadows = 0;       // max channel <= 2 (8-bit)
  int64_t clipped_highlights = 0;    // min channel >= 253
};

// Luminance at the centre of a histogram bin.
inline double LumaBinCenter(int bin) {
  double s = (bin + 0.5) / LumaStats::kBins;
  return s * s;
}

// Reference: statistics of one 8-bit BGR image (3 channels, continuous or not).
LumaStats LumaStatsCpu(const cv::Mat& bgr);

using engine::TensorType;

// What a neural model wants its input to look like.
struct PreprocessSpec {
  int width = 224, height = 224;  // output size (bilinear resize, half-pixel centres)
  bool to_rgb = true;             // BGR -> RGB channel order
  float scale = 1.0f / 255.0f;    // applied first: x * scale
  float mean[3] = {0, 0, 0};      // then (x - mean[c]) / std[c], c in output order
  float std[3] = {1, 1, 1};
  TensorType type = TensorType::kFloat32;
};

// A dense NCHW tensor in host memory (engine/tensor.h).
using engine::Tensor;

// Reference: resize + colour order + normalise + HWC->NCHW (+ fp16) of a batch of
// 8-bit BGR images. Bilinear with half-pixel centres (cv::INTER_LINEAR).
Tensor PreprocessCpu(const std::vector<cv::Mat>& images, const PreprocessSpec& spec);

// IEEE 754 half <-> float (engine/tensor.h).
using engine::FloatToHalf;
using engine::FloatsToHalves;
using engine::HalfToFloat;
using engine::HalvesToFloats;

// The k most similar base rows to each query row by dot product (cosine for unit-norm
// rows): the blocks of the similarity matrix behind face clustering's neighbour graph.
// Best first; ties go to the lower id, so every backend gives the same answer. A query
// skips base row self[q] (itself, when the queries are part of the base); fewer than
// k candidates leave id -1 and similarity -3 in the tail.
struct SimilarityQuery {
  const float* queries = nullptr;  // nq x dim, row-major
  int64_t nq = 0;
  const float* base = nullptr;     // nb x dim, row-major
  int64_t nb = 0;
  int dim = 0;
  int k = 0;
  const int64_t* self = nullptr;   // nq entries, or null: nothing skipped
};
struct TopK {
  int k = 0;
  std::vector<int32_t> ids;  // nq x k
  std::vector<float> sims;   // nq x k
};
inline constexpr float kNoSimilarity = -3.0f;
// A device computes the matrix in tiles of this many query x base rows.
inline constexpr int64_t kSimilarityQueryRows = 4096;
inline constexpr int64_t kSimilarityBaseRows = 8192;

// Why a query cannot run (k outside [1, 256], dim < 1, more than 2^31 base rows, null
// rows), or OK. Every backend checks with this before touching the rows.
Status CheckSimilarityQuery(const SimilarityQuery& q);
// Reference: every query against every base row, parallel over the queries. Needs a
// query CheckSimilarityQuery accepts.
TopK TopKSimilarCpu(const SimilarityQuery& q);
// Dot product of two float vectors, dispatched at run time to the widest SIMD the CPU has.
float DotCpu(const float* a, const float* b, int dim);

// Dense optical flow (MOTION on a device): pyramidal Lucas-Kanade with iterative warping.
// Per level, coarse to fine: the flow from the level above (bilinear, doubled), then
// `iterations` times: warp `to` by the flow and solve each pixel's 2x2 system of window
// sums over (2 radius + 1)^2 (the mean gradient of both frames at the warped position,
// against the warped difference; + lambda I). Intensities are in [0, 1]; borders clamp.
// DenseFlowCpu defines the function; the CUDA kernels compute it in the same order.
// The defaults were chosen on shifted real photos (bench/README): three iterations
// converge; more drift, as Newton steps without step control do at coarse levels.
struct FlowSpec {
  int levels = 5;         // at most; a level is kept while its short side is >= 16 px
  int radius = 4;         // 9x9 windows
  int iterations = 3;     // warps per level
  float lambda = 1e-3f;   // regularises flat windows: they keep the coarser level's flow
};
// Float planes per pixel of a pyramid level on a device: both frames, their gradients,
// the mean gradient, the difference, the update and the flow.
inline constexpr int kFlowPlanes = 13;
struct FlowPair {
  cv::Mat from, to;
};
// Why a batch cannot run (a frame that is not 8-bit gray, sizes that differ within the
// batch, a frame under 8x8, a bad spec), or OK. Every backend checks with this first.
Status CheckFlowPairs(const std::vector<FlowPair>& pairs, const FlowSpec& spec);
// Reference: CV_32FC2 flow in pixels of the input, for a pair CheckFlowPairs accepts.
cv::Mat DenseFlowCpu(const FlowPair& pair, const FlowSpec& spec);
// The pyramid's level sizes, finest first (the input's size, then halved, floor).
std::vector<cv::Size> FlowPyramid(cv::Size size, const FlowSpec& spec);

// Patch search for exemplar inpainting (INPAINTING on a device): PatchMatch (Barnes et
// al. 2009) in its parallel form. For every `active` pixel p of `image`, the centre q of
// a (2 radius + 1)^2 patch whose centre is a `source` pixel, with the least sum of
// squared 8-bit differences over the patch (offsets dy outer, dx inner; offsets where
// p + d leaves the image are not counted). Each iteration reads the previous
// iteration's field and writes a new one (Jacobi order, so a device computes it pixel by
// pixel in parallel): a pixel takes its neighbours' matches at +-1 and +-jump (jump 8,
// 4, 2, 1 in turn) shifted by the neighbour's offset, then tries random centres around
// its best in windows halving from the image's size to 1 (PatchMatchRandom). Integer
// costs and a strict "less than" make the CPU twin and the CUDA kernels agree exactly.
struct PatchMatchSpec {
  int radius = 3;       // 7x7 patches
  int iterations = 4;
  uint32_t seed = 1;    // the random search's sequence
};
struct PatchMatchTask {
  cv::Mat image;   // CV_8UC3, the current estimate (holes filled with a guess)
  cv::Mat active;  // CV_8U, same size: nonzero where a match is wanted
  cv::Mat source;  // CV_8U: nonzero where a patch centred there may be copied (its whole
                   // patch inside the image and known)
  cv::Mat nnf;     // CV_32SC2: the starting match (x, y) of every active pixel; each a source
};
struct PatchMatchResult {
  cv::Mat nnf;   // CV_32SC2, as the task's; inactive pixels keep their starting value
  cv::Mat cost;  // CV_32S: the matched patch's cost at active pixels, 0 elsewhere
};
// Why a task cannot run (types or sizes that differ, a radius outside [1, 15], under one
// iteration, no source pixel, a starting match that is not a source), or OK.
Status CheckPatchMatchTask(const PatchMatchTask& task, const PatchMatchSpec& spec);
// Reference: one task, parallel over rows; needs a task CheckPatchMatchTask accepts.
PatchMatchResult PatchMatchCpu(const PatchMatchTask& task, const PatchMatchSpec& spec);
// The random search's draw k of iteration `it` at pixel (x, y): the same integer hash
// on every backend (gpu/cuda/patch_match.cu repeats it; the device test holds them equal).
inline uint32_t PatchMatchHash(uint32_t a) {
  a ^= a >> 16;
  a *= 0x7feb352dU;
  a ^= a >> 15;
  a *= 0x846ca68bU;
  a ^= a >> 16;
  return a;
}
inline uint32_t PatchMatchRandom(uint32_t seed, int x, int y, int it, int k) {
  return PatchMatchHash(seed ^ PatchMatchHash(uint32_t(x) + PatchMatchHash(
                                   uint32_t(y) + PatchMatchHash(uint32_t(it) * 64U + uint32_t(k)))));
}

// Harmonic hole fill (INPAINTING on a device; inpaint.method `pyramid`): each hole pixel
// becomes the solution of Laplace's equation whose boundary is the known pixels, solved
// coarse to fine. Level l+1 has ceil(w/2) x ceil(h/2) pixels; each holds the sums of its up
// to four children's known colours and counts ((c00 + c10) + (c01 + c11), missing children
// 0), so its colour is the mean of the known pixels under it and it is known when any is.
// Levels stop at the first with no unknown pixel (HoleFillLevels). Coarse to fine, a
// level's unknown pixels start from the coarser solution (bilinear: 3/4 and 1/4 of the two
// nearest coarse pixels on each axis, clamped), then `iterations` Jacobi steps set each to
// ((left + right) + (up + down)) / 4, clamped at the image's edges. Known pixels keep their
// colour; the hole's pixels are rounded to nearest (ties to even) and saturated. float
// arithmetic in this order on every backend (the CUDA kernels round each product and sum
// on their own, no fused multiply-add), so the device test holds the two equal.
// Measured on real photos (bench/README "Inpainting"): +1.3 to +2 dB in the hole over
// Telea at 1, 5 and 15%.
struct HoleFillSpec {
  int iterations = 16;  // Jacobi steps per level
};
struct HoleFillTask {
  cv::Mat image;  // CV_8UC3
  cv::Mat hole;   // CV_8U, the image's size: nonzero where a pixel is to be filled
};
// Why a task cannot run (types or sizes that differ, an empty image, no known pixel,
// iterations outside [0, 10000]), or OK.
Status CheckHoleFillTask(const HoleFillTask& task, const HoleFillSpec& spec);
// The pyramid's level sizes, finest first: halved (ceil) while the level has an unknown
// pixel, so the last has none. Every backend builds the same levels from this.
std::vector<cv::Size> HoleFillLevels(const cv::Mat& hole);
// Reference: the filled image (CV_8UC3; the known pixels are the task's), parallel over
// rows. Needs a task CheckHoleFillTask accepts.
cv::Mat HoleFillCpu(const HoleFillTask& task, const HoleFillSpec& spec);

// Device bytes one image costs each operation (inputs, outputs, scratch), used by the
// batch tuner's first guess and by the simulated device's budget.
int64_t LumaStatsBytesPerItem(const cv::Mat& image);
int64_t PreprocessBytesPerItem(const cv::Mat& image, const PreprocessSpec& spec);
// Device bytes of one TopKSimilar call: the rows, one tile of similarities, the results.
int64_t TopKSimilarBytes(const SimilarityQuery& q);
// Device bytes of one flow pair: both frames, and kFlowPlanes floats a pixel per level.
int64_t DenseFlowBytesPerItem(cv::Size size, const FlowSpec& spec);

// Device bytes of one patch search: the image, both masks, two fields and the costs.
int64_t PatchMatchBytesPerItem(cv::Size size);
// Device bytes of one hole fill: the image and hole, and per pixel of every level the
// sums (4 floats) and two solutions (4 floats each).
int64_t HoleFillBytesPerItem(cv::Size size);

}  // namespace framemill::gpu
