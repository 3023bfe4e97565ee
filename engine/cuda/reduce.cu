// The engine's reductions on a CUDA device (common.cuh): Reduce, Softmax, ArgMax
// over the middle axis of [outer, axis, inner].
#include "engine/cuda/common.cuh"

namespace framemill::engine::cuda {
namespace {

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

}  // namespace

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

}  // namespace framemill::engine::cuda
