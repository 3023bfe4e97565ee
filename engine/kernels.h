// FROZEN: from here on only ADD methods/fields at the end of a struct (the CUDA side is
// written against this). The device interface of the inference engine: the engine
// (engine/engine.h) lowers a graph to steps and calls one virtual per step kind.
// Implementations: CpuKernels (host reference, engine/reference/cpu_kernels.h) and the CUDA
// kernels (gpu/cuda/). No CUDA or OpenCV types here.
//
// Conventions shared by every method:
// - Pointers are device addresses (host addresses for CpuKernels). Every tensor element,
//   activations and weights alike, has the StorageType given to Prepare() (fp32, or
//   IEEE half bits for fp16). All arithmetic accumulates in fp32.
// - Tensors are dense, row-major (NCHW for 4-D); `dims` are element counts, strides are
//   in elements, never bytes.
// - Calls may be asynchronous (queued on one stream); Sync() waits and reports the
//   first error. Inputs and outputs of one call never alias unless stated.
// - Errors are Status values: an allocation the device cannot satisfy returns the
//   implementation's own status (the CUDA side maps it to OutOfMemory); the engine passes
//   it on unchanged.
// Thread-safety: one Kernels object is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace framemill::engine {

enum class StorageType : int32_t { kFloat32 = 0, kFloat16 = 1 };
inline size_t StorageBytes(StorageType t) { return t == StorageType::kFloat32 ? 4 : 2; }

constexpr int kMaxRank = 6;

// Elementwise activation fused after a producing kernel (or run alone by Unary).
enum class Activation : int32_t {
  kNone = 0,
  kRelu,       // max(x, 0)
  kClip,       // min(max(x, lo), hi); Relu6 is Clip(0, 6)
  kSigmoid,    // 1 / (1 + exp(-x))
  kLeakyRelu,  // x >= 0 ? x : alpha * x
  kTanh,
  kSwish,      // x * sigmoid(x) (YOLOv8's Sigmoid -> Mul, fused by the plan)
};

struct ActivationParams {
  Activation kind = Activation::kNone;
  float alpha = 0.01f;   // kLeakyRelu slope
  float lo = 0, hi = 6;  // kClip bounds
};

// y[n, co, oy, ox] = act(sum_{ci in group, ky, kx} x[n, ci, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw]
//                        * w[co, ci - g*cin_g, ky, kx] + bias[co] + residual[n, co, oy, ox])
// (out-of-range taps read 0). Weights OIHW: [c_out, c_in/groups, kh, kw]; depthwise is
// groups == c_in == c_out. `bias` and `residual` may be null. With residual_after_act the
// residual is added after the activation instead: y = act(conv + bias) + residual.
struct Conv2dParams {
  int64_t n = 1, c_in = 0, h_in = 0, w_in = 0;
  int64_t c_out = 0, h_out = 0, w_out = 0;
  int32_t kh = 1, kw = 1;
  int32_t stride_h = 1, stride_w = 1;
  int32_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  int32_t dil_h = 1, dil_w = 1;
  int32_t groups = 1;
  ActivationParams act;
  bool residual_after_act = false;
};

// ONNX ConvTranspose: x [n, c_in, h_in, w_in], weights [c_in, c_out/groups, kh, kw];
// each input pixel scatters w * x to out[oy = iy*sh - pt + ky*dh, ox = ix*sw - pl + kx*dw].
// h_out/w_out are final (output_padding and output_shape already applied by the plan).
// `bias` may be null. Fused activation applies after bias.
struct ConvTranspose2dParams {
  int64_t n = 1, c_in = 0, h_in = 0, w_in = 0;
  int64_t c_out = 0, h_out = 0, w_out = 0;
  int32_t kh = 1, kw = 1;
  int32_t stride_h = 1, stride_w = 1;
  int32_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  int32_t dil_h = 1, dil_w = 1;
  int32_t groups = 1;
  ActivationParams act;
};

enum class PoolKind : int32_t { kMax = 0, kAvg = 1 };

// ONNX MaxPool / AveragePool / Global*Pool over [n*c planes of h_in x w_in]. Taps in the
// padding are ignored by max; avg divides by kh*kw when count_include_pad, else by the
// number of taps inside the input. Output dims are final (ceil_mode already applied).
struct Pool2dParams {
  PoolKind kind = PoolKind::kMax;
  int64_t n = 1, c = 0, h_in = 0, w_in = 0, h_out = 0, w_out = 0;
  int32_t kh = 1, kw = 1;
  int32_t stride_h = 1, stride_w = 1;
  int32_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  int32_t dil_h = 1, dil_w = 1;
  bool count_include_pad = false;
};

// kPRelu: max(a, 0) + b * min(a, 0) (ONNX PRelu, b the slope: a >= 0 ? a : a * b but for the
// sign of a zero), computed as the Relu/Clip/Mul/Add that TF.js converters write for it, so
// that its fused form gives the same floats.
enum class BinaryOp : int32_t { kAdd = 0, kSub, kMul, kDiv, kMax, kMin, kPow, kPRelu };

// out[i] = op(a[i . a_strides], b[i . b_strides]) over the multi-index i of `dims`
// (numpy broadcasting: a broadcast dimension has stride 0). `rank` <= kMaxRank; out is
// dense with `dims`. The result then goes through `act`.
struct BinaryParams {
  BinaryOp op = BinaryOp::kAdd;
  int32_t rank = 1;
  int64_t dims[kMaxRank] = {};
  int64_t a_strides[kMaxRank] = {};
  int64_t b_strides[kMaxRank] = {};
  ActivationParams act;
};

enum class UnaryOp : int32_t {
  kIdentity = 0,
  kRelu, kClip, kSigmoid, kLeakyRelu, kTanh,  // as Activation, parameters alpha / lo, hi
  kAbs, kNeg, kSqrt, kRsqrt, kExp, kLog, kSquare, kReciprocal, kFloor, kCeil,
  kPowScalar,   // pow(x, alpha)
  kAffine,      // x * alpha + beta
  kHardSigmoid, // max(0, min(1, alpha * x + beta))
  kHardSwish,   // x * max(0, min(1, x / 6 + 0.5))
  kErf,
};

struct UnaryParams {
  UnaryOp op = UnaryOp::kIdentity;
  int64_t count = 0;
  float alpha = 0, beta = 0;
  float lo = 0, hi = 6;
};

enum class ResizeMode : int32_t { kNearest = 0, kLinear = 1 };
enum class ResizeCoord : int32_t {
  kHalfPixel = 0,         // x_in = (x_out + 0.5) / scale - 0.5
  kPytorchHalfPixel,      // as half_pixel, but 0 when the output length is 1
  kAlignCorners,          // x_in = x_out * (in - 1) / (out - 1)  (0 when out == 1)
  kAsymmetric,            // x_in = x_out / scale
  kTfHalfPixelForNn,      // x_in = (x_out + 0.5) / scale
};
enum class ResizeNearest : int32_t { kRoundPreferFloor = 0, kRoundPreferCeil, kFloor, kCeil };

// ONNX Resize of the two innermost axes of [planes, h_in, w_in] (planes = n*c).
// scale_* = the ONNX scale (out/in when sizes were given). Linear: bilinear, the source
// coordinate clamped to [0, in-1] (ONNX opset 11 behaviour).
struct ResizeParams {
  ResizeMode mode = ResizeMode::kLinear;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  int64_t planes = 0, h_in = 0, w_in = 0, h_out = 0, w_out = 0;
  float scale_h = 1, scale_w = 1;
};

enum class PadMode : int32_t { kConstant = 0, kReflect, kEdge };

// out has dims in_dims[d] + before[d] + after[d] (before/after >= 0; negative pads are
// lowered to Slice by the plan).
struct PadParams {
  PadMode mode = PadMode::kConstant;
  int32_t rank = 1;
  int64_t in_dims[kMaxRank] = {};
  int64_t before[kMaxRank] = {};
  int64_t after[kMaxRank] = {};
  float value = 0;
};

// Concatenation along one axis, seen as [outer, sum(axis_sizes[k]) * inner].
struct ConcatParams {
  int32_t count = 0;            // number of inputs
  int64_t outer = 1, inner = 1;
  const int64_t* axis_sizes = nullptr;  // host array of `count`
};

// out[j] = in[perm-permuted index]: out dims are in_dims[perm[d]].
struct TransposeParams {
  int32_t rank = 1;
  int64_t in_dims[kMaxRank] = {};
  int32_t perm[kMaxRank] = {};
};

// out[i] = in[start + i * step] per axis (step may be negative; start already clamped).
struct SliceParams {
  int32_t rank = 1;
  int64_t in_dims[kMaxRank] = {};
  int64_t out_dims[kMaxRank] = {};
  int64_t starts[kMaxRank] = {};
  int64_t steps[kMaxRank] = {};
};

enum class ReduceOp : int32_t { kSum = 0, kMean, kMax, kMin, kSumSquare, kL2 };

// Reduces the middle axis of [outer, reduce, inner] (the plan transposes first when the
// reduced axes are not contiguous). out is [outer, inner].
struct ReduceParams {
  ReduceOp op = ReduceOp::kMean;
  int64_t outer = 1, reduce = 1, inner = 1;
};

// Softmax over the middle axis of [outer, axis, inner] (log_softmax when `log`).
struct SoftmaxParams {
  int64_t outer = 1, axis = 1, inner = 1;
  bool log = false;
};

// For b in [0, batch): out_b[M, N] = act(alpha * op(A_b) op(B_b) + beta * C), with
// op(A_b) [M, K] (stored [K, M] when trans_a), op(B_b) [K, N] (stored [N, K] when
// trans_b); A_b = a + b * a_batch_stride (0 broadcasts), likewise B_b; out is dense
// [batch, M, N]. `c` (may be null) is read at c[m * c_stride_m + n * c_stride_n]
// (strides 0 broadcast a row/column/scalar bias). Covers Gemm and batched MatMul.
struct MatMulParams {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;
  int64_t a_batch_stride = 0, b_batch_stride = 0;
  int64_t c_stride_m = 0, c_stride_n = 0;
  float alpha = 1, beta = 1;
  ActivationParams act;
};

// Index of the maximum (first one on ties) along the middle axis of [outer, axis, inner],
// written as a float value in the storage type. out is [outer, inner].
struct ArgMaxParams {
  int64_t outer = 1, axis = 1, inner = 1;
};

// What a backend did with a step beyond running it as asked (added after the freeze): a step
// split into several primitives so that each runs on a fast kernel (kSplit), or one left on a
// library's reference code because no form of it had a faster one (kReference: a bug to fix,
// which the ISA tests fail on). `what` names the primitive, its post-ops and why.
struct StepNote {
  enum class Kind : int32_t { kNone = 0, kSplit, kReference };
  Kind kind = Kind::kNone;
  std::string what;
};

class Kernels {
 public:
  virtual ~Kernels() = default;
  // "cpu", "cuda:0": for messages and results.
  virtual std::string name() const = 0;
  // Called once by the engine before anything else; Unsupported if this implementation
  // cannot store `storage`.
  virtual Status Prepare(StorageType storage) = 0;

  // ---- memory ----
  // Device memory of `bytes` (>= 256-byte aligned). Failure returns this implementation's
  // status (OutOfMemory when the device is full) and leaves *out untouched.
  virtual Status Alloc(size_t bytes, void** out) = 0;
  virtual void Free(void* ptr) = 0;  // null is a no-op
  // Both complete before returning: the host buffer may be reused (Upload) or read
  // (Download, after every queued call that writes `src`) at once.
  virtual Status Upload(void* dst, const void* host_src, size_t bytes) = 0;
  virtual Status Download(void* host_dst, const void* src, size_t bytes) = 0;
  // Waits for every queued call; returns the first error any of them met.
  virtual Status Sync() = 0;

  // Device bytes of scratch a Conv2d / ConvTranspose2d / MatMul with these params needs
  // (0 = none). The plan reserves the maximum over its steps; the call receives it.
  virtual int64_t Conv2dScratchBytes(const Conv2dParams&) const { return 0; }
  virtual int64_t ConvTranspose2dScratchBytes(const ConvTranspose2dParams&) const { return 0; }
  virtual int64_t MatMulScratchBytes(const MatMulParams&) const { return 0; }

  // ---- steps ----
  virtual Status Conv2d(const Conv2dParams& p, const void* x, const void* w, const void* bias,
                        const void* residual, void* y, void* scratch) = 0;
  virtual Status ConvTranspose2d(const ConvTranspose2dParams& p, const void* x, const void* w,
                                 const void* bias, void* y, void* scratch) = 0;
  virtual Status Pool2d(const Pool2dParams& p, const void* x, void* y) = 0;
  // `out` may alias `a` when a is dense with out's dims (in-place add).
  virtual Status Binary(const BinaryParams& p, const void* a, const void* b, void* out) = 0;
  // `y` may alias `x`.
  virtual Status Unary(const UnaryParams& p, const void* x, void* y) = 0;
  virtual Status Resize(const ResizeParams& p, const void* x, void* y) = 0;
  virtual Status Pad(const PadParams& p, const void* x, void* y) = 0;
  // `inputs` is a host array of p.count device pointers.
  virtual Status Concat(const ConcatParams& p, const void* const* inputs, void* y) = 0;
  virtual Status Transpose(const TransposeParams& p, const void* x, void* y) = 0;
  virtual Status Slice(const SliceParams& p, const void* x, void* y) = 0;
  virtual Status Reduce(const ReduceParams& p, const void* x, void* y) = 0;
  virtual Status Softmax(const SoftmaxParams& p, const void* x, void* y) = 0;
  virtual Status MatMul(const MatMulParams& p, const void* a, const void* b, const void* c,
                        void* y, void* scratch) = 0;
  virtual Status ArgMax(const ArgMaxParams& p, const void* x, void* y) = 0;
  // Device-to-device copy of `elements` storage elements.
  virtual Status Copy(const void* src, void* dst, int64_t elements) = 0;

  // ---- added after the freeze ----
  // What the last step call did beyond running as asked (kNone for most). The Engine asks
  // after each step of a plan's first run (Engine::Notes).
  virtual StepNote LastStepNote() const { return {}; }
};

}  // namespace framemill::engine
