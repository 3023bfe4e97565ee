// Fused preprocessing on the device: bilinear resize with half-pixel centres,
// BGR->RGB, x*scale, (x-mean)/std, HWC->NCHW, float or IEEE half.
//
// The resize reproduces cv::resize(INTER_LINEAR) on float input (the CPU reference,
// PreprocessCpu), coordinate by coordinate:
//   f = (float)((d + 0.5) * scale - 0.5) in double, scale = 1 / (dst/src) as OpenCV
//   computes it; s = floor(f); f -= s.
//   x: s < 0 -> s = 0, f = 0; s >= cols-1 -> s = cols-1, f = 0 (OpenCV resets the weight);
//   y: rows s and s+1 clamped into [0, rows-1], the weight kept (OpenCV's row clip).
//   Horizontal pass first (per source row), then vertical: h0*(1-fy) + h1*fy.
// The normalisation uses explicitly rounded operations (no FMA contraction, IEEE
// division even under --use_fast_math), so the only difference from the CPU is the
// float rounding inside the interpolation (OpenCV's SIMD may fuse), a few ulp of 255.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gpu/cuda/kernels.h"

namespace framemill::gpu::cuda {
namespace {

constexpr int kBlockX = 32, kBlockY = 8;

__device__ __forceinline__ float SrcCoord(int d, double scale) {
  return __double2float_rn(__dadd_rn(__dmul_rn(d + 0.5, scale), -0.5));
}

__global__ void __launch_bounds__(kBlockX * kBlockY)
PreprocessKernel(const PreprocessImage* __restrict__ images, int first,
                 const uint8_t* __restrict__ pixels, void* __restrict__ out,
                 PreprocessParams prm) {
  const int x = blockIdx.x * kBlockX + threadIdx.x;
  const int y = blockIdx.y * kBlockY + threadIdx.y;
  if (x >= prm.width || y >= prm.height) return;
  const int n = first + static_cast<int>(blockIdx.z);
  const PreprocessImage im = images[n];

  float fx = SrcCoord(x, im.scale_x);
  int sx = __float2int_rd(fx);
  fx = __fsub_rn(fx, static_cast<float>(sx));
  if (sx < 0) {
    sx = 0;
    fx = 0.f;
  }
  if (sx >= im.cols - 1) {
    sx = im.cols - 1;
    fx = 0.f;
  }
  const int sx1 = min(sx + 1, im.cols - 1);

  float fy = SrcCoord(y, im.scale_y);
  const int sy = __float2int_rd(fy);
  fy = __fsub_rn(fy, static_cast<float>(sy));
  const int y0 = min(max(sy, 0), im.rows - 1);
  const int y1 = min(max(sy + 1, 0), im.rows - 1);

  const float a0 = 1.f - fx, a1 = fx, b0 = 1.f - fy, b1 = fy;
  const size_t stride = static_cast<size_t>(im.cols) * 3;
  const uint8_t* __restrict__ r0 = pixels + im.byte_offset + static_cast<size_t>(y0) * stride;
  const uint8_t* __restrict__ r1 = pixels + im.byte_offset + static_cast<size_t>(y1) * stride;
  const int i0 = sx * 3, i1 = sx1 * 3;

  const size_t plane = static_cast<size_t>(prm.width) * prm.height;
  const size_t pix = static_cast<size_t>(y) * prm.width + x;
#pragma unroll
  for (int c = 0; c < 3; ++c) {
    const int sc = prm.to_rgb ? 2 - c : c;
    const float h0 = __fadd_rn(__fmul_rn(static_cast<float>(r0[i0 + sc]), a0),
                               __fmul_rn(static_cast<float>(r0[i1 + sc]), a1));
    const float h1 = __fadd_rn(__fmul_rn(static_cast<float>(r1[i0 + sc]), a0),
                               __fmul_rn(static_cast<float>(r1[i1 + sc]), a1));
    const float v = __fadd_rn(__fmul_rn(h0, b0), __fmul_rn(h1, b1));
    const float w = __fdiv_rn(__fsub_rn(__fmul_rn(v, prm.scale), prm.mean[c]), prm.std[c]);
    const size_t idx = (static_cast<size_t>(n) * 3 + c) * plane + pix;
    if (prm.fp16) {
      static_cast<__half*>(out)[idx] = __float2half_rn(w);
    } else {
      static_cast<float*>(out)[idx] = w;
    }
  }
}

}  // namespace

cudaError_t LaunchPreprocess(const PreprocessImage* images, int first, int count,
                             const uint8_t* pixels, void* out, const PreprocessParams& params,
                             cudaStream_t stream) {
  const dim3 block(kBlockX, kBlockY);
  const unsigned gx = static_cast<unsigned>((params.width + kBlockX - 1) / kBlockX);
  const unsigned gy = static_cast<unsigned>((params.height + kBlockY - 1) / kBlockY);
  if (gy > 65535u) return cudaErrorInvalidConfiguration;
  // gridDim.z is at most 65535: launch in pieces.
  for (int done = 0; done < count;) {
    const int k = count - done < 65535 ? count - done : 65535;
    PreprocessKernel<<<dim3(gx, gy, static_cast<unsigned>(k)), block, 0, stream>>>(
        images, first + done, pixels, out, params);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    done += k;
  }
  return cudaSuccess;
}

}  // namespace framemill::gpu::cuda
