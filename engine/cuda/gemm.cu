// The engine's convolutions and matrix products on a CUDA device (common.cuh): the
// tiled GEMM (implicit-GEMM Conv2d, MatMul) in float and on tensor cores, the depthwise
// convolution and ConvTranspose2d.
#include <mma.h>

#include "engine/cuda/common.cuh"

namespace framemill::engine::cuda {
namespace {

// ---- tiled GEMM (Conv2d as implicit GEMM, MatMul) ----

constexpr int kTileM = 64, kTileN = 64, kTileK = 16, kGemmThreads = 256;

enum GemmMode : int {
  kConvGeneral = 0,    // B = im2col(x), gathered
  kConvPointwise = 1,  // 1x1, stride 1, no padding: B = x as [c_in/g, h*w] per image
  kMatMulNN = 2,       // B stored [K, N]
  kMatMulNT = 3,       // B stored [N, K] (trans_b)
};

struct GemmArgs {
  int64_t M = 0, N = 0, K = 0;  // per z-slice: out[M, N] = A[M, K] x B[K, N]
  int64_t z0 = 0;               // first group / batch of this launch
  // conv
  int64_t c_in = 0, h_in = 0, w_in = 0, c_out = 0, h_out = 0, w_out = 0, cin_g = 0;
  int32_t kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pl = 0, dh = 1, dw = 1;
  bool residual_after_act = false;
  // matmul
  bool trans_a = false;
  int64_t a_batch_stride = 0, b_batch_stride = 0, c_stride_m = 0, c_stride_n = 0;
  float alpha = 1, beta = 1;
  ActivationParams act;
  const void* a = nullptr;         // conv: weights
  const void* b = nullptr;         // conv: x
  const void* bias = nullptr;      // conv: [c_out]; matmul: c
  const void* residual = nullptr;  // conv only
  void* y = nullptr;
};

template <typename T, int kMode>
__global__ void __launch_bounds__(kGemmThreads) GemmKernel(const GemmArgs g) {
  __shared__ __align__(16) float As[kTileK][kTileM + 4];
  __shared__ __align__(16) float Bs[kTileK][kTileN + 4];
  constexpr bool kConv = kMode == kConvGeneral || kMode == kConvPointwise;

  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kTileM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  const int64_t z = g.z0 + blockIdx.z;
  const int64_t M = g.M, N = g.N, K = g.K;

  const T* __restrict__ A;
  const T* __restrict__ B = static_cast<const T*>(g.b);
  if (kConv) {
    A = static_cast<const T*>(g.a) + z * M * K;  // the group's rows of [c_out, cin_g*kh*kw]
  } else {
    A = static_cast<const T*>(g.a) + z * g.a_batch_stride;
    B += z * g.b_batch_stride;
  }

  // The B column this thread loads (conv, NN: fixed for the whole loop).
  const int bj = tid % kTileN;
  const int64_t col = n0 + bj;
  const bool col_ok = col < N;
  const T* xbase = nullptr;
  int64_t ih0 = 0, iw0 = 0, pix = 0;
  if (kConv && col_ok) {
    const int64_t ohw = g.h_out * g.w_out;
    const int64_t img = col / ohw;
    pix = col - img * ohw;
    const int64_t oh = pix / g.w_out, ow = pix - oh * g.w_out;
    ih0 = oh * g.sh - g.pt;
    iw0 = ow * g.sw - g.pl;
    xbase = B + (img * g.c_in + z * g.cin_g) * g.h_in * g.w_in;
  }
  const int khw = g.kh * g.kw;

  float a_reg[4], b_reg[4];
  auto load = [&](int64_t k0) {
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int e = tid + kGemmThreads * l;
      int am, ak;
      if (!kConv && g.trans_a) {
        am = e % kTileM;
        ak = e / kTileM;
      } else {
        am = e / kTileK;
        ak = e % kTileK;
      }
      const int64_t m = m0 + am, k = k0 + ak;
      float v = 0.f;
      if (m < M && k < K) v = ToF((!kConv && g.trans_a) ? A[k * M + m] : A[m * K + k]);
      a_reg[l] = v;
    }
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int e = tid + kGemmThreads * l;
      float v = 0.f;
      if (kMode == kMatMulNT) {
        const int64_t k = k0 + e % kTileK, j = n0 + e / kTileK;
        if (k < K && j < N) v = ToF(B[j * K + k]);
      } else {
        const int64_t k = k0 + e / kTileN;
        if (k < K && col_ok) {
          if (kMode == kMatMulNN) {
            v = ToF(B[k * N + col]);
          } else if (kMode == kConvPointwise) {
            v = ToF(xbase[k * g.h_in * g.w_in + pix]);
          } else {
            // 32-bit: K = c_in/groups * kh * kw is far below 2^31 (checked on the host).
            const int k32 = static_cast<int>(k);
            const int c = k32 / khw;
            const int rs = k32 - c * khw;
            const int r = rs / g.kw, s = rs - r * g.kw;
            const int64_t ih = ih0 + static_cast<int64_t>(r) * g.dh;
            const int64_t iw = iw0 + static_cast<int64_t>(s) * g.dw;
            if (ih >= 0 && ih < g.h_in && iw >= 0 && iw < g.w_in)
              v = ToF(xbase[(static_cast<int64_t>(c) * g.h_in + ih) * g.w_in + iw]);
          }
        }
      }
      b_reg[l] = v;
    }
  };
  auto store = [&]() {
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const int e = tid + kGemmThreads * l;
      if (!kConv && g.trans_a) {
        As[e / kTileM][e % kTileM] = a_reg[l];
      } else {
        As[e % kTileK][e / kTileK] = a_reg[l];
      }
      if (kMode == kMatMulNT) {
        Bs[e % kTileK][e / kTileK] = b_reg[l];
      } else {
        Bs[e / kTileN][e % kTileN] = b_reg[l];
      }
    }
  };

  float acc[4][4] = {};
  load(0);
  for (int64_t k0 = 0; k0 < K; k0 += kTileK) {
    store();
    __syncthreads();
    if (k0 + kTileK < K) load(k0 + kTileK);  // in flight while this tile is multiplied
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      const float4 av = *reinterpret_cast<const float4*>(&As[kk][ty * 4]);
      const float4 bv = *reinterpret_cast<const float4*>(&Bs[kk][tx * 4]);
      const float a4[4] = {av.x, av.y, av.z, av.w};
      const float b4[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a4[i], b4[j], acc[i][j]);
    }
    __syncthreads();
  }

  T* __restrict__ Y = static_cast<T*>(g.y);
  const T* __restrict__ bias = static_cast<const T*>(g.bias);
  const T* __restrict__ res = static_cast<const T*>(g.residual);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t c = n0 + tx * 4 + j;
    if (c >= N) continue;
    int64_t img = 0, p = 0;
    if (kConv) {
      const int64_t ohw = g.h_out * g.w_out;
      img = c / ohw;
      p = c - img * ohw;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t m = m0 + ty * 4 + i;
      if (m >= M) continue;
      float v = acc[i][j];
      int64_t idx;
      if (kConv) {
        const int64_t co = z * M + m;
        idx = (img * g.c_out + co) * (g.h_out * g.w_out) + p;
        if (bias != nullptr) v += ToF(bias[co]);
        if (res != nullptr && !g.residual_after_act) v += ToF(res[idx]);
        v = ApplyAct(g.act, v);
        if (res != nullptr && g.residual_after_act) v += ToF(res[idx]);
      } else {
        idx = (z * M + m) * N + c;
        v *= g.alpha;
        if (bias != nullptr) v += g.beta * ToF(bias[m * g.c_stride_m + c * g.c_stride_n]);
        v = ApplyAct(g.act, v);
      }
      Y[idx] = FromF<T>(v);
    }
  }
}

template <typename T, int kMode>
cudaError_t LaunchGemm(GemmArgs g, int64_t slices, cudaStream_t stream) {
  const int64_t gx = (g.N + kTileN - 1) / kTileN, gy = (g.M + kTileM - 1) / kTileM;
  if (gx > 0x7fffffff || gy > 65535) return cudaErrorInvalidConfiguration;
  for (int64_t z0 = 0; z0 < slices; z0 += 65535) {
    g.z0 = z0;
    const unsigned gz = static_cast<unsigned>(std::min<int64_t>(65535, slices - z0));
    GemmKernel<T, kMode><<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), gz), kGemmThreads, 0,
                           stream>>>(g);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}


// ---- the same GEMM on tensor cores (fp16 storage; sm_70+) ----
// 64x64 output tile per block of 4 warps, each warp 32x32 as 2x2 WMMA 16x16x16
// fragments with float accumulators; operands are gathered exactly as above (so every
// GemmMode works), stored to shared memory as half (exact: the storage is half), the
// accumulators go through shared memory for the fused epilogue, whose stores are
// coalesced along the output row.

constexpr int kWmmaThreads = 128;
constexpr int kALd = kTileK + 8;  // half elements; WMMA wants multiples of 8 (16 bytes)
constexpr int kBLd = kTileN + 8;
constexpr int kCLd = kTileN + 4;  // float elements; multiples of 4

template <int kMode>
__global__ void __launch_bounds__(kWmmaThreads) WmmaGemmKernel(const GemmArgs g) {
  using namespace nvcuda;
  __shared__ __align__(32) __half As[kTileM][kALd];
  __shared__ __align__(32) __half Bs[kTileK][kBLd];
  __shared__ __align__(32) float Cs[kTileM][kCLd];
  constexpr bool kConv = kMode == kConvGeneral || kMode == kConvPointwise;
  constexpr int kPer = kTileM * kTileK / kWmmaThreads;  // 8 elements of each operand per thread

  const int tid = threadIdx.x, warp = tid / 32;
  const int wm = warp / 2, wn = warp % 2;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * kTileM;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileN;
  const int64_t z = g.z0 + blockIdx.z;
  const int64_t M = g.M, N = g.N, K = g.K;

  const __half* __restrict__ A;
  const __half* __restrict__ B = static_cast<const __half*>(g.b);
  if (kConv) {
    A = static_cast<const __half*>(g.a) + z * M * K;
  } else {
    A = static_cast<const __half*>(g.a) + z * g.a_batch_stride;
    B += z * g.b_batch_stride;
  }
  const int bj = tid % kTileN;
  const int64_t col = n0 + bj;
  const bool col_ok = col < N;
  const __half* xbase = nullptr;
  int64_t ih0 = 0, iw0 = 0, pix = 0;
  if (kConv && col_ok) {
    const int64_t ohw = g.h_out * g.w_out;
    const int64_t img = col / ohw;
    pix = col - img * ohw;
    const int64_t oh = pix / g.w_out, ow = pix - oh * g.w_out;
    ih0 = oh * g.sh - g.pt;
    iw0 = ow * g.sw - g.pl;
    xbase = B + (img * g.c_in + z * g.cin_g) * g.h_in * g.w_in;
  }
  const int khw = g.kh * g.kw;
  const __half zero = __float2half_rn(0.f);

  __half a_reg[kPer], b_reg[kPer];
  auto load = [&](int64_t k0) {
#pragma unroll
    for (int l = 0; l < kPer; ++l) {
      const int e = tid + kWmmaThreads * l;
      int am, ak;
      if (!kConv && g.trans_a) {
        am = e % kTileM;
        ak = e / kTileM;
      } else {
        am = e / kTileK;
        ak = e % kTileK;
      }
      const int64_t m = m0 + am, k = k0 + ak;
      __half v = zero;
      if (m < M && k < K) v = (!kConv && g.trans_a) ? A[k * M + m] : A[m * K + k];
      a_reg[l] = v;
    }
#pragma unroll
    for (int l = 0; l < kPer; ++l) {
      const int e = tid + kWmmaThreads * l;
      __half v = zero;
      if (kMode == kMatMulNT) {
        const int64_t k = k0 + e % kTileK, j = n0 + e / kTileK;
        if (k < K && j < N) v = B[j * K + k];
      } else {
        const int64_t k = k0 + e / kTileN;  // e % kTileN == bj
        if (k < K && col_ok) {
          if (kMode == kMatMulNN) {
            v = B[k * N + col];
          } else if (kMode == kConvPointwise) {
            v = xbase[k * g.h_in * g.w_in + pix];
          } else {
            // 32-bit: K = c_in/groups * kh * kw is far below 2^31 (checked on the host).
            const int k32 = static_cast<int>(k);
            const int c = k32 / khw;
            const int rs = k32 - c * khw;
            const int r = rs / g.kw, s = rs - r * g.kw;
            const int64_t ih = ih0 + static_cast<int64_t>(r) * g.dh;
            const int64_t iw = iw0 + static_cast<int64_t>(s) * g.dw;
            if (ih >= 0 && ih < g.h_in && iw >= 0 && iw < g.w_in)
              v = xbase[(static_cast<int64_t>(c) * g.h_in + ih) * g.w_in + iw];
          }
        }
      }
      b_reg[l] = v;
    }
  };
  auto store = [&]() {
#pragma unroll
    for (int l = 0; l < kPer; ++l) {
      const int e = tid + kWmmaThreads * l;
      if (!kConv && g.trans_a) {
        As[e % kTileM][e / kTileM] = a_reg[l];
      } else {
        As[e / kTileK][e % kTileK] = a_reg[l];
      }
      if (kMode == kMatMulNT) {
        Bs[e % kTileK][e / kTileK] = b_reg[l];
      } else {
        Bs[e / kTileN][e % kTileN] = b_reg[l];
      }
    }
  };

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  load(0);
  for (int64_t k0 = 0; k0 < K; k0 += kTileK) {
    store();
    __syncthreads();
    if (k0 + kTileK < K) load(k0 + kTileK);
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[2];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &As[wm * 32 + i * 16][0], kALd);
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &Bs[0][wn * 32 + j * 16], kBLd);
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&Cs[wm * 32 + i * 16][wn * 32 + j * 16], acc[i][j], kCLd, wmma::mem_row_major);
  __syncthreads();

  __half* __restrict__ Y = static_cast<__half*>(g.y);
  const __half* __restrict__ bias = static_cast<const __half*>(g.bias);
  const __half* __restrict__ res = static_cast<const __half*>(g.residual);
  // Each thread keeps one column (tid % 64) and walks rows: one division per thread.
  const int64_t c = n0 + bj;
  if (c >= N) return;
  int64_t img = 0, p = 0;
  if (kConv) {
    const int64_t ohw = g.h_out * g.w_out;
    img = c / ohw;
    p = c - img * ohw;
  }
  for (int r = tid / kTileN; r < kTileM; r += kWmmaThreads / kTileN) {
    const int64_t m = m0 + r;
    if (m >= M) break;
    float v = Cs[r][bj];
    int64_t idx;
    if (kConv) {
      const int64_t co = z * M + m;
      idx = (img * g.c_out + co) * (g.h_out * g.w_out) + p;
      if (bias != nullptr) v += __half2float(bias[co]);
      if (res != nullptr && !g.residual_after_act) v += __half2float(res[idx]);
      v = ApplyAct(g.act, v);
      if (res != nullptr && g.residual_after_act) v += __half2float(res[idx]);
    } else {
      idx = (z * M + m) * N + c;
      v *= g.alpha;
      if (bias != nullptr) v += g.beta * __half2float(bias[m * g.c_stride_m + c * g.c_stride_n]);
      v = ApplyAct(g.act, v);
    }
    Y[idx] = __float2half_rn(v);
  }
}

template <int kMode>
cudaError_t LaunchWmmaGemm(GemmArgs g, int64_t slices, cudaStream_t stream) {
  const int64_t gx = (g.N + kTileN - 1) / kTileN, gy = (g.M + kTileM - 1) / kTileM;
  if (gx > 0x7fffffff || gy > 65535) return cudaErrorInvalidConfiguration;
  for (int64_t z0 = 0; z0 < slices; z0 += 65535) {
    g.z0 = z0;
    const unsigned gz = static_cast<unsigned>(std::min<int64_t>(65535, slices - z0));
    WmmaGemmKernel<kMode><<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), gz), kWmmaThreads, 0,
                            stream>>>(g);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// Picks the tensor-core kernel for fp16 when allowed, else the float SIMT one.
template <typename T, int kMode>
cudaError_t LaunchAnyGemm(const GemmArgs& g, int64_t slices, bool tensor_cores, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, __half>) {
    if (tensor_cores) return LaunchWmmaGemm<kMode>(g, slices, stream);
  }
  return LaunchGemm<T, kMode>(g, slices, stream);
}

// ---- depthwise (one input channel per group) ----

// I: the index type, int32_t when every index fits (64-bit division is slow on GPUs).
template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
DepthwiseKernel(engine::Conv2dParams p, int64_t cout_g, const T* __restrict__ x, const T* __restrict__ w,
                const T* __restrict__ bias, const T* __restrict__ res, T* __restrict__ y) {
  const int64_t total = p.n * p.c_out * p.h_out * p.w_out;
  const I w_out = static_cast<I>(p.w_out), h_out = static_cast<I>(p.h_out), c_out = static_cast<I>(p.c_out);
  const I mult = static_cast<I>(cout_g);
  FM_GRID_STRIDE(i, total) {
    const I ii = static_cast<I>(i);
    const I ox = ii % w_out;
    I t = ii / w_out;
    const I oy = t % h_out;
    t /= h_out;
    const I co = t % c_out;
    const I n = t / c_out;
    const int64_t ci = co / mult;
    const T* xp = x + (static_cast<int64_t>(n) * p.c_in + ci) * p.h_in * p.w_in;
    const T* wp = w + static_cast<int64_t>(co) * p.kh * p.kw;
    float acc = 0.f;
    for (int ky = 0; ky < p.kh; ++ky) {
      const int64_t iy = static_cast<int64_t>(oy) * p.stride_h - p.pad_t + static_cast<int64_t>(ky) * p.dil_h;
      if (iy < 0 || iy >= p.h_in) continue;
      for (int kx = 0; kx < p.kw; ++kx) {
        const int64_t ix = static_cast<int64_t>(ox) * p.stride_w - p.pad_l + static_cast<int64_t>(kx) * p.dil_w;
        if (ix < 0 || ix >= p.w_in) continue;
        acc = fmaf(ToF(xp[iy * p.w_in + ix]), ToF(wp[ky * p.kw + kx]), acc);
      }
    }
    if (bias != nullptr) acc += ToF(bias[co]);
    if (res != nullptr && !p.residual_after_act) acc += ToF(res[i]);
    acc = ApplyAct(p.act, acc);
    if (res != nullptr && p.residual_after_act) acc += ToF(res[i]);
    y[i] = FromF<T>(acc);
  }
}

// ---- ConvTranspose2d: gather per output element ----

template <typename T>
__global__ void __launch_bounds__(kThreads)
ConvTransposeKernel(engine::ConvTranspose2dParams p, const T* __restrict__ x, const T* __restrict__ w,
                    const T* __restrict__ bias, T* __restrict__ y) {
  const int64_t total = p.n * p.c_out * p.h_out * p.w_out;
  const int64_t cin_g = p.c_in / p.groups, cout_g = p.c_out / p.groups;
  FM_GRID_STRIDE(i, total) {
    const int64_t ox = i % p.w_out;
    int64_t t = i / p.w_out;
    const int64_t oy = t % p.h_out;
    t /= p.h_out;
    const int64_t co = t % p.c_out;
    const int64_t n = t / p.c_out;
    const int64_t grp = co / cout_g, col = co - grp * cout_g;
    float acc = 0.f;
    for (int ky = 0; ky < p.kh; ++ky) {
      const int64_t ty = oy + p.pad_t - static_cast<int64_t>(ky) * p.dil_h;
      if (ty < 0 || ty % p.stride_h != 0) continue;
      const int64_t iy = ty / p.stride_h;
      if (iy >= p.h_in) continue;
      for (int kx = 0; kx < p.kw; ++kx) {
        const int64_t tx = ox + p.pad_l - static_cast<int64_t>(kx) * p.dil_w;
        if (tx < 0 || tx % p.stride_w != 0) continue;
        const int64_t ix = tx / p.stride_w;
        if (ix >= p.w_in) continue;
        for (int64_t c = 0; c < cin_g; ++c) {
          const int64_t ci = grp * cin_g + c;
          acc = fmaf(ToF(x[((n * p.c_in + ci) * p.h_in + iy) * p.w_in + ix]),
                     ToF(w[((ci * cout_g + col) * p.kh + ky) * p.kw + kx]), acc);
        }
      }
    }
    if (bias != nullptr) acc += ToF(bias[co]);
    y[i] = FromF<T>(ApplyAct(p.act, acc));
  }
}

}  // namespace

Status CudaKernels::Conv2d(const engine::Conv2dParams& p, const void* x, const void* w, const void* bias,
                           const void* residual, void* y, void* scratch) {
  FM_RETURN_IF_ERROR(Enter("Conv2d"));
  if (!Positive({p.n, p.c_in, p.h_in, p.w_in, p.c_out, p.h_out, p.w_out, p.kh, p.kw, p.stride_h, p.stride_w,
                 p.dil_h, p.dil_w, p.groups}) ||
      p.c_in % p.groups != 0 || p.c_out % p.groups != 0) {
    return Status::InvalidArgument(name() + ": Conv2d with bad params: in " + Dims({p.n, p.c_in, p.h_in, p.w_in}) +
                                   " out " + Dims({p.c_out, p.h_out, p.w_out}) + " groups " +
                                   std::to_string(p.groups));
  }
  auto stream = static_cast<cudaStream_t>(stream_);
  const int64_t cin_g = p.c_in / p.groups, cout_g = p.c_out / p.groups;
  if (cin_g == 1 && p.groups > 1) {
    const int64_t total = p.n * p.c_out * p.h_out * p.w_out;
    if (total < (int64_t{1} << 31)) {
      FM_DISPATCH((DepthwiseKernel<T, int32_t><<<Blocks(total), kThreads, 0, stream>>>(
          p, cout_g, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias),
          static_cast<const T*>(residual), static_cast<T*>(y))));
    } else {
      FM_DISPATCH((DepthwiseKernel<T, int64_t><<<Blocks(total), kThreads, 0, stream>>>(
          p, cout_g, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias),
          static_cast<const T*>(residual), static_cast<T*>(y))));
    }
    return Launched("Conv2d (depthwise)");
  }
  if (cin_g * p.kh * p.kw > (int64_t{1} << 30))
    return Status::Unsupported(name() + ": Conv2d with c_in/groups*kh*kw over 2^30");
  GemmArgs g;
  g.M = cout_g;
  g.N = p.n * p.h_out * p.w_out;
  g.K = cin_g * p.kh * p.kw;
  g.c_in = p.c_in;
  g.h_in = p.h_in;
  g.w_in = p.w_in;
  g.c_out = p.c_out;
  g.h_out = p.h_out;
  g.w_out = p.w_out;
  g.cin_g = cin_g;
  g.kh = p.kh;
  g.kw = p.kw;
  g.sh = p.stride_h;
  g.sw = p.stride_w;
  g.pt = p.pad_t;
  g.pl = p.pad_l;
  g.dh = p.dil_h;
  g.dw = p.dil_w;
  g.residual_after_act = p.residual_after_act;
  g.act = p.act;
  g.a = w;
  g.b = x;
  g.bias = bias;
  g.residual = residual;
  g.y = y;
  const bool pointwise = p.kh == 1 && p.kw == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_t == 0 &&
                         p.pad_l == 0 && p.h_out == p.h_in && p.w_out == p.w_in;
  cudaError_t err;
  if (pointwise) {
    FM_DISPATCH((err = LaunchAnyGemm<T, kConvPointwise>(g, p.groups, tensor_cores_, stream)));
  } else {
    FM_DISPATCH((err = LaunchAnyGemm<T, kConvGeneral>(g, p.groups, tensor_cores_, stream)));
  }
  FM_CUDA_RETURN_IF_ERROR(err, name() + ": Conv2d " + Dims({p.n, p.c_in, p.h_in, p.w_in}) + " -> " +
                                   Dims({p.c_out, p.h_out, p.w_out}));
  return Status::OK();
}

Status CudaKernels::ConvTranspose2d(const engine::ConvTranspose2dParams& p, const void* x, const void* w,
                                    const void* bias, void* y, void* scratch) {
  FM_RETURN_IF_ERROR(Enter("ConvTranspose2d"));
  if (!Positive({p.n, p.c_in, p.h_in, p.w_in, p.c_out, p.h_out, p.w_out, p.kh, p.kw, p.stride_h, p.stride_w,
                 p.dil_h, p.dil_w, p.groups}) ||
      p.c_in % p.groups != 0 || p.c_out % p.groups != 0) {
    return Status::InvalidArgument(name() + ": ConvTranspose2d with bad params");
  }
  const int64_t total = p.n * p.c_out * p.h_out * p.w_out;
  FM_DISPATCH((ConvTransposeKernel<T><<<Blocks(total), kThreads, 0, static_cast<cudaStream_t>(stream_)>>>(
      p, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias), static_cast<T*>(y))));
  return Launched("ConvTranspose2d");
}

Status CudaKernels::MatMul(const engine::MatMulParams& p, const void* a, const void* b, const void* c, void* y,
                           void* scratch) {
  FM_RETURN_IF_ERROR(Enter("MatMul"));
  if (p.batch < 0 || p.m < 0 || p.n < 0 || p.k < 0) return Status::InvalidArgument(name() + ": MatMul bad params");
  if (p.batch * p.m * p.n == 0) return Status::OK();
  if (p.k == 0) {
    return Status::Unsupported(name() + ": MatMul with k == 0");
  }
  GemmArgs g;
  g.M = p.m;
  g.N = p.n;
  g.K = p.k;
  g.trans_a = p.trans_a;
  g.a_batch_stride = p.a_batch_stride;
  g.b_batch_stride = p.b_batch_stride;
  g.c_stride_m = p.c_stride_m;
  g.c_stride_n = p.c_stride_n;
  g.alpha = p.alpha;
  g.beta = p.beta;
  g.act = p.act;
  g.a = a;
  g.b = b;
  g.bias = c;
  g.y = y;
  auto stream = static_cast<cudaStream_t>(stream_);
  cudaError_t err;
  if (p.trans_b) {
    FM_DISPATCH((err = LaunchAnyGemm<T, kMatMulNT>(g, p.batch, tensor_cores_, stream)));
  } else {
    FM_DISPATCH((err = LaunchAnyGemm<T, kMatMulNN>(g, p.batch, tensor_cores_, stream)));
  }
  FM_CUDA_RETURN_IF_ERROR(err, name() + ": MatMul " + Dims({p.batch, p.m, p.n, p.k}));
  return Status::OK();
}

}  // namespace framemill::engine::cuda
