// The harmonic hole fill of gpu/ops.h on the device, one thread per pixel of a level. The CPU
// twin is HoleFillCpu (gpu/hole_fill.cc): each product and sum is rounded on its own
// (__fmul_rn, __fadd_rn: never fused), in the twin's order, so the two fills are equal.
#include <utility>

#include "gpu/cuda/kernels.h"

namespace framemill::gpu::cuda {

namespace {

constexpr int kBlockX = 32, kBlockY = 8;

dim3 Grid(int w, int h) { return dim3((w + kBlockX - 1) / kBlockX, (h + kBlockY - 1) / kBlockY); }

__device__ __forceinline__ float Mix(float near, float far) {
  return __fadd_rn(__fmul_rn(0.75f, near), __fmul_rn(0.25f, far));
}

__global__ void InitSums(const uint8_t* image, const uint8_t* hole, int w, int h, float4* sums) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  const size_t i = size_t(y) * w + x;
  const uint8_t* px = image + 3 * i;
  sums[i] = hole[i] != 0 ? make_float4(0.f, 0.f, 0.f, 0.f)
                         : make_float4(float(px[0]), float(px[1]), float(px[2]), 1.f);
}

__device__ __forceinline__ float4 Child(const float4* fine, int fw, int fh, int x, int y) {
  return x < fw && y < fh ? fine[size_t(y) * fw + x] : make_float4(0.f, 0.f, 0.f, 0.f);
}

__device__ __forceinline__ float Sum4(float c00, float c10, float c01, float c11) {
  return __fadd_rn(__fadd_rn(c00, c10), __fadd_rn(c01, c11));
}

__global__ void Push(const float4* fine, int fw, int fh, float4* coarse, int cw, int ch) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= cw || y >= ch) return;
  const float4 a = Child(fine, fw, fh, 2 * x, 2 * y), b = Child(fine, fw, fh, 2 * x + 1, 2 * y);
  const float4 c = Child(fine, fw, fh, 2 * x, 2 * y + 1), d = Child(fine, fw, fh, 2 * x + 1, 2 * y + 1);
  coarse[size_t(y) * cw + x] = make_float4(Sum4(a.x, b.x, c.x, d.x), Sum4(a.y, b.y, c.y, d.y),
                                           Sum4(a.z, b.z, c.z, d.z), Sum4(a.w, b.w, c.w, d.w));
}

// A known pixel's mean colour; an unknown one from the coarser solution (null at the
// coarsest level), bilinear.
__global__ void Start(const float4* sums, int w, int h, const float4* coarse, int cw, int ch,
                      float4* u) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  const size_t i = size_t(y) * w + x;
  const float4 s = sums[i];
  if (s.w > 0.f) {
    u[i] = make_float4(__fdiv_rn(s.x, s.w), __fdiv_rn(s.y, s.w), __fdiv_rn(s.z, s.w), 0.f);
    return;
  }
  if (coarse == nullptr) {
    u[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    return;
  }
  const int nx = x >> 1, ny = y >> 1;
  const int fx = (x & 1) ? min(nx + 1, cw - 1) : max(nx - 1, 0);
  const int fy = (y & 1) ? min(ny + 1, ch - 1) : max(ny - 1, 0);
  const float4 nn = coarse[size_t(ny) * cw + nx], fn = coarse[size_t(ny) * cw + fx];
  const float4 nf = coarse[size_t(fy) * cw + nx], ff = coarse[size_t(fy) * cw + fx];
  u[i] = make_float4(Mix(Mix(nn.x, fn.x), Mix(nf.x, ff.x)), Mix(Mix(nn.y, fn.y), Mix(nf.y, ff.y)),
                     Mix(Mix(nn.z, fn.z), Mix(nf.z, ff.z)), 0.f);
}

__device__ __forceinline__ float Average(float l, float r, float t, float b) {
  return __fmul_rn(__fadd_rn(__fadd_rn(l, r), __fadd_rn(t, b)), 0.25f);
}

__global__ void Relax(const float4* sums, const float4* u, int w, int h, float4* next) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  const size_t i = size_t(y) * w + x;
  if (sums[i].w > 0.f) {
    next[i] = u[i];
    return;
  }
  const float4 l = u[size_t(y) * w + max(x - 1, 0)], r = u[size_t(y) * w + min(x + 1, w - 1)];
  const float4 t = u[size_t(max(y - 1, 0)) * w + x], b = u[size_t(min(y + 1, h - 1)) * w + x];
  next[i] = make_float4(Average(l.x, r.x, t.x, b.x), Average(l.y, r.y, t.y, b.y),
                        Average(l.z, r.z, t.z, b.z), 0.f);
}

__device__ __forceinline__ uint8_t Byte(float v) { return uint8_t(min(max(__float2int_rn(v), 0), 255)); }

__global__ void Finish(const float4* u, const uint8_t* hole, int w, int h, uint8_t* image) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  const size_t i = size_t(y) * w + x;
  if (hole[i] == 0) return;
  const float4 v = u[i];
  image[3 * i] = Byte(v.x), image[3 * i + 1] = Byte(v.y), image[3 * i + 2] = Byte(v.z);
}

}  // namespace

cudaError_t LaunchHoleFill(const HoleFillPlanes& p, int iterations, cudaStream_t stream) {
  const dim3 block(kBlockX, kBlockY);
  const HoleFillLevel* lv = p.levels;
  InitSums<<<Grid(lv[0].w, lv[0].h), block, 0, stream>>>(p.image, p.hole, lv[0].w, lv[0].h, lv[0].sums);
  for (int i = 1; i < p.count; ++i)
    Push<<<Grid(lv[i].w, lv[i].h), block, 0, stream>>>(lv[i - 1].sums, lv[i - 1].w, lv[i - 1].h,
                                                        lv[i].sums, lv[i].w, lv[i].h);
  for (int i = p.count - 1; i >= 0; --i) {
    const bool coarsest = i == p.count - 1;
    const HoleFillLevel* c = coarsest ? nullptr : &lv[i + 1];
    float4 *u = lv[i].u, *next = lv[i].next;
    Start<<<Grid(lv[i].w, lv[i].h), block, 0, stream>>>(lv[i].sums, lv[i].w, lv[i].h,
                                                         c ? c->u : nullptr, c ? c->w : 0,
                                                         c ? c->h : 0, u);
    for (int it = 0; !coarsest && it < iterations; ++it) {
      Relax<<<Grid(lv[i].w, lv[i].h), block, 0, stream>>>(lv[i].sums, u, lv[i].w, lv[i].h, next);
      std::swap(u, next);
    }
    // The solution ends in u or next by the parity of the steps; the finer level reads it
    // from u.
    if (u != lv[i].u) {
      cudaError_t e = cudaMemcpyAsync(lv[i].u, u, sizeof(float4) * size_t(lv[i].w) * lv[i].h,
                                      cudaMemcpyDeviceToDevice, stream);
      if (e != cudaSuccess) return e;
    }
  }
  Finish<<<Grid(lv[0].w, lv[0].h), block, 0, stream>>>(lv[0].u, p.hole, lv[0].w, lv[0].h, p.image);
  return cudaGetLastError();
}

}  // namespace framemill::gpu::cuda
