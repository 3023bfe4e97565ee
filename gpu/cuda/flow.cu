// Dense optical flow on the device: pyramidal Lucas-Kanade with iterative warping, one
// thread per pixel per step. The CPU twin is DenseFlowCpu (gpu/flow.cc); both read
// borders clamped, sample bilinearly with the same formula and sum windows rows outer,
// columns inner, so they agree to float rounding.
#include "gpu/cuda/kernels.h"

namespace framemill::gpu::cuda {

namespace {

constexpr int kBlockX = 32, kBlockY = 8;

dim3 Grid(int w, int h) { return dim3((w + kBlockX - 1) / kBlockX, (h + kBlockY - 1) / kBlockY); }

__device__ __forceinline__ int Clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

__device__ __forceinline__ float Get(const float* p, int w, int h, int x, int y) {
  return p[Clamp(y, 0, h - 1) * w + Clamp(x, 0, w - 1)];
}

__device__ __forceinline__ float Sample(const float* p, int w, int h, float fx, float fy) {
  fx = fminf(fmaxf(fx, 0.f), float(w - 1));
  fy = fminf(fmaxf(fy, 0.f), float(h - 1));
  const int x0 = int(fx), y0 = int(fy);
  const float ax = fx - float(x0), ay = fy - float(y0);
  const float a = Get(p, w, h, x0, y0), b = Get(p, w, h, x0 + 1, y0);
  const float c = Get(p, w, h, x0, y0 + 1), d = Get(p, w, h, x0 + 1, y0 + 1);
  const float top = __fadd_rn(a, __fmul_rn(ax, __fsub_rn(b, a)));
  const float bottom = __fadd_rn(c, __fmul_rn(ax, __fsub_rn(d, c)));
  return __fadd_rn(top, __fmul_rn(ay, __fsub_rn(bottom, top)));
}

__device__ __forceinline__ float WindowSum(const float* a, const float* b, int w, int h, int x,
                                           int y, int r) {
  float s = 0.f;
  for (int dy = -r; dy <= r; ++dy)
    for (int dx = -r; dx <= r; ++dx)
      s = __fadd_rn(s, __fmul_rn(Get(a, w, h, x + dx, y + dy), Get(b, w, h, x + dx, y + dy)));
  return s;
}

__global__ void GrayToFloat(const uint8_t* gray, int pitch, int w, int h, float* out) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  out[y * w + x] = __fmul_rn(float(gray[size_t(y) * pitch + x]), 1.0f / 255.0f);
}

__global__ void Half(const float* in, int w, int h, float* out, int ow, int oh) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= ow || y >= oh) return;
  const float s = __fadd_rn(__fadd_rn(__fadd_rn(Get(in, w, h, 2 * x, 2 * y), Get(in, w, h, 2 * x + 1, 2 * y)),
                                      Get(in, w, h, 2 * x, 2 * y + 1)),
                            Get(in, w, h, 2 * x + 1, 2 * y + 1));
  out[y * ow + x] = __fmul_rn(0.25f, s);
}

__global__ void Start(FlowLevel l) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= l.w || y >= l.h) return;
  const int i = y * l.w + x;
  if (l.up_u == nullptr) {
    l.u[i] = 0.f, l.v[i] = 0.f;
  } else {
    const float cx = __fsub_rn(__fmul_rn(__fadd_rn(float(x), 0.5f), 0.5f), 0.5f);
    const float cy = __fsub_rn(__fmul_rn(__fadd_rn(float(y), 0.5f), 0.5f), 0.5f);
    l.u[i] = __fmul_rn(2.0f, Sample(l.up_u, l.up_w, l.up_h, cx, cy));
    l.v[i] = __fmul_rn(2.0f, Sample(l.up_v, l.up_w, l.up_h, cx, cy));
  }
  l.ix[i] = __fmul_rn(0.5f, __fsub_rn(Get(l.from, l.w, l.h, x + 1, y), Get(l.from, l.w, l.h, x - 1, y)));
  l.iy[i] = __fmul_rn(0.5f, __fsub_rn(Get(l.from, l.w, l.h, x, y + 1), Get(l.from, l.w, l.h, x, y - 1)));
  l.jx[i] = __fmul_rn(0.5f, __fsub_rn(Get(l.to, l.w, l.h, x + 1, y), Get(l.to, l.w, l.h, x - 1, y)));
  l.jy[i] = __fmul_rn(0.5f, __fsub_rn(Get(l.to, l.w, l.h, x, y + 1), Get(l.to, l.w, l.h, x, y - 1)));
}

__global__ void Warp(FlowLevel l) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= l.w || y >= l.h) return;
  const int i = y * l.w + x;
  const float wx = __fadd_rn(float(x), l.u[i]), wy = __fadd_rn(float(y), l.v[i]);
  const bool inside = wx >= 0.f && wy >= 0.f && wx <= float(l.w - 1) && wy <= float(l.h - 1);
  l.it[i] = inside ? __fsub_rn(Sample(l.to, l.w, l.h, wx, wy), l.from[i]) : 0.f;
  l.gx[i] = inside ? __fmul_rn(0.5f, __fadd_rn(l.ix[i], Sample(l.jx, l.w, l.h, wx, wy))) : 0.f;
  l.gy[i] = inside ? __fmul_rn(0.5f, __fadd_rn(l.iy[i], Sample(l.jy, l.w, l.h, wx, wy))) : 0.f;
}

__global__ void Solve(FlowLevel l, int r, float lambda) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= l.w || y >= l.h) return;
  const int i = y * l.w + x;
  const float bx = WindowSum(l.gx, l.it, l.w, l.h, x, y, r);
  const float by = WindowSum(l.gy, l.it, l.w, l.h, x, y, r);
  const float a = __fadd_rn(WindowSum(l.gx, l.gx, l.w, l.h, x, y, r), lambda);
  const float b = WindowSum(l.gx, l.gy, l.w, l.h, x, y, r);
  const float d = __fadd_rn(WindowSum(l.gy, l.gy, l.w, l.h, x, y, r), lambda);
  const float det = __fsub_rn(__fmul_rn(a, d), __fmul_rn(b, b));
  const bool solvable = det > 1e-12f;
  l.du[i] = solvable ? -__fdiv_rn(__fsub_rn(__fmul_rn(d, bx), __fmul_rn(b, by)), det) : 0.f;
  l.dv[i] = solvable ? -__fdiv_rn(__fsub_rn(__fmul_rn(a, by), __fmul_rn(b, bx)), det) : 0.f;
}

__global__ void Apply(FlowLevel l) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= l.w || y >= l.h) return;
  const int i = y * l.w + x;
  l.u[i] = __fadd_rn(l.u[i], l.du[i]);
  l.v[i] = __fadd_rn(l.v[i], l.dv[i]);
}

}  // namespace

cudaError_t LaunchGrayToFloat(const uint8_t* gray, int pitch, int w, int h, float* out,
                              cudaStream_t stream) {
  GrayToFloat<<<Grid(w, h), dim3(kBlockX, kBlockY), 0, stream>>>(gray, pitch, w, h, out);
  return cudaGetLastError();
}

cudaError_t LaunchHalf(const float* in, int w, int h, float* out, int out_w, int out_h,
                       cudaStream_t stream) {
  Half<<<Grid(out_w, out_h), dim3(kBlockX, kBlockY), 0, stream>>>(in, w, h, out, out_w, out_h);
  return cudaGetLastError();
}

cudaError_t LaunchFlowLevel(const FlowLevel& l, int radius, int iterations, float lambda,
                            cudaStream_t stream) {
  const dim3 grid = Grid(l.w, l.h), block(kBlockX, kBlockY);
  Start<<<grid, block, 0, stream>>>(l);
  for (int k = 0; k < iterations; ++k) {
    Warp<<<grid, block, 0, stream>>>(l);
    Solve<<<grid, block, 0, stream>>>(l, radius, lambda);
    Apply<<<grid, block, 0, stream>>>(l);
  }
  return cudaGetLastError();
}

}  // namespace framemill::gpu::cuda
