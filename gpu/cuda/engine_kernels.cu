// The inference engine's kernels on a CUDA device (see engine_kernels.h), written
// against the semantics stated in gpu/engine/kernels.h and checked against CpuKernels
// by tests/gpu/device/engine_kernels_test.cc.
//
// Storage is fp32 or IEEE half (template T = float / __half); every kernel converts to
// float on load and accumulates in float.
// - Conv2d: implicit GEMM (no im2col buffer): C[c_out/g, n*h_out*w_out] = W[c_out/g,
//   c_in/g*kh*kw] x im2col(x), gathered tile by tile into shared memory, 64x64x16 tiles,
//   256 threads with a 4x4 register block each, next tile prefetched into registers
//   while the current one is multiplied; a 1x1/stride-1/no-pad variant reads the input
//   as a plain [c, h*w] matrix. Bias, residual and activation are fused into the store.
//   Convolutions with one input channel per group (depthwise) have their own direct
//   kernel: the GEMM would be 1 deep.
//   With fp16 storage the GEMM runs on tensor cores (WMMA 16x16x16, fp32 accumulators,
//   same tiles and gathers, 4 warps of 32x32) unless the object was made with
//   tensor_cores = false; the float SIMT kernel stays the fallback and is tested too.
// - MatMul/Gemm: the same tiled GEMM with plain (optionally transposed) operands.
// - ConvTranspose2d: a gather per output element (small in these models).
// - The rest: one thread per output element (grid-stride), or one warp per row for
//   reductions over a contiguous axis (Reduce, Softmax, ArgMax with inner == 1).
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu/cuda/cuda_status.h"
#include "gpu/cuda/engine_kernels.h"
#include "gpu/engine/cuda_kernels_factory.h"

namespace framemill::gpu {
namespace cuda {
namespace {

using engine::Activation;
using engine::ActivationParams;
using engine::kMaxRank;

constexpr int kThreads = 256;

// ---- element access ----

__device__ __forceinline__ float ToF(float v) { return v; }
__device__ __forceinline__ float ToF(__half v) { return __half2float(v); }
template <typename T>
__device__ __forceinline__ T FromF(float v);
template <>
__device__ __forceinline__ float FromF<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half FromF<__half>(float v) { return __float2half_rn(v); }

__device__ __forceinline__ float ApplyAct(const ActivationParams& a, float x) {
  switch (a.kind) {
    case Activation::kRelu: return x > 0.f ? x : 0.f;
    case Activation::kClip: return fminf(fmaxf(x, a.lo), a.hi);
    case Activation::kSigmoid: return 1.f / (1.f + expf(-x));
    case Activation::kLeakyRelu: return x >= 0.f ? x : a.alpha * x;
    case Activation::kTanh: return tanhf(x);
    default: return x;
  }
}

// Grid size for a grid-stride loop over `total` items.
unsigned Blocks(int64_t total, int threads = kThreads) {
  const int64_t b = (total + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(b, int64_t{1} << 20)));
}

#define FM_GRID_STRIDE(i, total)                                                           \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (total); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

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
    int64_t out_base = 0, img = 0, p = 0;
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
      (void)out_base;
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

// ---- Pool2d ----

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
PoolKernel(engine::Pool2dParams p, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t total = p.n * p.c * p.h_out * p.w_out;
  FM_GRID_STRIDE(i, total) {
    const I w_out = static_cast<I>(p.w_out), h_out = static_cast<I>(p.h_out);
    const int64_t ox = static_cast<I>(i) % w_out;
    const I t = static_cast<I>(i) / w_out;
    const int64_t oy = t % h_out;
    const int64_t plane = t / h_out;
    const T* xp = x + plane * p.h_in * p.w_in;
    const bool is_max = p.kind == engine::PoolKind::kMax;
    float acc = is_max ? -INFINITY : 0.f;
    int64_t taps = 0;
    for (int ky = 0; ky < p.kh; ++ky) {
      const int64_t iy = oy * p.stride_h - p.pad_t + static_cast<int64_t>(ky) * p.dil_h;
      if (iy < 0 || iy >= p.h_in) continue;
      for (int kx = 0; kx < p.kw; ++kx) {
        const int64_t ix = ox * p.stride_w - p.pad_l + static_cast<int64_t>(kx) * p.dil_w;
        if (ix < 0 || ix >= p.w_in) continue;
        const float v = ToF(xp[iy * p.w_in + ix]);
        acc = is_max ? fmaxf(acc, v) : acc + v;
        ++taps;
      }
    }
    float out;
    if (is_max) {
      out = acc;
    } else if (p.count_include_pad) {
      // ONNX counts the taps on the padding, but not those past the padded border
      // (the last windows of ceil_mode).
      const int64_t y0 = oy * p.stride_h - p.pad_t, x0 = ox * p.stride_w - p.pad_l;
      const int64_t y1 = min(y0 + static_cast<int64_t>(p.kh - 1) * p.dil_h + 1, p.h_in + p.pad_b);
      const int64_t x1 = min(x0 + static_cast<int64_t>(p.kw - 1) * p.dil_w + 1, p.w_in + p.pad_r);
      const int64_t ny = (y1 - y0 + p.dil_h - 1) / p.dil_h, nx = (x1 - x0 + p.dil_w - 1) / p.dil_w;
      out = acc / static_cast<float>(max(int64_t{1}, ny * nx));
    } else {
      out = taps > 0 ? acc / static_cast<float>(taps) : 0.f;
    }
    y[i] = FromF<T>(out);
  }
}

// ---- Binary (broadcast) ----

struct BinaryArgs {
  engine::BinaryOp op;
  int32_t rank;
  int64_t dims[kMaxRank];
  int64_t sa[kMaxRank], sb[kMaxRank];
  ActivationParams act;
};

__device__ __forceinline__ float ApplyBinary(engine::BinaryOp op, float a, float b) {
  switch (op) {
    case engine::BinaryOp::kAdd: return a + b;
    case engine::BinaryOp::kSub: return a - b;
    case engine::BinaryOp::kMul: return a * b;
    case engine::BinaryOp::kDiv: return a / b;
    case engine::BinaryOp::kMax: return fmaxf(a, b);
    case engine::BinaryOp::kMin: return fminf(a, b);
    case engine::BinaryOp::kPow: return powf(a, b);
  }
  return 0.f;
}

// No __restrict__: out may alias a.
template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
BinaryKernel(BinaryArgs p, int64_t total, const T* a, const T* b, T* out) {
  FM_GRID_STRIDE(i, total) {
    I oa = 0, ob = 0, t = static_cast<I>(i);
    for (int d = p.rank - 1; d >= 0; --d) {
      const I dim = static_cast<I>(p.dims[d]);
      const I k = t % dim;
      t /= dim;
      oa += k * static_cast<I>(p.sa[d]);
      ob += k * static_cast<I>(p.sb[d]);
    }
    out[i] = FromF<T>(ApplyAct(p.act, ApplyBinary(p.op, ToF(a[oa]), ToF(b[ob]))));
  }
}

// Both operands dense with out's dims (the common residual add): no index arithmetic.
template <typename T>
__global__ void __launch_bounds__(kThreads)
BinaryDenseKernel(engine::BinaryOp op, ActivationParams act, int64_t total, const T* a, const T* b, T* out) {
  FM_GRID_STRIDE(i, total) out[i] = FromF<T>(ApplyAct(act, ApplyBinary(op, ToF(a[i]), ToF(b[i]))));
}

// The fp16 form of the above, two elements per thread through half2 (total even,
// pointers 4-byte aligned).
__global__ void __launch_bounds__(kThreads)
BinaryDenseHalf2Kernel(engine::BinaryOp op, ActivationParams act, int64_t pairs, const __half2* a,
                       const __half2* b, __half2* out) {
  FM_GRID_STRIDE(i, pairs) {
    const float2 x = __half22float2(a[i]), y = __half22float2(b[i]);
    out[i] = __floats2half2_rn(ApplyAct(act, ApplyBinary(op, x.x, y.x)), ApplyAct(act, ApplyBinary(op, x.y, y.y)));
  }
}

// ---- Unary ----

__device__ __forceinline__ float ApplyUnary(const engine::UnaryParams& p, float x) {
  using engine::UnaryOp;
  switch (p.op) {
    case UnaryOp::kIdentity: return x;
    case UnaryOp::kRelu: return x > 0.f ? x : 0.f;
    case UnaryOp::kClip: return fminf(fmaxf(x, p.lo), p.hi);
    case UnaryOp::kSigmoid: return 1.f / (1.f + expf(-x));
    case UnaryOp::kLeakyRelu: return x >= 0.f ? x : p.alpha * x;
    case UnaryOp::kTanh: return tanhf(x);
    case UnaryOp::kAbs: return fabsf(x);
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kSqrt: return sqrtf(x);
    case UnaryOp::kRsqrt: return 1.f / sqrtf(x);
    case UnaryOp::kExp: return expf(x);
    case UnaryOp::kLog: return logf(x);
    case UnaryOp::kSquare: return x * x;
    case UnaryOp::kReciprocal: return 1.f / x;
    case UnaryOp::kFloor: return floorf(x);
    case UnaryOp::kCeil: return ceilf(x);
    case UnaryOp::kPowScalar: return powf(x, p.alpha);
    case UnaryOp::kAffine: return x * p.alpha + p.beta;
    case UnaryOp::kHardSigmoid: return fmaxf(0.f, fminf(1.f, p.alpha * x + p.beta));
    case UnaryOp::kHardSwish: return x * fmaxf(0.f, fminf(1.f, x / 6.f + 0.5f));
    case UnaryOp::kErf: return erff(x);
  }
  return x;
}

// No __restrict__: y may alias x.
template <typename T>
__global__ void __launch_bounds__(kThreads) UnaryKernel(engine::UnaryParams p, const T* x, T* y) {
  FM_GRID_STRIDE(i, p.count) y[i] = FromF<T>(ApplyUnary(p, ToF(x[i])));
}

__global__ void __launch_bounds__(kThreads)
UnaryHalf2Kernel(engine::UnaryParams p, int64_t pairs, const __half2* x, __half2* y) {
  FM_GRID_STRIDE(i, pairs) {
    const float2 v = __half22float2(x[i]);
    y[i] = __floats2half2_rn(ApplyUnary(p, v.x), ApplyUnary(p, v.y));
  }
}

// ---- Resize ----

__device__ __forceinline__ float SourceCoord(engine::ResizeCoord mode, int64_t o, float scale, int64_t in,
                                             int64_t out) {
  using engine::ResizeCoord;
  const float of = static_cast<float>(o);
  switch (mode) {
    case ResizeCoord::kHalfPixel: return (of + 0.5f) / scale - 0.5f;
    case ResizeCoord::kPytorchHalfPixel: return out > 1 ? (of + 0.5f) / scale - 0.5f : 0.f;
    case ResizeCoord::kAlignCorners:
      return out == 1 ? 0.f : of * static_cast<float>(in - 1) / static_cast<float>(out - 1);
    case ResizeCoord::kAsymmetric: return of / scale;
    case ResizeCoord::kTfHalfPixelForNn: return (of + 0.5f) / scale;
  }
  return of;
}

__device__ __forceinline__ int64_t NearestIndex(engine::ResizeNearest mode, float s, int64_t in) {
  using engine::ResizeNearest;
  const float fl = floorf(s);
  float r;
  switch (mode) {
    case ResizeNearest::kRoundPreferFloor: r = (s - fl == 0.5f) ? fl : roundf(s); break;
    case ResizeNearest::kRoundPreferCeil: r = (s - fl == 0.5f) ? fl + 1.f : roundf(s); break;
    case ResizeNearest::kFloor: r = fl; break;
    default: r = ceilf(s); break;
  }
  int64_t i = static_cast<int64_t>(r);
  return i < 0 ? 0 : (i > in - 1 ? in - 1 : i);
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
ResizeKernel(engine::ResizeParams p, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t total = p.planes * p.h_out * p.w_out;
  FM_GRID_STRIDE(i, total) {
    const I w_out = static_cast<I>(p.w_out), h_out = static_cast<I>(p.h_out);
    const int64_t ox = static_cast<I>(i) % w_out;
    const I t = static_cast<I>(i) / w_out;
    const int64_t oy = t % h_out;
    const int64_t plane = t / h_out;
    const T* xp = x + plane * p.h_in * p.w_in;
    const float sy = SourceCoord(p.coord, oy, p.scale_h, p.h_in, p.h_out);
    const float sx = SourceCoord(p.coord, ox, p.scale_w, p.w_in, p.w_out);
    float v;
    if (p.mode == engine::ResizeMode::kNearest) {
      v = ToF(xp[NearestIndex(p.nearest, sy, p.h_in) * p.w_in + NearestIndex(p.nearest, sx, p.w_in)]);
    } else {
      const float cy = fminf(fmaxf(sy, 0.f), static_cast<float>(p.h_in - 1));
      const float cx = fminf(fmaxf(sx, 0.f), static_cast<float>(p.w_in - 1));
      const int64_t y0 = static_cast<int64_t>(floorf(cy)), x0 = static_cast<int64_t>(floorf(cx));
      const int64_t y1 = y0 + 1 < p.h_in ? y0 + 1 : p.h_in - 1;
      const int64_t x1 = x0 + 1 < p.w_in ? x0 + 1 : p.w_in - 1;
      const float fy = cy - static_cast<float>(y0), fx = cx - static_cast<float>(x0);
      const float v00 = ToF(xp[y0 * p.w_in + x0]), v01 = ToF(xp[y0 * p.w_in + x1]);
      const float v10 = ToF(xp[y1 * p.w_in + x0]), v11 = ToF(xp[y1 * p.w_in + x1]);
      const float top = v00 + (v01 - v00) * fx, bot = v10 + (v11 - v10) * fx;
      v = top + (bot - top) * fy;
    }
    y[i] = FromF<T>(v);
  }
}

// ---- Pad, Transpose, Slice: index maps over up to kMaxRank dims ----

template <typename T>
__global__ void __launch_bounds__(kThreads)
PadKernel(engine::PadParams p, int64_t total, const T* __restrict__ x, T* __restrict__ y) {
  FM_GRID_STRIDE(i, total) {
    int64_t t = i, off = 0, stride = 1;
    bool inside = true;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t n = p.in_dims[d];
      const int64_t od = n + p.before[d] + p.after[d];
      int64_t k = t % od - p.before[d];
      t /= od;
      if (k < 0 || k >= n) {
        if (p.mode == engine::PadMode::kConstant) {
          inside = false;
        } else if (p.mode == engine::PadMode::kEdge) {
          k = k < 0 ? 0 : n - 1;
        } else if (n == 1) {
          k = 0;
        } else {
          // Reflect without repeating the edge; repeated for pads longer than the axis.
          const int64_t period = 2 * (n - 1);
          k = k % period;
          if (k < 0) k += period;
          if (k >= n) k = period - k;
        }
      }
      off += k * stride;
      stride *= n;
    }
    y[i] = inside ? x[off] : FromF<T>(p.value);
  }
}

struct TransposeArgs {
  int32_t rank;
  int64_t out_dims[kMaxRank];
  int64_t in_strides[kMaxRank];  // the input stride of each output axis
};

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
TransposeKernel(TransposeArgs p, int64_t total, const T* __restrict__ x, T* __restrict__ y) {
  FM_GRID_STRIDE(i, total) {
    I t = static_cast<I>(i), off = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const I dim = static_cast<I>(p.out_dims[d]);
      off += (t % dim) * static_cast<I>(p.in_strides[d]);
      t /= dim;
    }
    y[i] = x[off];
  }
}

struct SliceArgs {
  int32_t rank;
  int64_t out_dims[kMaxRank];
  int64_t in_strides[kMaxRank];  // already times the step
  int64_t base;
};

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
SliceKernel(SliceArgs p, int64_t total, const T* __restrict__ x, T* __restrict__ y) {
  FM_GRID_STRIDE(i, total) {
    I t = static_cast<I>(i), off = static_cast<I>(p.base);
    for (int d = p.rank - 1; d >= 0; --d) {
      const I dim = static_cast<I>(p.out_dims[d]);
      off += (t % dim) * static_cast<I>(p.in_strides[d]);
      t /= dim;
    }
    y[i] = x[off];
  }
}

// Copies x [outer, width] into the columns [col0, col0 + width) of y [outer, row].
template <typename T>
__global__ void __launch_bounds__(kThreads)
ConcatKernel(int64_t outer, int64_t width, int64_t row, int64_t col0, const T* __restrict__ x,
             T* __restrict__ y) {
  FM_GRID_STRIDE(i, outer * width) {
    const int64_t o = i / width, c = i - o * width;
    y[o * row + col0 + c] = x[i];
  }
}

// ---- reductions over the middle axis of [outer, axis, inner] ----

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float WarpMin(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float ReduceInit(engine::ReduceOp op) {
  if (op == engine::ReduceOp::kMax) return -INFINITY;
  if (op == engine::ReduceOp::kMin) return INFINITY;
  return 0.f;
}
__device__ __forceinline__ float ReduceStep(engine::ReduceOp op, float acc, float v) {
  switch (op) {
    case engine::ReduceOp::kMax: return fmaxf(acc, v);
    case engine::ReduceOp::kMin: return fminf(acc, v);
    case engine::ReduceOp::kSumSquare:
    case engine::ReduceOp::kL2: return fmaf(v, v, acc);
    default: return acc + v;
  }
}
__device__ __forceinline__ float ReduceFinish(engine::ReduceOp op, float acc, int64_t n) {
  if (op == engine::ReduceOp::kMean) return acc / static_cast<float>(n);
  if (op == engine::ReduceOp::kL2) return sqrtf(acc);
  return acc;
}

constexpr int kWarpsPerBlock = kThreads / 32;

// inner == 1: one warp per row.
template <typename T>
__global__ void __launch_bounds__(kThreads)
ReduceRowsKernel(engine::ReduceOp op, int64_t rows, int64_t len, const T* __restrict__ x, T* __restrict__ y) {
  const int lane = threadIdx.x & 31;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock) {
    const T* xp = x + r * len;
    float acc = ReduceInit(op);
    for (int64_t k = lane; k < len; k += 32) acc = ReduceStep(op, acc, ToF(xp[k]));
    if (op == engine::ReduceOp::kMax) {
      acc = WarpMax(acc);
    } else if (op == engine::ReduceOp::kMin) {
      acc = WarpMin(acc);
    } else {
      acc = WarpSum(acc);
    }
    if (lane == 0) y[r] = FromF<T>(ReduceFinish(op, acc, len));
  }
}

// inner > 1: one thread per output, reading along the axis with stride inner
// (neighbouring threads read neighbouring addresses).
template <typename T>
__global__ void __launch_bounds__(kThreads)
ReduceColsKernel(engine::ReduceParams p, const T* __restrict__ x, T* __restrict__ y) {
  FM_GRID_STRIDE(i, p.outer * p.inner) {
    const int64_t o = i / p.inner, in = i - o * p.inner;
    const T* xp = x + o * p.reduce * p.inner + in;
    float acc = ReduceInit(p.op);
    for (int64_t k = 0; k < p.reduce; ++k) acc = ReduceStep(p.op, acc, ToF(xp[k * p.inner]));
    y[i] = FromF<T>(ReduceFinish(p.op, acc, p.reduce));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
SoftmaxRowsKernel(int64_t rows, int64_t len, bool log_out, const T* __restrict__ x, T* __restrict__ y) {
  const int lane = threadIdx.x & 31;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock) {
    const T* xp = x + r * len;
    T* yp = y + r * len;
    float mx = -INFINITY;
    for (int64_t k = lane; k < len; k += 32) mx = fmaxf(mx, ToF(xp[k]));
    mx = WarpMax(mx);
    float sum = 0.f;
    for (int64_t k = lane; k < len; k += 32) sum += expf(ToF(xp[k]) - mx);
    sum = WarpSum(sum);
    const float inv = 1.f / sum, lsum = logf(sum);
    for (int64_t k = lane; k < len; k += 32) {
      const float d = ToF(xp[k]) - mx;
      yp[k] = FromF<T>(log_out ? d - lsum : expf(d) * inv);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
SoftmaxColsKernel(engine::SoftmaxParams p, const T* __restrict__ x, T* __restrict__ y) {
  FM_GRID_STRIDE(i, p.outer * p.inner) {
    const int64_t o = i / p.inner, in = i - o * p.inner;
    const int64_t base = o * p.axis * p.inner + in;
    float mx = -INFINITY;
    for (int64_t k = 0; k < p.axis; ++k) mx = fmaxf(mx, ToF(x[base + k * p.inner]));
    float sum = 0.f;
    for (int64_t k = 0; k < p.axis; ++k) sum += expf(ToF(x[base + k * p.inner]) - mx);
    const float inv = 1.f / sum, lsum = logf(sum);
    for (int64_t k = 0; k < p.axis; ++k) {
      const float d = ToF(x[base + k * p.inner]) - mx;
      y[base + k * p.inner] = FromF<T>(p.log ? d - lsum : expf(d) * inv);
    }
  }
}

// ArgMax: the first index of the maximum; a NaN never wins.
template <typename T>
__global__ void __launch_bounds__(kThreads)
ArgMaxRowsKernel(int64_t rows, int64_t len, const T* __restrict__ x, T* __restrict__ y) {
  const int lane = threadIdx.x & 31;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kWarpsPerBlock) {
    const T* xp = x + r * len;
    float best = -INFINITY;
    long long at = len;  // "none yet": larger than any index
    for (int64_t k = lane; k < len; k += 32) {
      const float v = ToF(xp[k]);
      if (v > best || (at == len && v == best)) {
        best = v;
        at = k;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const long long oa = __shfl_xor_sync(0xffffffffu, at, o);
      if (ob > best || (ob == best && oa < at)) {
        best = ob;
        at = oa;
      }
    }
    if (lane == 0) y[r] = FromF<T>(static_cast<float>(at == len ? 0 : at));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
ArgMaxColsKernel(engine::ArgMaxParams p, const T* __restrict__ x, T* __restrict__ y) {
  FM_GRID_STRIDE(i, p.outer * p.inner) {
    const int64_t o = i / p.inner, in = i - o * p.inner;
    const T* xp = x + o * p.axis * p.inner + in;
    float best = -INFINITY;
    int64_t at = -1;
    for (int64_t k = 0; k < p.axis; ++k) {
      const float v = ToF(xp[k * p.inner]);
      if (v > best || (at < 0 && v == best)) {
        best = v;
        at = k;
      }
    }
    y[i] = FromF<T>(static_cast<float>(at < 0 ? 0 : at));
  }
}

// ---- host helpers ----

std::string Dims(std::initializer_list<int64_t> d) {
  std::string s;
  for (int64_t v : d) s += (s.empty() ? "" : "x") + std::to_string(v);
  return s;
}

bool Positive(std::initializer_list<int64_t> v) {
  for (int64_t x : v)
    if (x <= 0) return false;
  return true;
}

bool Aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

}  // namespace

// ---- CudaKernels ----

Result<std::unique_ptr<CudaKernels>> CudaKernels::Create(int device, int64_t memory_limit_bytes,
                                                         bool tensor_cores) {
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    return FromCuda(err, "cudaGetDeviceCount");  // Unsupported: no driver / no device
  }
  if (device < 0 || device >= count) {
    return Status::NotFound("cuda:" + std::to_string(device) + ": no such device (" + std::to_string(count) +
                            " CUDA device(s) visible)");
  }
  std::unique_ptr<CudaKernels> k(new CudaKernels(device));
  FM_RETURN_IF_ERROR(k->Init());
  k->SetMemoryLimit(memory_limit_bytes);
  k->tensor_cores_ = tensor_cores && k->cc_major_ >= 7;
  return Result<std::unique_ptr<CudaKernels>>(std::move(k));
}

Status CudaKernels::Init() {
  const std::string what = name() + ": init";
  FM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), what);
  cudaDeviceProp props{};
  FM_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, device_), what);
  sms_ = std::max(1, props.multiProcessorCount);
  cc_major_ = props.major;
  cudaStream_t s = nullptr;
  FM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), what);
  stream_ = s;
  return Status::OK();
}

CudaKernels::~CudaKernels() {
  if (cudaSetDevice(device_) != cudaSuccess) {
    (void)cudaGetLastError();
    return;  // the runtime is gone (process exit): nothing left to free
  }
  if (stream_ != nullptr) (void)cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  for (auto& [ptr, bytes] : sizes_) (void)cudaFree(ptr);
  if (stream_ != nullptr) (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  (void)cudaGetLastError();
}

std::string CudaKernels::name() const { return "cuda:" + std::to_string(device_); }

Status CudaKernels::Prepare(engine::StorageType storage) {
  if (storage != engine::StorageType::kFloat32 && storage != engine::StorageType::kFloat16)
    return Status::Unsupported(name() + ": unknown storage type");
  storage_ = storage;
  return Status::OK();
}

Status CudaKernels::Enter(const char* what) {
  FM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), name() + ": " + what);
  return Status::OK();
}

Status CudaKernels::Launched(const char* what) {
  FM_CUDA_RETURN_IF_ERROR(cudaGetLastError(), name() + ": " + what);
  return Status::OK();
}

Status CudaKernels::Alloc(size_t bytes, void** out) {
  FM_RETURN_IF_ERROR(Enter("Alloc"));
  const size_t n = std::max<size_t>(bytes, 256);
  if (limit_ > 0 && allocated_ + static_cast<int64_t>(n) > limit_) {
    return Status::OutOfMemory(name() + ": Alloc of " + std::to_string(n) + " bytes with " +
                               std::to_string(allocated_) + " allocated: over the memory limit of " +
                               std::to_string(limit_) + " bytes");
  }
  void* p = nullptr;
  FM_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, n), name() + ": Alloc of " + std::to_string(n) + " bytes");
  sizes_[p] = n;
  allocated_ += static_cast<int64_t>(n);
  peak_ = std::max(peak_, allocated_);
  *out = p;
  return Status::OK();
}

void CudaKernels::Free(void* ptr) {
  if (ptr == nullptr) return;
  auto it = sizes_.find(ptr);
  if (it == sizes_.end()) return;  // not ours: freeing it would corrupt someone else's
  if (cudaSetDevice(device_) == cudaSuccess) {
    // Queued steps may still read or write it.
    (void)cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
    (void)cudaFree(ptr);
  }
  (void)cudaGetLastError();
  allocated_ -= static_cast<int64_t>(it->second);
  sizes_.erase(it);
}

Status CudaKernels::Upload(void* dst, const void* host_src, size_t bytes) {
  FM_RETURN_IF_ERROR(Enter("Upload"));
  if (bytes == 0) return Status::OK();
  // From pageable memory the call returns once the source is staged, so the caller may
  // reuse host_src at once.
  FM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream_)),
      name() + ": Upload");
  return Status::OK();
}

Status CudaKernels::Download(void* host_dst, const void* src, size_t bytes) {
  FM_RETURN_IF_ERROR(Enter("Download"));
  if (bytes == 0) return Status::OK();
  FM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream_)),
      name() + ": Download");
  // The host buffer is the caller's as soon as we return.
  FM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), name() + ": Download");
  return Status::OK();
}

Status CudaKernels::Sync() {
  FM_RETURN_IF_ERROR(Enter("Sync"));
  FM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), name() + ": Sync");
  return Status::OK();
}

// Instantiates `body` with T = float or __half per the storage type.
#define FM_DISPATCH(body)          \
  do {                             \
    if (fp16()) {                  \
      using T = __half;            \
      body;                        \
    } else {                       \
      using T = float;             \
      body;                        \
    }                              \
  } while (0)

// As FM_DISPATCH, plus I = int32_t when every element index of the call fits with room
// to spare (`elements` is the largest tensor; a Slice's partial offsets may reach twice
// it before a negative step brings them back), else int64_t.
#define FM_DISPATCH_I(elements, body)              \
  do {                                             \
    if ((elements) < (int64_t{1} << 30)) {         \
      using I = int32_t;                           \
      FM_DISPATCH(body);                           \
    } else {                                       \
      using I = int64_t;                           \
      FM_DISPATCH(body);                           \
    }                                              \
  } while (0)

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

Status CudaKernels::Pool2d(const engine::Pool2dParams& p, const void* x, void* y) {
  FM_RETURN_IF_ERROR(Enter("Pool2d"));
  if (!Positive({p.n, p.c, p.h_in, p.w_in, p.h_out, p.w_out, p.kh, p.kw, p.stride_h, p.stride_w, p.dil_h,
                 p.dil_w}))
    return Status::InvalidArgument(name() + ": Pool2d with bad params");
  const int64_t total = p.n * p.c * p.h_out * p.w_out;
  FM_DISPATCH_I(std::max(total, p.n * p.c * p.h_in * p.w_in),
                (PoolKernel<T, I><<<Blocks(total), kThreads, 0, static_cast<cudaStream_t>(stream_)>>>(
                    p, static_cast<const T*>(x), static_cast<T*>(y))));
  return Launched("Pool2d");
}

Status CudaKernels::Binary(const engine::BinaryParams& p, const void* a, const void* b, void* out) {
  FM_RETURN_IF_ERROR(Enter("Binary"));
  if (p.rank < 0 || p.rank > kMaxRank) return Status::InvalidArgument(name() + ": Binary rank out of range");
  // Drop size-1 axes and merge neighbours that are contiguous in both operands: most
  // broadcasts become rank 1 or 2.
  BinaryArgs q{};
  q.op = p.op;
  q.act = p.act;
  int64_t total = 1;
  int r = 0;
  for (int d = 0; d < p.rank; ++d) {
    if (p.dims[d] <= 0) return Status::OK();  // empty tensor
    total *= p.dims[d];
    if (p.dims[d] == 1) continue;
    if (r > 0 && q.sa[r - 1] == p.a_strides[d] * p.dims[d] && q.sb[r - 1] == p.b_strides[d] * p.dims[d]) {
      q.dims[r - 1] *= p.dims[d];
      q.sa[r - 1] = p.a_strides[d];
      q.sb[r - 1] = p.b_strides[d];
      continue;
    }
    q.dims[r] = p.dims[d];
    q.sa[r] = p.a_strides[d];
    q.sb[r] = p.b_strides[d];
    ++r;
  }
  if (r == 0) {  // a single element
    q.dims[0] = 1;
    q.sa[0] = q.sb[0] = 0;
    r = 1;
  }
  q.rank = r;
  auto stream = static_cast<cudaStream_t>(stream_);
  const bool dense = r == 1 && q.sa[0] == 1 && q.sb[0] == 1;
  if (dense && fp16() && total % 2 == 0 && Aligned(a, 4) && Aligned(b, 4) && Aligned(out, 4)) {
    BinaryDenseHalf2Kernel<<<Blocks(total / 2), kThreads, 0, stream>>>(
        p.op, p.act, total / 2, static_cast<const __half2*>(a), static_cast<const __half2*>(b),
        static_cast<__half2*>(out));
  } else if (dense) {
    FM_DISPATCH((BinaryDenseKernel<T><<<Blocks(total), kThreads, 0, stream>>>(
        p.op, p.act, total, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out))));
  } else {
    // Broadcast operands are never larger than the output.
    FM_DISPATCH_I(total, (BinaryKernel<T, I><<<Blocks(total), kThreads, 0, stream>>>(
                             q, total, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out))));
  }
  return Launched("Binary");
}

Status CudaKernels::Unary(const engine::UnaryParams& p, const void* x, void* y) {
  FM_RETURN_IF_ERROR(Enter("Unary"));
  if (p.count <= 0) return Status::OK();
  auto stream = static_cast<cudaStream_t>(stream_);
  if (fp16() && p.count % 2 == 0 && Aligned(x, 4) && Aligned(y, 4)) {
    UnaryHalf2Kernel<<<Blocks(p.count / 2), kThreads, 0, stream>>>(p, p.count / 2, static_cast<const __half2*>(x),
                                                                   static_cast<__half2*>(y));
  } else {
    FM_DISPATCH((UnaryKernel<T><<<Blocks(p.count), kThreads, 0, stream>>>(p, static_cast<const T*>(x),
                                                                           static_cast<T*>(y))));
  }
  return Launched("Unary");
}

Status CudaKernels::Resize(const engine::ResizeParams& p, const void* x, void* y) {
  FM_RETURN_IF_ERROR(Enter("Resize"));
  if (!Positive({p.planes, p.h_in, p.w_in, p.h_out, p.w_out}) || !(p.scale_h > 0) || !(p.scale_w > 0))
    return Status::InvalidArgument(name() + ": Resize with bad params");
  const int64_t total = p.planes * p.h_out * p.w_out;
  FM_DISPATCH_I(std::max(total, p.planes * p.h_in * p.w_in),
                (ResizeKernel<T, I><<<Blocks(total), kThreads, 0, static_cast<cudaStream_t>(stream_)>>>(
                    p, static_cast<const T*>(x), static_cast<T*>(y))));
  return Launched("Resize");
}

Status CudaKernels::Pad(const engine::PadParams& p, const void* x, void* y) {
  FM_RETURN_IF_ERROR(Enter("Pad"));
  if (p.rank < 1 || p.rank > kMaxRank) return Status::InvalidArgument(name() + ": Pad rank out of range");
  int64_t total = 1;
  for (int d = 0; d < p.rank; ++d) {
    if (p.in_dims[d] < 0 || p.before[d] < 0 || p.after[d] < 0)
      return Status::InvalidArgument(name() + ": Pad with negative dims or pads");
    if (p.in_dims[d] == 0 && p.mode != engine::PadMode::kConstant && p.before[d] + p.after[d] > 0)
      return Status::InvalidArgument(name() + ": Pad reflect/edge of an empty axis");
    total *= p.in_dims[d] + p.before[d] + p.after[d];
  }
  if (total == 0) return Status::OK();
  FM_DISPATCH((PadKernel<T><<<Blocks(total), kThreads, 0, static_cast<cudaStream_t>(stream_)>>>(
      p, total, static_cast<const T*>(x), static_cast<T*>(y))));
  return Launched("Pad");
}

Status CudaKernels::Concat(const engine::ConcatParams& p, const void* const* inputs, void* y) {
  FM_RETURN_IF_ERROR(Enter("Concat"));
  if (p.count < 0 || (p.count > 0 && (inputs == nullptr || p.axis_sizes == nullptr)) || p.outer < 0 ||
      p.inner < 0)
    return Status::InvalidArgument(name() + ": Concat with bad params");
  int64_t axis_total = 0;
  for (int k = 0; k < p.count; ++k) axis_total += p.axis_sizes[k];
  const int64_t row = axis_total * p.inner;
  auto stream = static_cast<cudaStream_t>(stream_);
  int64_t col0 = 0;
  for (int k = 0; k < p.count; ++k) {
    const int64_t width = p.axis_sizes[k] * p.inner;
    if (width > 0 && p.outer > 0) {
      FM_DISPATCH((ConcatKernel<T><<<Blocks(p.outer * width), kThreads, 0, stream>>>(
          p.outer, width, row, col0, static_cast<const T*>(inputs[k]), static_cast<T*>(y))));
      FM_RETURN_IF_ERROR(Launched("Concat"));
    }
    col0 += width;
  }
  return Status::OK();
}

Status CudaKernels::Transpose(const engine::TransposeParams& p, const void* x, void* y) {
  FM_RETURN_IF_ERROR(Enter("Transpose"));
  if (p.rank < 1 || p.rank > kMaxRank) return Status::InvalidArgument(name() + ": Transpose rank out of range");
  int64_t in_strides[kMaxRank];
  int64_t s = 1;
  for (int d = p.rank - 1; d >= 0; --d) {
    in_strides[d] = s;
    s *= p.in_dims[d];
  }
  TransposeArgs q{};
  q.rank = p.rank;
  bool seen[kMaxRank] = {};
  int64_t total = 1;
  for (int d = 0; d < p.rank; ++d) {
    const int src = p.perm[d];
    if (src < 0 || src >= p.rank || seen[src]) return Status::InvalidArgument(name() + ": Transpose bad perm");
    seen[src] = true;
    q.out_dims[d] = p.in_dims[src];
    q.in_strides[d] = in_strides[src];
    total *= q.out_dims[d];
  }
  if (total <= 0) return Status::OK();
  FM_DISPATCH_I(total, (TransposeKernel<T, I><<<Blocks(total), kThreads, 0, static_cast<cudaStream_t>(stream_)>>>(
                           q, total, static_cast<const T*>(x), static_cast<T*>(y))));
  return Launched("Transpose");
}

Status CudaKernels::Slice(const engine::SliceParams& p, const void* x, void* y) {
  FM_RETURN_IF_ERROR(Enter("Slice"));
  if (p.rank < 1 || p.rank > kMaxRank) return Status::InvalidArgument(name() + ": Slice rank out of range");
  SliceArgs q{};
  q.rank = p.rank;
  int64_t s = 1, total = 1;
  for (int d = p.rank - 1; d >= 0; --d) {
    q.out_dims[d] = p.out_dims[d];
    q.in_strides[d] = s * p.steps[d];
    q.base += s * p.starts[d];
    total *= p.out_dims[d];
    s *= p.in_dims[d];
  }
  if (total <= 0) return Status::OK();
  // s is now the input's element count.
  FM_DISPATCH_I(std::max(total, s), (SliceKernel<T, I><<<Blocks(total), kThreads, 0, static_cast<cudaStream_t>(stream_)>>>(
                                        q, total, static_cast<const T*>(x), static_cast<T*>(y))));
  return Launched("Slice");
}

Status CudaKernels::Reduce(const engine::ReduceParams& p, const void* x, void* y) {
  FM_RETURN_IF_ERROR(Enter("Reduce"));
  if (p.outer < 0 || p.reduce < 1 || p.inner < 0) return Status::InvalidArgument(name() + ": Reduce bad params");
  if (p.outer * p.inner == 0) return Status::OK();
  auto stream = static_cast<cudaStream_t>(stream_);
  if (p.inner == 1) {
    FM_DISPATCH((ReduceRowsKernel<T><<<Blocks(p.outer * 32), kThreads, 0, stream>>>(
        p.op, p.outer, p.reduce, static_cast<const T*>(x), static_cast<T*>(y))));
  } else {
    FM_DISPATCH((ReduceColsKernel<T><<<Blocks(p.outer * p.inner), kThreads, 0, stream>>>(
        p, static_cast<const T*>(x), static_cast<T*>(y))));
  }
  return Launched("Reduce");
}

Status CudaKernels::Softmax(const engine::SoftmaxParams& p, const void* x, void* y) {
  FM_RETURN_IF_ERROR(Enter("Softmax"));
  if (p.outer < 0 || p.axis < 1 || p.inner < 0) return Status::InvalidArgument(name() + ": Softmax bad params");
  if (p.outer * p.inner == 0) return Status::OK();
  auto stream = static_cast<cudaStream_t>(stream_);
  if (p.inner == 1) {
    FM_DISPATCH((SoftmaxRowsKernel<T><<<Blocks(p.outer * 32), kThreads, 0, stream>>>(
        p.outer, p.axis, p.log, static_cast<const T*>(x), static_cast<T*>(y))));
  } else {
    FM_DISPATCH((SoftmaxColsKernel<T><<<Blocks(p.outer * p.inner), kThreads, 0, stream>>>(
        p, static_cast<const T*>(x), static_cast<T*>(y))));
  }
  return Launched("Softmax");
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

Status CudaKernels::ArgMax(const engine::ArgMaxParams& p, const void* x, void* y) {
  FM_RETURN_IF_ERROR(Enter("ArgMax"));
  if (p.outer < 0 || p.axis < 1 || p.inner < 0) return Status::InvalidArgument(name() + ": ArgMax bad params");
  if (p.outer * p.inner == 0) return Status::OK();
  auto stream = static_cast<cudaStream_t>(stream_);
  if (p.inner == 1) {
    FM_DISPATCH((ArgMaxRowsKernel<T><<<Blocks(p.outer * 32), kThreads, 0, stream>>>(
        p.outer, p.axis, static_cast<const T*>(x), static_cast<T*>(y))));
  } else {
    FM_DISPATCH((ArgMaxColsKernel<T><<<Blocks(p.outer * p.inner), kThreads, 0, stream>>>(
        p, static_cast<const T*>(x), static_cast<T*>(y))));
  }
  return Launched("ArgMax");
}

Status CudaKernels::Copy(const void* src, void* dst, int64_t elements) {
  FM_RETURN_IF_ERROR(Enter("Copy"));
  if (elements <= 0 || src == dst) return Status::OK();
  const size_t bytes = static_cast<size_t>(elements) * engine::StorageBytes(storage_);
  FM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream_)),
      name() + ": Copy");
  return Status::OK();
}

#undef FM_DISPATCH_I
#undef FM_DISPATCH

}  // namespace cuda

namespace engine {

Result<std::unique_ptr<Kernels>> MakeCudaKernels(int device, int64_t memory_limit_bytes, bool tensor_cores) {
  auto k = cuda::CudaKernels::Create(device, memory_limit_bytes, tensor_cores);
  if (!k.ok()) return k.status();
  return std::unique_ptr<Kernels>(std::move(k).value());
}

}  // namespace engine
}  // namespace framemill::gpu
