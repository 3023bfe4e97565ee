// What the engine's CUDA kernel files share (engine_gemm.cu, engine_elementwise.cu,
// engine_layout.cu, engine_reduce.cu; engine_kernels.cu holds CudaKernels' lifecycle): element
// access and conversion, the fused activations, grid sizing, the dispatch on the storage type,
// and the host's argument checks. Included by .cu files only.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/cuda/cuda_status.h"
#include "engine/cuda/cuda_kernels.h"

namespace framemill::engine::cuda {

using engine::Activation;
using engine::ActivationParams;
using engine::kMaxRank;

inline constexpr int kThreads = 256;

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
    case Activation::kSwish: return x / (1.f + expf(-x));
    default: return x;
  }
}

// Grid size for a grid-stride loop over `total` items.
inline unsigned Blocks(int64_t total, int threads = kThreads) {
  const int64_t b = (total + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(b, int64_t{1} << 20)));
}

#define FM_GRID_STRIDE(i, total)                                                           \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (total); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// ---- host helpers ----

inline std::string Dims(std::initializer_list<int64_t> d) {
  std::string s;
  for (int64_t v : d) s += (s.empty() ? "" : "x") + std::to_string(v);
  return s;
}

inline bool Positive(std::initializer_list<int64_t> v) {
  for (int64_t x : v)
    if (x <= 0) return false;
  return true;
}

inline bool Aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }


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


}  // namespace framemill::engine::cuda
