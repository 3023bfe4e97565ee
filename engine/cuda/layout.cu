// The engine's kernels that move data on a CUDA device (common.cuh): pad, transpose,
// slice, concat, copy.
#include "engine/cuda/common.cuh"

namespace framemill::engine::cuda {
namespace {

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

}  // namespace

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

Status CudaKernels::Copy(const void* src, void* dst, int64_t elements) {
  FM_RETURN_IF_ERROR(Enter("Copy"));
  if (elements <= 0 || src == dst) return Status::OK();
  const size_t bytes = static_cast<size_t>(elements) * engine::StorageBytes(storage_);
  FM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream_)),
      name() + ": Copy");
  return Status::OK();
}

}  // namespace framemill::engine::cuda
