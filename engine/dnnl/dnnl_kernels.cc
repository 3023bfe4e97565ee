#include "engine/dnnl/dnnl_kernels.h"

#include <algorithm>
#include <cmath>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "engine/reference/cpu_kernels.h"
#include "engine/reference/resize_taps.h"

namespace framemill::engine {
namespace {

std::atomic<bool> g_started{false};

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;
using Dims = memory::dims;

// The 4-D shape and element type of a channels-last tensor held in a buffer: fp32, or bf16
// (the convolutions' output in bf16 mode: half the buffer's bytes).
struct Nhwc {
  int64_t n = 0, c = 0, h = 0, w = 0;
  Dt dt = Dt::f32;
  bool operator==(const Nhwc& o) const { return n == o.n && c == o.c && h == o.h && w == o.w && dt == o.dt; }
  int64_t elements() const { return n * c * h * w; }
  Dims dims() const { return {n, c, h, w}; }
  memory::desc md() const { return memory::desc(dims(), dt, Tag::nhwc); }
  Nhwc As(Dt t) const { Nhwc o = *this; o.dt = t; return o; }
};

// A cache key from a list of values (the fields of a step's parameters).
std::string Key(std::initializer_list<int64_t> v) {
  std::string k(v.size() * sizeof(int64_t), '\0');
  size_t at = 0;
  for (int64_t x : v) { std::memcpy(&k[at], &x, sizeof x); at += sizeof x; }
  return k;
}

int64_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
std::string ActKey(const ActivationParams& a) {
  return Key({static_cast<int64_t>(a.kind), Bits(a.alpha), Bits(a.lo), Bits(a.hi)});
}

// oneDNN's eltwise for a fused activation; false when it has none (kNone).
bool EltwiseOf(const ActivationParams& a, dnnl::algorithm* alg, float* alpha, float* beta) {
  *alpha = 0; *beta = 0;
  switch (a.kind) {
    case Activation::kNone: return false;
    case Activation::kRelu: *alg = dnnl::algorithm::eltwise_relu; return true;
    case Activation::kLeakyRelu: *alg = dnnl::algorithm::eltwise_relu; *alpha = a.alpha; return true;
    case Activation::kClip: *alg = dnnl::algorithm::eltwise_clip_v2; *alpha = a.lo; *beta = a.hi; return true;
    case Activation::kSigmoid: *alg = dnnl::algorithm::eltwise_logistic; return true;
    case Activation::kTanh: *alg = dnnl::algorithm::eltwise_tanh; return true;
    case Activation::kSwish: *alg = dnnl::algorithm::eltwise_swish; *alpha = 1; return true;
  }
  return false;
}

// oneDNN's eltwise for a unary op; false for the ops it lacks (the reference runs them).
bool EltwiseOf(const UnaryParams& u, dnnl::algorithm* alg, float* alpha, float* beta) {
  using A = dnnl::algorithm;
  *alpha = 0; *beta = 0;
  switch (u.op) {
    case UnaryOp::kRelu: *alg = A::eltwise_relu; return true;
    case UnaryOp::kLeakyRelu: *alg = A::eltwise_relu; *alpha = u.alpha; return true;
    case UnaryOp::kClip: *alg = A::eltwise_clip_v2; *alpha = u.lo; *beta = u.hi; return true;
    case UnaryOp::kSigmoid: *alg = A::eltwise_logistic; return true;
    case UnaryOp::kTanh: *alg = A::eltwise_tanh; return true;
    case UnaryOp::kAbs: *alg = A::eltwise_abs; return true;
    case UnaryOp::kNeg: *alg = A::eltwise_linear; *alpha = -1; return true;
    case UnaryOp::kSqrt: *alg = A::eltwise_sqrt; return true;
    case UnaryOp::kExp: *alg = A::eltwise_exp; return true;
    case UnaryOp::kLog: *alg = A::eltwise_log; return true;
    case UnaryOp::kSquare: *alg = A::eltwise_square; return true;
    case UnaryOp::kAffine: *alg = A::eltwise_linear; *alpha = u.alpha; *beta = u.beta; return true;
    default: return false;  // identity, rsqrt, reciprocal, pow, floor, ceil, erf, hard sigmoid and swish
  }
}

bool BinaryAlgOf(BinaryOp op, dnnl::algorithm* alg) {
  using A = dnnl::algorithm;
  switch (op) {
    case BinaryOp::kAdd: *alg = A::binary_add; return true;
    case BinaryOp::kSub: *alg = A::binary_sub; return true;
    case BinaryOp::kMul: *alg = A::binary_mul; return true;
    case BinaryOp::kDiv: *alg = A::binary_div; return true;
    case BinaryOp::kMax: *alg = A::binary_max; return true;
    case BinaryOp::kMin: *alg = A::binary_min; return true;
    case BinaryOp::kPow: case BinaryOp::kPRelu: return false;
  }
  return false;
}

// A grow-only host buffer for the kernels' own temporaries.
class Temp {
 public:
  ~Temp() { std::free(p_); }
  void* Get(size_t bytes) {
    if (bytes > size_) {
      std::free(p_);
      size_ = (bytes + 4095) / 4096 * 4096;
      p_ = std::aligned_alloc(64, size_);
      if (!p_) { size_ = 0; throw std::bad_alloc(); }
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  size_t size_ = 0;
};

// A convolution's or a transposed convolution's primitive and what it reads and writes.
struct ConvPrim {
  dnnl::primitive prim;
  memory::desc src, weights, plain_weights, bias, dst;
  size_t scratch = 0;
  mutable int64_t reserved = -1;  // the plan's scratch for this step (Conv2dScratchBytes), once known
};

class DnnlKernels final : public Kernels {
 public:
  explicit DnnlKernels(DnnlOptions o)
      : ref_(MakeCpuKernels(o.memory_limit)), eng_(dnnl::engine::kind::cpu, 0), strm_(eng_) {
    bf16_ = o.bf16 && CpuHasBf16();
    g_started = true;
  }
  ~DnnlKernels() override = default;  // ref_ frees what it allocated
  std::string name() const override { return "cpu"; }
  Status Prepare(StorageType storage) override {
    if (storage != StorageType::kFloat32)
      return Status::Unsupported("the oneDNN CPU kernels store fp32 only");
    return ref_->Prepare(storage);
  }

  // ---- memory: the reference kernels' (host memory, the same limit) ----
  Status Alloc(size_t bytes, void** out) override {
    FM_RETURN_IF_ERROR(ref_->Alloc(bytes, out));
    live_[*out] = static_cast<int64_t>(bytes);
    return Status::OK();
  }
  // The tags of what lived in the block go with it.
  void Free(void* p) override {
    if (auto it = live_.find(p); it != live_.end()) {
      const char* lo = static_cast<const char*>(p);
      auto inside = [&](const void* q) { return q >= lo && static_cast<const char*>(q) < lo + it->second; };
      std::erase_if(nhwc_, [&](const auto& t) { return inside(t.first); });
      std::erase_if(reordered_, [&](const auto& t) { return inside(t.first); });
      live_.erase(it);
    }
    ref_->Free(p);
  }
  Status Upload(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    nhwc_.erase(dst);
    reordered_.erase(dst);
    return Status::OK();
  }
  Status Download(void* dst, const void* src, size_t bytes) override {
    return Guard([&] {
      const Nhwc* t = TagOf(src);
      if (t && static_cast<size_t>(t->elements()) * 4 == bytes) {
        Reorder(src, t->md(), dst, memory::desc(t->dims(), Dt::f32, Tag::nchw));
      } else {
        Plain(src);
        std::memcpy(dst, src, bytes);
      }
    });
  }
  Status Sync() override { return Status::OK(); }

  // oneDNN 2.6's JIT convolutions crash on a pad as wide as the dilated kernel (a 1x1 with
  // padding: DnnlKernelsTest found it); no model has one, the reference runs it.
  static bool DnnlTakes(const Conv2dParams& p) {
    const int64_t ekh = (p.kh - 1) * int64_t{p.dil_h} + 1, ekw = (p.kw - 1) * int64_t{p.dil_w} + 1;
    return std::max(p.pad_t, p.pad_b) < ekh && std::max(p.pad_l, p.pad_r) < ekw;
  }

  int64_t Conv2dScratchBytes(const Conv2dParams& p) const override {
    if (!DnnlTakes(p)) return 0;
    try {
      const ConvPrim& c = ConvFor(p, true, false);
      return static_cast<int64_t>(Align(c.scratch) + Align(c.src.get_size()));
    } catch (const std::exception&) {
      return 0;
    }
  }

  // ---- steps ----
  Status Conv2d(const Conv2dParams& p, const void* x, const void* w, const void* bias,
                const void* residual, void* y, void* scratch) override {
    return Guard([&] {
      if (!DnnlTakes(p)) {
        Plain(x);
        if (residual) Plain(residual);
        Check(ref_->Conv2d(p, x, PlainWeights(p, w), bias, residual, y, scratch));
        nhwc_.erase(y);
        return;
      }
      const ConvPrim& c = ConvFor(p, bias != nullptr, residual != nullptr);
      if (c.reserved < 0) c.reserved = Conv2dScratchBytes(p);
      const Dt dt = c.src.data_type();
      RunConv(c, {p.n, p.c_in, p.h_in, p.w_in, dt}, {p.n, p.c_out, p.h_out, p.w_out, dt}, x, w, bias, residual, y,
              scratch);
    });
  }

  // oneDNN's deconvolution has h_out = (h_in - 1) * stride - pad_t - pad_b + (kh - 1) * dil + 1:
  // the bottom and right pads that gives (ONNX's less its output_padding); where one is
  // negative, the reference runs it.
  static bool DeconvPads(const ConvTranspose2dParams& p, int64_t* pad_b, int64_t* pad_r) {
    *pad_b = (p.h_in - 1) * p.stride_h + (p.kh - 1) * int64_t{p.dil_h} + 1 - p.pad_t - p.h_out;
    *pad_r = (p.w_in - 1) * p.stride_w + (p.kw - 1) * int64_t{p.dil_w} + 1 - p.pad_l - p.w_out;
    // As for the convolutions (DnnlTakes): no pad as wide as the dilated kernel.
    const int64_t ekh = (p.kh - 1) * int64_t{p.dil_h} + 1, ekw = (p.kw - 1) * int64_t{p.dil_w} + 1;
    return *pad_b >= 0 && *pad_r >= 0 && p.pad_t >= 0 && p.pad_l >= 0 && std::max<int64_t>(p.pad_t, *pad_b) < ekh &&
           std::max<int64_t>(p.pad_l, *pad_r) < ekw;
  }

  // A transposed convolution whose kernel is its stride (no overlap, no padding) into fewer
  // than 16 channels: each input pixel writes its own kh x kw block, one dot product of its
  // channels per output. oneDNN pads the output channels to a block of 16: selfie's last
  // layer (16 -> 1 channel at 2x, 1 M multiply-adds) took 1.5-1.9 ms there, 0.28 ms here.
  static bool Blockwise(const ConvTranspose2dParams& p) {
    return p.kh == p.stride_h && p.kw == p.stride_w && p.pad_t == 0 && p.pad_l == 0 && p.pad_b == 0 &&
           p.pad_r == 0 && p.dil_h == 1 && p.dil_w == 1 && p.groups == 1 && p.c_out < 16 &&
           p.h_out == p.h_in * p.kh && p.w_out == p.w_in * p.kw;
  }
  // Row by row: the row's input channels gathered plain, then each output tap summed over
  // the row's pixels at once (so that it vectorises); the activation after, in oneDNN.
  void DeconvBlocks(const ConvTranspose2dParams& p, const void* x, const void* w, const void* bias, void* y) {
    const bool cl = IsNhwc(x, {p.n, p.c_in, p.h_in, p.w_in, Dt::f32});
    if (!cl) Plain(x);
    const int64_t kk = int64_t{p.kh} * p.kw, taps = p.c_out * kk, cin = p.c_in, wi = p.w_in;
    const float* W = static_cast<const float*>(w);  // ONNX's [c_in][c_out][kh][kw]
    const float* X = static_cast<const float*>(x);
    const float* B = static_cast<const float*>(bias);
    float* Y = static_cast<float*>(y);
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < p.n * p.h_in; ++row) {
      const int64_t n = row / p.h_in, iy = row % p.h_in;
      std::vector<float> xr(static_cast<size_t>(cin * wi)), acc(static_cast<size_t>(wi));
      for (int64_t ci = 0; ci < cin; ++ci)
        for (int64_t ix = 0; ix < wi; ++ix)
          xr[ci * wi + ix] = cl ? X[(row * wi + ix) * cin + ci] : X[((n * cin + ci) * p.h_in + iy) * wi + ix];
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t co = t / kk, ky = t / p.kw % p.kh, kx = t % p.kw;
        std::fill(acc.begin(), acc.end(), B ? B[co] : 0.0f);
        for (int64_t ci = 0; ci < cin; ++ci) {
          const float wv = W[ci * taps + t];
          const float* xp = xr.data() + ci * wi;
          for (int64_t ix = 0; ix < wi; ++ix) acc[ix] += xp[ix] * wv;
        }
        float* out = Y + ((n * p.c_out + co) * p.h_out + iy * p.kh + ky) * p.w_out + kx;
        for (int64_t ix = 0; ix < wi; ++ix) out[ix * p.kw] = acc[ix];
      }
    }
    nhwc_.erase(y);
    ActivateInPlace(p.act, Y, p.n * p.c_out * p.h_out * p.w_out);
  }
  // A fused activation applied afterwards, in place on plain fp32 values.
  void ActivateInPlace(const ActivationParams& a, float* v, int64_t count) {
    dnnl::algorithm alg;
    float alpha, beta;
    if (!EltwiseOf(a, &alg, &alpha, &beta)) return;
    const memory::desc m({count}, Dt::f32, Tag::a);
    const std::string key = Key({static_cast<int64_t>(alg), count, Bits(alpha), Bits(beta), static_cast<int64_t>(Dt::f32)});
    auto it = eltwises_.find(key);
    if (it == eltwises_.end()) {
      dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, m, alpha, beta);
      it = eltwises_.emplace(key, Prim{dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, eng_)), m, m, 0}).first;
    }
    memory mm(m, eng_, v);
    it->second.prim.execute(strm_, {{DNNL_ARG_SRC, mm}, {DNNL_ARG_DST, mm}});
  }

  int64_t ConvTranspose2dScratchBytes(const ConvTranspose2dParams& p) const override {
    int64_t pb, pr;
    if (!DeconvPads(p, &pb, &pr) || Blockwise(p)) return 0;
    try {
      const ConvPrim& c = DeconvFor(p, true);
      return static_cast<int64_t>(Align(c.scratch) + Align(c.src.get_size()));
    } catch (const std::exception&) {
      return 0;
    }
  }

  // oneDNN's deconvolution, channels-last like the convolutions (selfie's last layer, a
  // 16 -> 1 channel 2x up-sampling: 1.83 ms a forward on the reference, 45% of the model).
  Status ConvTranspose2d(const ConvTranspose2dParams& p, const void* x, const void* w,
                         const void* bias, void* y, void* scratch) override {
    int64_t pb, pr;
    if (!DeconvPads(p, &pb, &pr))
      return OnReference(x, y, [&] { return ref_->ConvTranspose2d(p, x, w, bias, y, scratch); });
    if (Blockwise(p)) return Guard([&] { DeconvBlocks(p, x, w, bias, y); });
    return Guard([&] {
      const ConvPrim& c = DeconvFor(p, bias != nullptr);
      if (c.reserved < 0) c.reserved = ConvTranspose2dScratchBytes(p);
      const Dt dt = c.src.data_type();
      RunConv(c, {p.n, p.c_in, p.h_in, p.w_in, dt}, {p.n, p.c_out, p.h_out, p.w_out, dt}, x, w, bias, nullptr, y,
              scratch);
    });
  }

  Status Pool2d(const Pool2dParams& p, const void* x, void* y) override {
    return Guard([&] {
      const int64_t ekh = (p.kh - 1) * int64_t{p.dil_h} + 1, ekw = (p.kw - 1) * int64_t{p.dil_w} + 1;
      int64_t pb = p.pad_b, pr = p.pad_r;
      auto fits = [](int64_t in, int64_t e, int64_t b, int64_t a, int64_t s, int64_t out) {
        return (in - e + b + a) / s + 1 == out;
      };
      if (!fits(p.h_in, ekh, p.pad_t, pb, p.stride_h, p.h_out)) pb = (p.h_out - 1) * p.stride_h + ekh - p.h_in - p.pad_t;
      if (!fits(p.w_in, ekw, p.pad_l, pr, p.stride_w, p.w_out)) pr = (p.w_out - 1) * p.stride_w + ekw - p.w_in - p.pad_l;
      const bool reshaped = pb != p.pad_b || pr != p.pad_r;
      if (pb < 0 || pr < 0 || (reshaped && p.kind == PoolKind::kAvg && p.count_include_pad)) {
        Check(OnReference(x, y, [&] { return ref_->Pool2d(p, x, y); }));
        return;
      }
      Nhwc in{p.n, p.c, p.h_in, p.w_in}, out{p.n, p.c, p.h_out, p.w_out};
      if (const Nhwc* t = TagOf(x); t && *t == in.As(t->dt)) in.dt = out.dt = t->dt;
      const bool cl = IsNhwc(x, in);
      if (!cl) Plain(x);
      const Tag tag = cl ? Tag::nhwc : Tag::nchw;
      const dnnl::algorithm alg = p.kind == PoolKind::kMax ? dnnl::algorithm::pooling_max
                                  : p.count_include_pad    ? dnnl::algorithm::pooling_avg_include_padding
                                                           : dnnl::algorithm::pooling_avg_exclude_padding;
      const std::string key = Key({p.kind == PoolKind::kMax, p.count_include_pad, cl, static_cast<int64_t>(in.dt), p.n, p.c, p.h_in, p.w_in,
                                   p.h_out, p.w_out, p.kh, p.kw, p.stride_h, p.stride_w, p.pad_t, p.pad_l, pb, pr,
                                   p.dil_h, p.dil_w});
      auto it = pools_.find(key);
      if (it == pools_.end()) {
        memory::desc s(in.dims(), in.dt, tag), d(out.dims(), out.dt, tag);
        dnnl::pooling_v2_forward::desc pd_desc(dnnl::prop_kind::forward_inference, alg, s, d,
                                               {p.stride_h, p.stride_w}, {p.kh, p.kw},
                                               {p.dil_h - 1, p.dil_w - 1}, {p.pad_t, p.pad_l}, {pb, pr});
        it = pools_.emplace(key, SrcDstPrim<dnnl::pooling_v2_forward>(pd_desc, s, d)).first;
      }
      RunSrcDst(it->second, x, y);
      if (cl) nhwc_[y] = out; else nhwc_.erase(y);
    });
  }

  Status Binary(const BinaryParams& p, const void* a, const void* b, void* out) override {
    if (p.op == BinaryOp::kPRelu) return Guard([&] { PRelu(p, a, b, out); });
    return Guard([&] {
      dnnl::algorithm alg;
      if (!BinaryAlgOf(p.op, &alg) || p.rank < 1 || p.rank > kMaxRank) return RefBinary(p, a, b, out);
      Dims full(p.dims, p.dims + p.rank), ad, bd;
      if (!OwnDims(p.rank, p.dims, p.a_strides, &ad) || !OwnDims(p.rank, p.dims, p.b_strides, &bd))
        return RefBinary(p, a, b, out);
      const void* x0 = a;
      const void* x1 = b;
      if (ad != full && bd == full && (p.op == BinaryOp::kAdd || p.op == BinaryOp::kMul ||
                                       p.op == BinaryOp::kMax || p.op == BinaryOp::kMin)) {
        std::swap(x0, x1);
        std::swap(ad, bd);
      }
      if (ad != full || (bd == full && x1 == out && x0 != out)) return RefBinary(p, a, b, out);
      // Channels-last where the full operand is, and the other one's too when it is full.
      const bool four = p.rank == 4;
      Nhwc shape = four ? Nhwc{full[0], full[1], full[2], full[3]} : Nhwc{};
      if (const Nhwc* t = TagOf(x0); four && bd == full && t && *t == shape.As(t->dt) && IsNhwc(x1, *t))
        shape.dt = t->dt;  // both bf16 (or both fp32) channels-last
      bool cl = four && IsNhwc(x0, shape);
      if (cl && bd == full && !IsNhwc(x1, shape)) cl = false;
      if (!cl) Plain(x0);
      if (!(cl && bd == full)) Plain(x1);
      auto md = [&](const Dims& d, bool channels_last) {
        if (channels_last) return memory::desc(d, shape.dt, Tag::nhwc);
        return memory::desc(d, Dt::f32, DenseStrides(d));
      };
      const memory::desc m0 = md(full, cl), m1 = md(bd, cl && bd == full), md_out = md(full, cl);
      dnnl::algorithm act_alg;
      float alpha, beta;
      const bool has_act = EltwiseOf(p.act, &act_alg, &alpha, &beta);
      std::string key = Key({static_cast<int64_t>(alg), cl, p.rank, static_cast<int64_t>(shape.dt)}) + ActKey(p.act);
      for (int64_t v : full) key += Key({v});
      for (int64_t v : bd) key += Key({v});
      auto it = binaries_.find(key);
      if (it == binaries_.end()) {
        dnnl::binary::desc d(alg, m0, m1, md_out);
        dnnl::primitive_attr attr;
        if (has_act) {
          dnnl::post_ops po;
          po.append_eltwise(1.f, act_alg, alpha, beta);
          attr.set_post_ops(po);
        }
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::binary::primitive_desc pd(d, attr, eng_);
        it = binaries_.emplace(key, Prim{dnnl::binary(pd), m0, m1, pd.scratchpad_desc().get_size()}).first;
      }
      const Prim& bp = it->second;
      bp.prim.execute(strm_, {{DNNL_ARG_SRC_0, memory(m0, eng_, const_cast<void*>(x0))},
                              {DNNL_ARG_SRC_1, memory(m1, eng_, const_cast<void*>(x1))},
                              {DNNL_ARG_DST, memory(md_out, eng_, out)}, {DNNL_ARG_SCRATCHPAD, Scratchpad(bp.scratch)}});
      if (cl) nhwc_[out] = shape; else nhwc_.erase(out);
    });
  }

  Status Unary(const UnaryParams& p, const void* x, void* y) override {
    return Guard([&] {
      const Nhwc* t = TagOf(x);
      std::optional<Nhwc> keep;
      dnnl::algorithm alg;
      float alpha, beta;
      const bool mapped = EltwiseOf(p, &alg, &alpha, &beta);
      if (t && t->elements() == p.count && (mapped || t->dt == Dt::f32)) keep = *t; else Plain(x);
      if (mapped) {
        const Dt dt = keep ? keep->dt : Dt::f32;
        const memory::desc m({p.count}, dt, Tag::a);
        const std::string key = Key({static_cast<int64_t>(alg), p.count, Bits(alpha), Bits(beta), static_cast<int64_t>(dt)});
        auto it = eltwises_.find(key);
        if (it == eltwises_.end()) {
          dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, m, alpha, beta);
          dnnl::eltwise_forward::primitive_desc pd(d, eng_);
          it = eltwises_.emplace(key, Prim{dnnl::eltwise_forward(pd), m, m, 0}).first;
        }
        it->second.prim.execute(strm_, {{DNNL_ARG_SRC, memory(m, eng_, const_cast<void*>(x))},
                                        {DNNL_ARG_DST, memory(m, eng_, y)}});
      } else {
        Check(ref_->Unary(p, x, y));  // elementwise: the layout does not matter
      }
      if (keep) nhwc_[y] = *keep; else nhwc_.erase(y);
    });
  }

  // oneDNN's resampling where it computes what ONNX asks: linear at half-pixel centres, and
  // nearest at a whole up-scaling factor f (asymmetric with floor, or half-pixel with either
  // rounding: each takes floor(y / f), oneDNN's round((y + 0.5) / f - 0.5) never at a tie),
  // both at the scale out / in: for a channels-last bf16 input (YOLOv8's up-sampling in bf16).
  static bool ResamplingTakes(const ResizeParams& p) {
    const auto exact = [](float scale, int64_t in, int64_t out) {
      return std::fabs(double{scale} - double(out) / double(in)) <= 1e-6 * double(out) / double(in);
    };
    if (p.h_in < 1 || p.w_in < 1 || !exact(p.scale_h, p.h_in, p.h_out) || !exact(p.scale_w, p.w_in, p.w_out))
      return false;
    const bool half_pixel = p.coord == ResizeCoord::kHalfPixel ||
                            (p.coord == ResizeCoord::kPytorchHalfPixel && p.h_out > 1 && p.w_out > 1);
    if (p.mode == ResizeMode::kLinear) return half_pixel;
    if (p.h_out % p.h_in != 0 || p.w_out % p.w_in != 0) return false;
    if (p.coord == ResizeCoord::kAsymmetric) return p.nearest == ResizeNearest::kFloor;
    return half_pixel && (p.nearest == ResizeNearest::kRoundPreferFloor || p.nearest == ResizeNearest::kRoundPreferCeil);
  }

  // A channels-last fp32 input is resized channels-last here, any mode: each output pixel
  // blends its source pixels' channels with the reference's taps and arithmetic (the same
  // floats; selfie's three resizes took 0.59 ms a forward turned back and resized on the
  // reference, centernet's asymmetric linear up-sampling, which oneDNN lacks, 1.95 ms). A
  // channels-last bf16 input goes to oneDNN's resampling where it computes the same; the rest
  // runs on the reference.
  Status Resize(const ResizeParams& p, const void* x, void* y) override {
    const Nhwc* t = TagOf(x);
    const bool channels_last = t && t->n * t->c == p.planes && t->h == p.h_in && t->w == p.w_in;
    if (channels_last && t->dt == Dt::f32)
      return Guard([&] { ResizeChannelsLast(p, *t, static_cast<const float*>(x), static_cast<float*>(y)); });
    if (!channels_last || t->dt != Dt::bf16 || !ResamplingTakes(p))
      return OnReference(x, y, [&] { return ref_->Resize(p, x, y); });
    return Guard([&] {
      const Nhwc in = *t, out{t->n, t->c, p.h_out, p.w_out, t->dt};
      const std::string key = Key({p.mode == ResizeMode::kLinear, static_cast<int64_t>(in.dt), in.n, in.c, p.h_in,
                                   p.w_in, p.h_out, p.w_out});
      auto it = resamplings_.find(key);
      if (it == resamplings_.end()) {
        memory::desc s(in.dims(), in.dt, Tag::nhwc), d(out.dims(), out.dt, Tag::nhwc);
        const auto alg = p.mode == ResizeMode::kLinear ? dnnl::algorithm::resampling_linear
                                                       : dnnl::algorithm::resampling_nearest;
        dnnl::resampling_forward::desc rd(dnnl::prop_kind::forward_inference, alg, s, d);
        it = resamplings_.emplace(key, SrcDstPrim<dnnl::resampling_forward>(rd, s, d)).first;
      }
      RunSrcDst(it->second, x, y);
      nhwc_[y] = out;
    });
  }

  // One output pixel's channels: the reference's bilinear blend, channel by channel.
  static void BlendChannels(const float* __restrict p00, const float* __restrict p01, const float* __restrict p10,
                            const float* __restrict p11, float fx, float fy, float* __restrict out, int64_t c) {
#pragma omp simd
    for (int64_t k = 0; k < c; ++k) {
      const float top = p00[k] + (p01[k] - p00[k]) * fx;
      const float bot = p10[k] + (p11[k] - p10[k]) * fx;
      out[k] = top + (bot - top) * fy;
    }
  }
  void ResizeChannelsLast(const ResizeParams& p, const Nhwc& in, const float* x, float* y) {
    const auto ty = ResizeTaps(p, p.h_in, p.h_out, p.scale_h), tx = ResizeTaps(p, p.w_in, p.w_out, p.scale_w);
    const int64_t c = in.c, rows = in.n * p.h_out;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t n = row / p.h_out, oy = row % p.h_out;
      const ResizeTap& a = ty[oy];
      const float* r0 = x + (n * p.h_in + a.i0) * p.w_in * c;
      const float* r1 = x + (n * p.h_in + a.i1) * p.w_in * c;
      float* out = y + row * p.w_out * c;
      for (int64_t ox = 0; ox < p.w_out; ++ox, out += c) {
        const ResizeTap& b = tx[ox];
        BlendChannels(r0 + b.i0 * c, r0 + b.i1 * c, r1 + b.i0 * c, r1 + b.i1 * c, b.f, a.f, out, c);
      }
    }
    nhwc_[y] = {in.n, in.c, p.h_out, p.w_out, Dt::f32};
  }

  // PReLU of a channels-last fp32 tensor with one slope per channel (or one for all), written
  // channels-last: facemesh's 23 were four steps each (Relu, Clip, Mul, Add); the rest on the
  // reference.
  void PRelu(const BinaryParams& p, const void* a, const void* b, void* out) {
    const Nhwc* t = TagOf(a);
    const bool per_channel = p.b_strides[0] == 0 && p.b_strides[2] == 0 && p.b_strides[3] == 0 &&
                             (p.b_strides[1] == 1 || p.b_strides[1] == 0);
    if (p.rank != 4 || !t || t->dt != Dt::f32 || !(*t == Nhwc{p.dims[0], p.dims[1], p.dims[2], p.dims[3]}) ||
        !per_channel || p.act.kind != Activation::kNone)
      return RefBinary(p, a, b, out);
    const Nhwc shape = *t;
    const int64_t c = shape.c, pixels = shape.n * shape.h * shape.w, ks = p.b_strides[1];
    const float* x = static_cast<const float*>(a);
    std::vector<float> k(static_cast<size_t>(c));  // one slope a channel
    for (int64_t ch = 0; ch < c; ++ch) k[ch] = static_cast<const float*>(b)[ch * ks];
    float* y = static_cast<float*>(out);
    const float* kv = k.data();
#pragma omp parallel for schedule(static)
    for (int64_t px = 0; px < pixels; ++px) PReluPixel(x + px * c, kv, y + px * c, c);
    nhwc_[out] = shape;
  }
  // As the reference computes it: the same floats.
  static void PReluPixel(const float* __restrict x, const float* __restrict k, float* __restrict y, int64_t c) {
    for (int64_t ch = 0; ch < c; ++ch) y[ch] = std::max(x[ch], 0.0f) + k[ch] * std::min(x[ch], 0.0f);
  }

  // A constant pad of the channels alone on a channels-last fp32 tensor (BlazeFace widens its
  // residuals so: 0.54 ms a forward on the reference, with the reorders around it) is written
  // channels-last here, pixel by pixel; every other pad runs on the reference.
  Status Pad(const PadParams& p, const void* x, void* y) override {
    const Nhwc* t = TagOf(x);
    if (!t || t->dt != Dt::f32 || !ChannelsOnly(p, *t)) return OnReference(x, y, [&] { return ref_->Pad(p, x, y); });
    return Guard([&] {
      const Nhwc in = *t;
      const int64_t before = p.before[1], c = in.c, c_out = in.c + p.before[1] + p.after[1];
      const int64_t pixels = in.n * in.h * in.w;
      const float* src = static_cast<const float*>(x);
      float* dst = static_cast<float*>(y);
      const float v = p.value;
#pragma omp parallel for schedule(static)
      for (int64_t k = 0; k < pixels; ++k) {
        float* o = dst + k * c_out;
        std::fill(o, o + before, v);
        std::memcpy(o + before, src + k * c, static_cast<size_t>(c) * 4);
        std::fill(o + before + c, o + c_out, v);
      }
      nhwc_[y] = {in.n, c_out, in.h, in.w, Dt::f32};
    });
  }
  static bool ChannelsOnly(const PadParams& p, const Nhwc& t) {
    if (p.mode != PadMode::kConstant || p.rank != 4) return false;
    const int64_t dims[4] = {t.n, t.c, t.h, t.w};
    for (int d = 0; d < 4; ++d) {
      if (p.in_dims[d] != dims[d]) return false;
      if (d != 1 && (p.before[d] != 0 || p.after[d] != 0)) return false;
    }
    return true;
  }

  Status Concat(const ConcatParams& p, const void* const* inputs, void* y) override {
    return Guard([&] {
      // Channels-last when every input is, as [outer, c_k, h, w] with h * w = inner.
      bool cl = p.count > 0;
      int64_t h = 0, w = 0, total = 0;
      Dt dt = Dt::f32;
      for (int k = 0; k < p.count && cl; ++k) {
        const Nhwc* t = TagOf(inputs[k]);
        if (k == 0 && t) dt = t->dt;
        cl = t && t->n == p.outer && t->c == p.axis_sizes[k] && t->h * t->w == p.inner && t->dt == dt &&
             (k == 0 || (t->h == h && t->w == w));
        if (cl) { h = t->h; w = t->w; total += t->c; }
      }
      if (!cl) {
        for (int k = 0; k < p.count; ++k) Plain(inputs[k]);
        Check(ref_->Concat(p, inputs, y));
        nhwc_.erase(y);
        return;
      }
      std::vector<memory::desc> srcs;
      std::string key = Key({p.outer, h, w, static_cast<int64_t>(dt)});
      for (int k = 0; k < p.count; ++k) {
        srcs.emplace_back(Dims{p.outer, p.axis_sizes[k], h, w}, dt, Tag::nhwc);
        key += Key({p.axis_sizes[k]});
      }
      const Nhwc out{p.outer, total, h, w, dt};
      const memory::desc dst = out.md();
      auto it = concats_.find(key);
      if (it == concats_.end()) {
        dnnl::concat::primitive_desc pd(dst, 1, srcs, eng_);
        it = concats_.emplace(key, dnnl::concat(pd)).first;
      }
      std::unordered_map<int, memory> args{{DNNL_ARG_DST, memory(dst, eng_, y)}};
      for (int k = 0; k < p.count; ++k)
        args.insert({DNNL_ARG_MULTIPLE_SRC + k, memory(srcs[k], eng_, const_cast<void*>(inputs[k]))});
      it->second.execute(strm_, args);
      nhwc_[y] = out;
    });
  }

  // NCHW <-> NHWC as one reorder (or none): the heads of the TF.js graphs end in a
  // Transpose to channels-last of a convolution's channels-last output, so its bytes are
  // already the answer (centernet's 1x80x128x128 keypoints: 12.2 ms a forward turned back
  // and transposed on the reference; movenet's three heads 1.8 ms). A plain channels-last
  // input to NCHW is the same bytes, tagged channels-last for the next op.
  Status Transpose(const TransposeParams& p, const void* x, void* y) override {
    static constexpr int32_t kToNhwc[4] = {0, 2, 3, 1}, kToNchw[4] = {0, 3, 1, 2};
    const bool to_nhwc = p.rank == 4 && std::equal(p.perm, p.perm + 4, kToNhwc);
    const bool to_nchw = p.rank == 4 && std::equal(p.perm, p.perm + 4, kToNchw);
    if (!to_nhwc && !to_nchw) return OnReference(x, y, [&] { return ref_->Transpose(p, x, y); });
    return Guard([&] {
      const int64_t* d = p.in_dims;
      if (to_nhwc) {  // x is [n, c, h, w]
        const Nhwc want{d[0], d[1], d[2], d[3]};
        const memory::desc src = MdOf(x, want);
        Reorder(x, src, y, memory::desc(want.dims(), Dt::f32, Tag::nhwc));
        nhwc_.erase(y);
        return;
      }
      Plain(x);  // x is [n, h, w, c]: y's [n, c, h, w] held channels-last is x's bytes
      std::memcpy(y, x, static_cast<size_t>(d[0] * d[1] * d[2] * d[3]) * 4);
      nhwc_[y] = {d[0], d[3], d[1], d[2], Dt::f32};
    });
  }

  Status Slice(const SliceParams& p, const void* x, void* y) override {
    return Guard([&] {
      // A channels-last 4-D input sliced with unit steps: a reorder of its sub-block.
      bool unit = p.rank == 4;
      for (int d = 0; d < p.rank && unit; ++d) unit = p.steps[d] == 1;
      Nhwc in = unit ? Nhwc{p.in_dims[0], p.in_dims[1], p.in_dims[2], p.in_dims[3]} : Nhwc{};
      if (const Nhwc* t = TagOf(x); unit && t && *t == in.As(t->dt)) in.dt = t->dt;
      if (!unit || !IsNhwc(x, in)) {
        Check(OnReference(x, y, [&] { return ref_->Slice(p, x, y); }));
        return;
      }
      const Nhwc out{p.out_dims[0], p.out_dims[1], p.out_dims[2], p.out_dims[3], in.dt};
      const memory::desc whole = in.md();
      const memory::desc part = whole.submemory_desc(out.dims(), {p.starts[0], p.starts[1], p.starts[2], p.starts[3]});
      Reorder(x, part, y, out.md());
      nhwc_[y] = out;
    });
  }

  // A global average or max pool of a channels-last tensor (the mean or max over h x w of
  // each channel) as oneDNN's pooling over the whole plane (centernet's nine: 5.7 ms a forward
  // turned back and reduced on the reference); every other reduction on the reference.
  Status Reduce(const ReduceParams& p, const void* x, void* y) override {
    const Nhwc* t = TagOf(x);
    const bool global = t && t->dt == Dt::f32 && p.inner == 1 && t->n * t->c == p.outer && t->h * t->w == p.reduce &&
                        (p.op == ReduceOp::kMean || p.op == ReduceOp::kMax);
    if (!global) return OnReference(x, y, [&] { return ref_->Reduce(p, x, y); });
    Pool2dParams g;
    g.kind = p.op == ReduceOp::kMean ? PoolKind::kAvg : PoolKind::kMax;
    g.n = t->n; g.c = t->c; g.h_in = t->h; g.w_in = t->w; g.h_out = g.w_out = 1;
    g.kh = static_cast<int32_t>(t->h); g.kw = static_cast<int32_t>(t->w);
    FM_RETURN_IF_ERROR(Pool2d(g, x, y));
    nhwc_.erase(y);  // [n, c, 1, 1]: channels-last is plain
    return Status::OK();
  }
  Status Softmax(const SoftmaxParams& p, const void* x, void* y) override {
    return OnReference(x, y, [&] { return ref_->Softmax(p, x, y); });
  }

  Status MatMul(const MatMulParams& p, const void* a, const void* b, const void* c, void* y,
                void* scratch) override {
    return Guard([&] {
      Plain(a);
      Plain(b);
      if (c) Plain(c);
      nhwc_.erase(y);
      const bool a_dense = p.a_batch_stride == 0 || p.a_batch_stride == p.m * p.k;
      const bool b_dense = p.b_batch_stride == 0 || p.b_batch_stride == p.k * p.n;
      Dims bias_dims;
      const bool bias_ok = !c || (p.beta == 1 && BiasDims(p, &bias_dims));
      if (p.alpha != 1 || !a_dense || !b_dense || !bias_ok) {
        Check(ref_->MatMul(p, a, b, c, y, scratch));
        return;
      }
      const int64_t ba = p.a_batch_stride ? p.batch : 1, bb = p.b_batch_stride ? p.batch : 1;
      const memory::desc am({ba, p.m, p.k}, Dt::f32,
                            p.trans_a ? Dims{p.m * p.k, 1, p.m} : Dims{p.m * p.k, p.k, 1});
      const memory::desc bm({bb, p.k, p.n}, Dt::f32,
                            p.trans_b ? Dims{p.k * p.n, 1, p.k} : Dims{p.k * p.n, p.n, 1});
      const memory::desc ym({p.batch, p.m, p.n}, Dt::f32, Tag::abc);
      const memory::desc cm = c ? memory::desc(bias_dims, Dt::f32, Tag::abc) : memory::desc();
      std::string key = Key({p.batch, p.m, p.n, p.k, p.trans_a, p.trans_b, ba, bb, c != nullptr,
                             c ? bias_dims[1] : 0, c ? bias_dims[2] : 0}) + ActKey(p.act);
      auto it = matmuls_.find(key);
      if (it == matmuls_.end()) {
        dnnl::matmul::desc d = c ? dnnl::matmul::desc(am, bm, cm, ym) : dnnl::matmul::desc(am, bm, ym);
        dnnl::primitive_attr attr = Attr();
        dnnl::algorithm act_alg;
        float alpha, beta;
        if (EltwiseOf(p.act, &act_alg, &alpha, &beta)) {
          dnnl::post_ops po;
          po.append_eltwise(1.f, act_alg, alpha, beta);
          attr.set_post_ops(po);
        }
        dnnl::matmul::primitive_desc pd(d, attr, eng_);
        it = matmuls_.emplace(key, Prim{dnnl::matmul(pd), am, bm, pd.scratchpad_desc().get_size()}).first;
      }
      const Prim& mp = it->second;
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(am, eng_, const_cast<void*>(a))},
                                           {DNNL_ARG_WEIGHTS, memory(bm, eng_, const_cast<void*>(b))},
                                           {DNNL_ARG_DST, memory(ym, eng_, y)}, {DNNL_ARG_SCRATCHPAD, Scratchpad(mp.scratch)}};
      if (c) args.insert({DNNL_ARG_BIAS, memory(cm, eng_, const_cast<void*>(c))});
      mp.prim.execute(strm_, args);
    });
  }

  Status ArgMax(const ArgMaxParams& p, const void* x, void* y) override {
    return OnReference(x, y, [&] { return ref_->ArgMax(p, x, y); });
  }
  Status Copy(const void* src, void* dst, int64_t elements) override {
    return Guard([&] {
      const Nhwc* t = TagOf(src);
      std::optional<Nhwc> keep;
      if (t && t->elements() == elements) keep = *t; else Plain(src);
      std::memcpy(dst, src, static_cast<size_t>(elements) * 4);
      if (keep) nhwc_[dst] = *keep; else nhwc_.erase(dst);
    });
  }

 private:
  struct Prim {
    dnnl::primitive prim;
    memory::desc a, c;
    size_t scratch = 0;
  };
  static size_t Align(size_t n) { return (n + 255) / 256 * 256; }

  template <class F>
  Status Guard(F&& f) {
    try {
      f();
      return Status::OK();
    } catch (const dnnl::error& e) {
      return Status::Internal(std::string("oneDNN: ") + e.what() + " (status " + std::to_string(e.status) + ")");
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("cpu kernels: host memory exhausted");
    } catch (const StatusError& e) {
      return e.status;
    }
  }
  struct StatusError {
    Status status;
  };
  static void Check(Status s) {
    if (!s.ok()) throw StatusError{std::move(s)};
  }
  // A reference kernel on `x` as plain NCHW; its output `y` is plain.
  template <class F>
  Status OnReference(const void* x, void* y, F&& kernel) {
    return Guard([&] {
      Plain(x);
      Check(kernel());
      nhwc_.erase(y);
    });
  }
  // A src -> dst primitive of kind P (pooling, resampling) with a user scratchpad, and its run.
  template <class P>
  Prim SrcDstPrim(const typename P::desc& d, const memory::desc& src, const memory::desc& dst) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    typename P::primitive_desc pd(d, attr, eng_);
    return Prim{P(pd), src, dst, pd.scratchpad_desc().get_size()};
  }
  void RunSrcDst(const Prim& p, const void* x, void* y) {
    p.prim.execute(strm_, {{DNNL_ARG_SRC, memory(p.a, eng_, const_cast<void*>(x))},
                           {DNNL_ARG_DST, memory(p.c, eng_, y)}, {DNNL_ARG_SCRATCHPAD, Scratchpad(p.scratch)}});
  }
  // A oneDNN user scratchpad of `bytes` at `at` (the kernels' own buffer when null).
  memory Scratchpad(size_t bytes, void* at = nullptr) {
    return memory(memory::desc({static_cast<int64_t>(bytes)}, Dt::u8, Tag::a), eng_,
                  at ? at : own_scratch_.Get(bytes + 1));
  }
  void RefBinary(const BinaryParams& p, const void* a, const void* b, void* out) {
    Plain(a);
    Plain(b);
    Check(ref_->Binary(p, a, b, out));
    nhwc_.erase(out);
  }

  dnnl::primitive_attr Attr() const {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (bf16_) attr.set_fpmath_mode(dnnl::fpmath_mode::bf16);
    return attr;
  }

  // A broadcast operand's own dims (1 where its stride is 0), when its strides are the dense
  // strides of those dims; false otherwise.
  static bool OwnDims(int rank, const int64_t* dims, const int64_t* strides, Dims* own) {
    own->assign(dims, dims + rank);
    for (int d = 0; d < rank; ++d) if (strides[d] == 0) (*own)[d] = 1;
    const Dims dense = DenseStrides(*own);
    for (int d = 0; d < rank; ++d)
      if ((*own)[d] > 1 && strides[d] != dense[d]) return false;
    return true;
  }
  static Dims DenseStrides(const Dims& d) {
    Dims s(d.size());
    int64_t acc = 1;
    for (size_t k = d.size(); k-- > 0;) { s[k] = acc; acc *= d[k]; }
    return s;
  }
  static bool BiasDims(const MatMulParams& p, Dims* d) {
    if (p.c_stride_m == 0 && p.c_stride_n == 0) *d = {1, 1, 1};
    else if (p.c_stride_m == 0 && p.c_stride_n == 1) *d = {1, 1, p.n};
    else if (p.c_stride_m == 1 && p.c_stride_n == 0) *d = {1, p.m, 1};
    else if (p.c_stride_m == p.n && p.c_stride_n == 1) *d = {1, p.m, p.n};
    else return false;
    return true;
  }

  const Nhwc* TagOf(const void* p) const {
    auto it = nhwc_.find(p);
    return it == nhwc_.end() ? nullptr : &it->second;
  }
  bool IsNhwc(const void* p, const Nhwc& s) const {
    const Nhwc* t = TagOf(p);
    return t && *t == s;
  }
  // Turns a channels-last buffer back into the plain NCHW the plan promises, in place.
  void Plain(const void* p) {
    auto it = nhwc_.find(p);
    if (it == nhwc_.end()) return;
    const Nhwc s = it->second;
    nhwc_.erase(it);
    const size_t bytes = static_cast<size_t>(s.elements()) * 4;
    void* t = plain_tmp_.Get(bytes);
    Reorder(p, s.md(), t, memory::desc(s.dims(), Dt::f32, Tag::nchw));
    std::memcpy(const_cast<void*>(p), t, bytes);
  }
  // Where `p`'s tensor is as `want`'s shape: its channels-last layout and type when it has
  // one of that shape, else (turned back first, if need be) plain fp32 NCHW.
  memory::desc MdOf(const void* p, const Nhwc& want) {
    if (const Nhwc* t = TagOf(p); t && t->dims() == want.dims()) return t->md();
    Plain(p);
    return memory::desc(want.dims(), Dt::f32, Tag::nchw);
  }
  void Reorder(const void* src, const memory::desc& s, void* dst, const memory::desc& d) {
    memory sm(s, eng_, const_cast<void*>(src)), dm(d, eng_, dst);
    dnnl::reorder(sm, dm).execute(strm_, sm, dm);
  }

  // Runs a convolution's (or deconvolution's) primitive: an input in another layout or type
  // is reordered into the scratch's tail, the residual copied into y for the sum post-op.
  void RunConv(const ConvPrim& c, const Nhwc& in, const Nhwc& out, const void* x, const void* w,
               const void* bias, const void* residual, void* y, void* scratch) {
    const size_t need = Align(c.scratch) + Align(c.src.get_size());
    char* s = static_cast<char*>(scratch);
    if (!s || static_cast<int64_t>(need) > c.reserved) s = static_cast<char*>(own_scratch_.Get(need));
    const void* src = x;
    if (!IsNhwc(x, in)) {
      src = s + Align(c.scratch);
      Reorder(x, MdOf(x, in), const_cast<void*>(src), c.src);
    }
    if (residual) {  // the sum post-op adds what y holds
      if (IsNhwc(residual, out)) std::memcpy(y, residual, c.dst.get_size());
      else Reorder(residual, MdOf(residual, out), y, c.dst);
    }
    memory src_m(c.src, eng_, const_cast<void*>(src));
    memory wei_m = WeightsFor(c, w);
    memory dst_m(c.dst, eng_, y);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src_m}, {DNNL_ARG_WEIGHTS, wei_m},
                                         {DNNL_ARG_DST, dst_m}, {DNNL_ARG_SCRATCHPAD, Scratchpad(c.scratch, s)}};
    if (bias) args.insert({DNNL_ARG_BIAS, memory(c.bias, eng_, const_cast<void*>(bias))});
    c.prim.execute(strm_, args);
    nhwc_[y] = out;
  }

  const ConvPrim& DeconvFor(const ConvTranspose2dParams& p, bool has_bias) const {
    int64_t pad_b, pad_r;
    DeconvPads(p, &pad_b, &pad_r);
    const std::string key = Key({-1, p.n, p.c_in, p.h_in, p.w_in, p.c_out, p.h_out, p.w_out, p.kh, p.kw,
                                 p.stride_h, p.stride_w, p.pad_t, p.pad_l, pad_b, pad_r, p.dil_h, p.dil_w,
                                 p.groups, has_bias}) + ActKey(p.act);
    auto it = convs_.find(key);
    if (it != convs_.end()) return it->second;
    const bool grouped = p.groups > 1;
    // ONNX's weights are [c_in, c_out / groups, kh, kw]: oneDNN's (g)iohw.
    const Dims wei = grouped ? Dims{p.groups, p.c_out / p.groups, p.c_in / p.groups, p.kh, p.kw}
                             : Dims{p.c_out, p.c_in, p.kh, p.kw};
    ConvPrim c;
    const Dt dt = bf16_ ? Dt::bf16 : Dt::f32;
    c.src = memory::desc({p.n, p.c_in, p.h_in, p.w_in}, dt, Tag::nhwc);
    c.dst = memory::desc({p.n, p.c_out, p.h_out, p.w_out}, dt, Tag::nhwc);
    c.bias = memory::desc({p.c_out}, Dt::f32, Tag::a);
    c.plain_weights = memory::desc(wei, Dt::f32, grouped ? Tag::giohw : Tag::iohw);
    using DF = dnnl::deconvolution_forward;
    DF::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, c.src,
               memory::desc(wei, dt, Tag::any), has_bias ? c.bias : memory::desc(), c.dst,
               {p.stride_h, p.stride_w}, {p.dil_h - 1, p.dil_w - 1}, {p.pad_t, p.pad_l}, {pad_b, pad_r});
    dnnl::post_ops po;
    dnnl::algorithm act_alg;
    float alpha, beta;
    if (EltwiseOf(p.act, &act_alg, &alpha, &beta)) po.append_eltwise(1.f, act_alg, alpha, beta);
    return Cached<DF>(key, std::move(c), d, po);
  }

  // The primitive of kind P (a convolution or a deconvolution) for `d` with post-ops `po`:
  // the weights' layout it chose and its scratch filled into `c`, kept under `key`.
  template <class P>
  const ConvPrim& Cached(const std::string& key, ConvPrim c, const typename P::desc& d, const dnnl::post_ops& po) const {
    dnnl::primitive_attr attr = Attr();
    attr.set_post_ops(po);
    typename P::primitive_desc pd(d, attr, eng_);
    c.weights = pd.weights_desc();
    c.scratch = pd.scratchpad_desc().get_size();
    c.prim = P(pd);
    return convs_.emplace(key, std::move(c)).first->second;
  }

  const ConvPrim& ConvFor(const Conv2dParams& p, bool has_bias, bool has_residual) const {
    const std::string key = Key({p.n, p.c_in, p.h_in, p.w_in, p.c_out, p.h_out, p.w_out, p.kh, p.kw,
                                 p.stride_h, p.stride_w, p.pad_t, p.pad_l, p.pad_b, p.pad_r, p.dil_h,
                                 p.dil_w, p.groups, p.residual_after_act, has_bias, has_residual}) + ActKey(p.act);
    auto it = convs_.find(key);
    if (it != convs_.end()) return it->second;
    const Dims src{p.n, p.c_in, p.h_in, p.w_in}, dst{p.n, p.c_out, p.h_out, p.w_out};
    const bool grouped = p.groups > 1;
    const Dims wei = grouped ? Dims{p.groups, p.c_out / p.groups, p.c_in / p.groups, p.kh, p.kw}
                             : Dims{p.c_out, p.c_in, p.kh, p.kw};
    ConvPrim c;
    const Dt dt = bf16_ ? Dt::bf16 : Dt::f32;  // bf16: activations and weights, fp32 sums
    c.src = memory::desc(src, dt, Tag::nhwc);
    c.dst = memory::desc(dst, dt, Tag::nhwc);
    c.bias = memory::desc({p.c_out}, Dt::f32, Tag::a);
    c.plain_weights = memory::desc(wei, Dt::f32, grouped ? Tag::goihw : Tag::oihw);
    const memory::desc any_w(wei, dt, Tag::any);
    const Dims strides{p.stride_h, p.stride_w}, dil{p.dil_h - 1, p.dil_w - 1};
    const Dims pad_l{p.pad_t, p.pad_l}, pad_r{p.pad_b, p.pad_r};
    using CF = dnnl::convolution_forward;
    const auto prop = dnnl::prop_kind::forward_inference;
    const auto alg = dnnl::algorithm::convolution_direct;
    CF::desc d = has_bias ? CF::desc(prop, alg, c.src, any_w, c.bias, c.dst, strides, dil, pad_l, pad_r)
                          : CF::desc(prop, alg, c.src, any_w, c.dst, strides, dil, pad_l, pad_r);
    dnnl::post_ops po;
    dnnl::algorithm act_alg;
    float alpha, beta;
    const bool has_act = EltwiseOf(p.act, &act_alg, &alpha, &beta);
    if (has_residual && !p.residual_after_act) po.append_sum(1.f);
    if (has_act) po.append_eltwise(1.f, act_alg, alpha, beta);
    if (has_residual && p.residual_after_act) po.append_sum(1.f);
    return Cached<CF>(key, std::move(c), d, po);
  }

  // The convolution's weights in the layout its primitive chose, reordered once.
  // In the weights' own buffer where the chosen layout is no larger (bf16, or no padding):
  // the plain copy is not kept twice (the pipeline's peak RSS). Else a copy of their own.
  memory WeightsFor(const ConvPrim& c, const void* w) {
    auto t = reordered_.find(w);
    const memory::desc have = t == reordered_.end() ? c.plain_weights : t->second;
    if (c.weights == have) return memory(c.weights, eng_, const_cast<void*>(w));
    if (t == reordered_.end() && c.weights.get_size() <= c.plain_weights.get_size()) {
      void* tmp = plain_tmp_.Get(c.weights.get_size());
      Reorder(w, have, tmp, c.weights);
      std::memcpy(const_cast<void*>(w), tmp, c.weights.get_size());
      reordered_[w] = c.weights;
      return memory(c.weights, eng_, const_cast<void*>(w));
    }
    std::string key(reinterpret_cast<const char*>(&w), sizeof w);
    key += std::to_string(reinterpret_cast<uintptr_t>(&c));
    auto it = weights_.find(key);
    if (it != weights_.end()) return it->second;
    memory src(have, eng_, const_cast<void*>(w));
    memory dst(c.weights, eng_);
    dnnl::reorder(src, dst).execute(strm_, src, dst);
    return weights_.emplace(key, dst).first->second;
  }
  // Weights as the reference reads them (OIHW fp32): `w` itself, or, where a primitive
  // reordered them in place, a plain copy in the temporary buffer.
  const void* PlainWeights(const Conv2dParams& p, const void* w) {
    auto t = reordered_.find(w);
    if (t == reordered_.end()) return w;
    const bool grouped = p.groups > 1;
    const Dims wei = grouped ? Dims{p.groups, p.c_out / p.groups, p.c_in / p.groups, p.kh, p.kw}
                             : Dims{p.c_out, p.c_in, p.kh, p.kw};
    const memory::desc plain(wei, Dt::f32, grouped ? Tag::goihw : Tag::oihw);
    void* tmp = own_scratch_.Get(plain.get_size());
    Reorder(w, t->second, tmp, plain);
    return tmp;
  }

  bool bf16_ = false;
  std::unique_ptr<Kernels> ref_;
  dnnl::engine eng_;
  dnnl::stream strm_;
  std::map<const void*, int64_t> live_;  // allocated blocks' sizes, for Free's tags
  std::unordered_map<const void*, Nhwc> nhwc_;
  mutable std::map<std::string, ConvPrim> convs_;  // std::map: WeightsFor keys on a ConvPrim's address
  std::unordered_map<std::string, memory> weights_;
  std::unordered_map<const void*, memory::desc> reordered_;  // weights reordered in place
  std::unordered_map<std::string, Prim> pools_, binaries_, eltwises_, matmuls_, resamplings_;
  std::unordered_map<std::string, dnnl::concat> concats_;
  Temp own_scratch_, plain_tmp_;
};

}  // namespace

void SetCpuInferenceThreads(int threads) { omp_set_num_threads(std::max(1, threads)); }
int CpuInferenceThreads() { return omp_get_max_threads(); }
bool InferenceStarted() { return g_started; }

bool CpuHasBf16() {
  const auto isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

std::unique_ptr<Kernels> MakeDnnlKernels(DnnlOptions options) {
  return std::make_unique<DnnlKernels>(options);
}

}  // namespace framemill::engine
