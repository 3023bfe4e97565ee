// The engine's elementwise kernels on a CUDA device (common.cuh): pooling, binary
// ops with broadcasting, unary ops, resize.
#include "engine/cuda/common.cuh"

namespace framemill::engine::cuda {
namespace {

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
    case engine::BinaryOp::kPRelu: return fmaxf(a, 0.f) + b * fminf(a, 0.f);
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

}  // namespace

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

}  // namespace framemill::engine::cuda
