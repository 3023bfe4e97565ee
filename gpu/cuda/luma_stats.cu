// LumaStats on the device, computed exactly as LumaStatsCpu (gpu/ops.cc) defines them.
//
// Bit-exactness: L is formed with explicitly rounded float operations (__fmul_rn,
// __fadd_rn: no FMA contraction, which the CPU reference does not do either), from the
// same sRGB->linear table as the CPU (the backend reads it off LumaStatsCpu), and the
// bin is floor(__fsqrt_rn(L) * 4096) with an IEEE square root: histogram bins and clip
// counts match the CPU exactly, even under --use_fast_math. log(1e-4 + L) is taken in
// double and rounded to float, as the CPU's logf result is; sums accumulate in double
// per thread, then per block, then atomically per image, so they differ from the
// CPU's row-by-row double sums only by summation order (~1e-12 relative).
//
// One block per chunk of pixels: a 4096-bin shared-memory histogram fed with
// warp-aggregated atomics (neighbouring pixels tend to share a bin: one atomic per
// distinct bin per warp), merged into the image's global histogram at the end.
#include <cuda_runtime.h>

#include "gpu/cuda/kernels.h"

namespace framemill::gpu::cuda {
namespace {

__constant__ float c_srgb_to_linear[256];

constexpr int kWarps = kLumaThreads / 32;

__device__ __forceinline__ double WarpSum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ unsigned WarpSum(unsigned v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

__global__ void __launch_bounds__(kLumaThreads)
LumaStatsKernel(const LumaChunk* __restrict__ chunks, const uint8_t* __restrict__ pixels,
                LumaOut* __restrict__ out) {
  __shared__ uint32_t hist[kLumaBins];
  __shared__ float lut[256];
  __shared__ double part[6][kWarps];
  __shared__ unsigned cpart[2][kWarps];

  const LumaChunk chunk = chunks[blockIdx.x];
  for (int i = threadIdx.x; i < kLumaBins; i += kLumaThreads) hist[i] = 0;
  for (int i = threadIdx.x; i < 256; i += kLumaThreads) lut[i] = c_srgb_to_linear[i];
  __syncthreads();

  const uint8_t* __restrict__ p = pixels + chunk.byte_offset;
  const unsigned lane = threadIdx.x & 31u;
  double sl = 0, sl2 = 0, slog = 0, sr = 0, sg = 0, sb = 0;
  unsigned shadows = 0, highlights = 0;
  // Uniform trip count across the block, so every lane takes part in __match_any_sync.
  for (uint32_t base = 0; base < chunk.pixels; base += kLumaThreads) {
    const uint32_t i = base + threadIdx.x;
    int bin = -1;
    if (i < chunk.pixels) {
      const uint8_t b8 = p[3 * i], g8 = p[3 * i + 1], r8 = p[3 * i + 2];
      const float b = lut[b8], g = lut[g8], r = lut[r8];
      const float l = __fadd_rn(__fadd_rn(__fmul_rn(0.2126f, r), __fmul_rn(0.7152f, g)),
                                __fmul_rn(0.0722f, b));
      bin = min(__float2int_rz(__fmul_rn(__fsqrt_rn(l), static_cast<float>(kLumaBins))),
                kLumaBins - 1);
      sl += l;
      sl2 += static_cast<double>(l) * l;
      slog += static_cast<double>(__double2float_rn(log(static_cast<double>(__fadd_rn(1e-4f, l)))));
      sr += r;
      sg += g;
      sb += b;
      shadows += max(max(r8, g8), b8) <= 2;
      highlights += min(min(r8, g8), b8) >= 253;
    }
    const unsigned peers = __match_any_sync(0xffffffffu, bin);
    if (bin >= 0 && lane == static_cast<unsigned>(__ffs(peers) - 1)) {
      atomicAdd(&hist[bin], static_cast<uint32_t>(__popc(peers)));
    }
  }

  // Block reduction of the sums and counts: warps, then warp 0.
  sl = WarpSum(sl);
  sl2 = WarpSum(sl2);
  slog = WarpSum(slog);
  sr = WarpSum(sr);
  sg = WarpSum(sg);
  sb = WarpSum(sb);
  shadows = WarpSum(shadows);
  highlights = WarpSum(highlights);
  const unsigned warp = threadIdx.x >> 5;
  if (lane == 0) {
    part[0][warp] = sl;
    part[1][warp] = sl2;
    part[2][warp] = slog;
    part[3][warp] = sr;
    part[4][warp] = sg;
    part[5][warp] = sb;
    cpart[0][warp] = shadows;
    cpart[1][warp] = highlights;
  }
  __syncthreads();  // also: every shared-histogram atomic is done

  LumaOut* __restrict__ o = out + chunk.image;
  if (threadIdx.x < 32) {
    double v[6];
    for (int k = 0; k < 6; ++k) v[k] = WarpSum(lane < kWarps ? part[k][lane] : 0.0);
    unsigned c0 = WarpSum(lane < kWarps ? cpart[0][lane] : 0u);
    unsigned c1 = WarpSum(lane < kWarps ? cpart[1][lane] : 0u);
    if (lane == 0) {
      atomicAdd(&o->sum_l, v[0]);
      atomicAdd(&o->sum_l2, v[1]);
      atomicAdd(&o->sum_log_l, v[2]);
      atomicAdd(&o->sum_r, v[3]);
      atomicAdd(&o->sum_g, v[4]);
      atomicAdd(&o->sum_b, v[5]);
      if (c0) atomicAdd(&o->clipped_shadows, static_cast<unsigned long long>(c0));
      if (c1) atomicAdd(&o->clipped_highlights, static_cast<unsigned long long>(c1));
    }
  }
  for (int i = threadIdx.x; i < kLumaBins; i += kLumaThreads) {
    const uint32_t c = hist[i];
    if (c != 0) atomicAdd(&o->histogram[i], c);
  }
}

}  // namespace

cudaError_t UploadSrgbToLinear(const float* lut256) {
  return cudaMemcpyToSymbol(c_srgb_to_linear, lut256, 256 * sizeof(float));
}

cudaError_t LaunchLumaStats(const LumaChunk* chunks, int n_chunks, const uint8_t* pixels,
                            LumaOut* out, cudaStream_t stream) {
  if (n_chunks <= 0) return cudaSuccess;
  // gridDim.x allows 2^31-1 blocks: far beyond any batch (2^31 chunks of 32K pixels).
  LumaStatsKernel<<<static_cast<unsigned>(n_chunks), kLumaThreads, 0, stream>>>(chunks, pixels, out);
  return cudaGetLastError();
}

}  // namespace framemill::gpu::cuda
