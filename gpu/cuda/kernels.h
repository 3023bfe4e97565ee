// Device kernels of the CUDA backend and the plain structs the host shares with them.
// Internal to gpu/cuda/ (includes the CUDA runtime); gpu/*.h never include it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace framemill::gpu::cuda {

// ---- LumaStats (luma_stats.cu) ----

constexpr int kLumaBins = 4096;  // == LumaStats::kBins (checked in cuda_backend.cc)
// Pixels one thread block reduces: enough to amortise merging its 4096-bin shared
// histogram into the image's global one (128 pixels per thread).
constexpr uint32_t kLumaChunkPixels = 32768;
constexpr int kLumaThreads = 256;

// A run of consecutive pixels of one image, packed BGR at `byte_offset` of the pixel
// buffer. One thread block per chunk.
struct LumaChunk {
  uint64_t byte_offset = 0;
  uint32_t pixels = 0;
  uint32_t image = 0;  // index of the LumaOut it adds to
};
static_assert(sizeof(LumaChunk) == 16);

// One image's accumulators on the device (zeroed before the kernels add to them).
struct LumaOut {
  uint32_t histogram[kLumaBins];
  double sum_l, sum_l2, sum_log_l, sum_r, sum_g, sum_b;
  unsigned long long clipped_shadows, clipped_highlights;
};
static_assert(sizeof(LumaOut) == kLumaBins * 4 + 64);

// Copies the sRGB->linear table (256 floats) into the current device's constant memory.
cudaError_t UploadSrgbToLinear(const float* lut256);

// Adds chunks[0, n_chunks) of `pixels` into out[chunk.image]. Asynchronous on `stream`.
cudaError_t LaunchLumaStats(const LumaChunk* chunks, int n_chunks, const uint8_t* pixels,
                            LumaOut* out, cudaStream_t stream);

// ---- Preprocess (preprocess.cu) ----

struct PreprocessImage {
  uint64_t byte_offset = 0;  // packed BGR rows of the source image in the pixel buffer
  int32_t rows = 0, cols = 0;
  double scale_x = 1, scale_y = 1;  // source/destination, computed as cv::resize does
};
static_assert(sizeof(PreprocessImage) == 32);

struct PreprocessParams {
  int32_t width = 0, height = 0;  // output size
  int32_t to_rgb = 1;
  int32_t fp16 = 0;
  float scale = 1;
  float mean[3] = {0, 0, 0};
  float std[3] = {1, 1, 1};
};

// Resizes, reorders, normalises images[first, first + count) into `out`, an NCHW
// tensor of the whole batch (image n at n*3*H*W elements; float or IEEE half).
// Asynchronous on `stream`.
cudaError_t LaunchPreprocess(const PreprocessImage* images, int first, int count,
                             const uint8_t* pixels, void* out, const PreprocessParams& params,
                             cudaStream_t stream);

// ---- TopKSimilar (similarity.cu) ----

// One tile of the similarity matrix: query rows [q0, q0 + rows) (at `queries`, already
// offset) against base rows [base0, base0 + cols) (at `base`, offset), merged into the
// whole call's top-k arrays (sims/ids: nq x k, indexed by global query number).
struct SimilarityTile {
  const float* queries = nullptr;
  int64_t rows = 0, q0 = 0;
  const float* base = nullptr;
  int64_t cols = 0, base0 = 0;
  int dim = 0, k = 0;
  const int64_t* self = nullptr;  // device array of nq entries, or null
  float* scratch = nullptr;       // rows x cols floats
  float* sims = nullptr;
  int32_t* ids = nullptr;
};
cudaError_t LaunchTopKSimilarTile(const SimilarityTile& tile, cudaStream_t stream);
// Sets n entries to (empty, -1): the top-k arrays before the first tile.
cudaError_t LaunchTopKFill(int64_t n, float* sims, int32_t* ids, float empty, cudaStream_t stream);

// ---- DenseFlow (flow.cu): pyramidal Lucas-Kanade, the twin of DenseFlowCpu ----

// One pyramid level's device planes (floats, w x h, row-major; kFlowPlanes of them).
// `up_u`/`up_v` are the level above's flow (up_w x up_h), or null at the coarsest level.
struct FlowLevel {
  int w = 0, h = 0;
  float *from = nullptr, *to = nullptr;
  float *ix = nullptr, *iy = nullptr, *jx = nullptr, *jy = nullptr;  // each frame's gradient
  float *gx = nullptr, *gy = nullptr, *it = nullptr;  // mean gradient and difference, warped
  float *du = nullptr, *dv = nullptr, *u = nullptr, *v = nullptr;
  const float *up_u = nullptr, *up_v = nullptr;
  int up_w = 0, up_h = 0;
};
// 8-bit gray (pitch `pitch` bytes) -> [0, 1] floats.
cudaError_t LaunchGrayToFloat(const uint8_t* gray, int pitch, int w, int h, float* out,
                              cudaStream_t stream);
// 2x2 mean into the next level (out_w x out_h = floor of half).
cudaError_t LaunchHalf(const float* in, int w, int h, float* out, int out_w, int out_h,
                       cudaStream_t stream);
// One level: the flow from above, gradients and tensor, then `iterations` warps and solves.
cudaError_t LaunchFlowLevel(const FlowLevel& level, int radius, int iterations, float lambda,
                            cudaStream_t stream);

// ---- PatchMatch (patch_match.cu): the twin of PatchMatchCpu ----

// One task's device arrays (w x h, row-major, tightly packed).
struct PatchMatchPlanes {
  int w = 0, h = 0;
  const uint8_t* image = nullptr;  // BGR
  const uint8_t* active = nullptr;
  const uint8_t* source = nullptr;
  int2 *nnf_a = nullptr, *nnf_b = nullptr;  // a holds the start; the result ends in a
  int *cost_a = nullptr, *cost_b = nullptr;
};
// Starting costs, then `iterations` Jacobi iterations, ping-ponging a and b; leaves the
// final field and costs in a. Asynchronous on `stream`.
cudaError_t LaunchPatchMatch(const PatchMatchPlanes& p, int radius, int iterations, uint32_t seed,
                             cudaStream_t stream);

// ---- Hole fill (hole_fill.cu): the twin of HoleFillCpu ----

// One pyramid level's device arrays (w x h, row-major): the sums of known colours and
// counts, and two solutions (b, g, r, unused) that the Jacobi steps ping-pong.
struct HoleFillLevel {
  int w = 0, h = 0;
  float4 *sums = nullptr, *u = nullptr, *next = nullptr;
};
// One task: the image (BGR, filled in place in its hole) and hole, and `count` levels
// finest first, as HoleFillLevels gives them.
struct HoleFillPlanes {
  uint8_t* image = nullptr;
  const uint8_t* hole = nullptr;
  const HoleFillLevel* levels = nullptr;  // host memory
  int count = 0;
};
// The sums up the pyramid, then each level's start and `iterations` Jacobi steps down it,
// then the hole's bytes. Asynchronous on `stream`.
cudaError_t LaunchHoleFill(const HoleFillPlanes& p, int iterations, cudaStream_t stream);

}  // namespace framemill::gpu::cuda
