// The oneDNN Kernels: each step as oneDNN primitives (primitives.h: made once per shape, in a
// form that runs on a JIT kernel), its tensors kept channels-last between them (layouts.h),
// our own loops where oneDNN lacks the op on that layout (own_loops.h), and the reference
// kernels for the rest, on plain NCHW.
#include "engine/dnnl/dnnl_kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <omp.h>

#include "engine/dnnl/dnnl_internal.h"
#include "engine/dnnl/layouts.h"
#include "engine/dnnl/own_loops.h"
#include "engine/dnnl/primitives.h"
#include "engine/reference/cpu_kernels.h"

namespace framemill::engine {
namespace {

using namespace dnnl_detail;

std::atomic<bool> g_started{false};

class DnnlKernels final : public Kernels {
 public:
  explicit DnnlKernels(DnnlOptions o)
      : ref_(MakeCpuKernels(o.memory_limit)),
        eng_(dnnl::engine::kind::cpu, 0),
        strm_(eng_),
        prims_(eng_, o.bf16 && CpuHasBf16()),
        layouts_(eng_, strm_, prims_, note_) {
    g_started = true;
  }
  ~DnnlKernels() override = default;  // ref_ frees what it allocated
  std::string name() const override { return "cpu"; }
  Status Prepare(StorageType storage) override {
    if (storage != StorageType::kFloat32) return Status::Unsupported("the oneDNN CPU kernels store fp32 only");
    return ref_->Prepare(storage);
  }
  StepNote LastStepNote() const override { return note_; }

  // ---- memory: the reference kernels' (host memory, the same limit) ----
  Status Alloc(size_t bytes, void** out) override {
    FM_RETURN_IF_ERROR(ref_->Alloc(bytes, out));
    layouts_.Allocated(*out, static_cast<int64_t>(bytes));
    return Status::OK();
  }
  void Free(void* p) override {
    layouts_.Freed(p);
    ref_->Free(p);
  }
  Status Upload(void* dst, const void* src, size_t bytes) override {
    ParallelCopy(dst, src, bytes);
    layouts_.Uploaded(dst);
    return Status::OK();
  }
  Status Download(void* dst, const void* src, size_t bytes) override {
    return Guard([&] { layouts_.Download(dst, src, bytes); });
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
      return static_cast<int64_t>(prims_.Conv(p, true, false).NeedBytes());
    } catch (const std::exception&) {
      return 0;
    }
  }

  // ---- steps ----
  Status Conv2d(const Conv2dParams& p, const void* x, const void* w, const void* bias, const void* residual, void* y,
                void* scratch) override {
    return Guard([&] {
      if (!DnnlTakes(p)) {
        layouts_.Plain(x);
        if (residual) layouts_.Plain(residual);
        Check(ref_->Conv2d(p, x, PlainWeights(p.groups, p.c_out, p.c_in, p.kh, p.kw, w), bias, residual, y, scratch));
        layouts_.Clear(y);
        return;
      }
      if (!residual && FewOutputs(p) && layouts_.IsNhwc(x, {p.n, p.c_in, p.h_in, p.w_in, Dt::f32})) {
        ConvFewOutputs(p, static_cast<const float*>(x), static_cast<const float*>(PlainWeights(p.groups, p.c_out,
                                                                                              p.c_in, p.kh, p.kw, w)),
                       static_cast<const float*>(bias), static_cast<float*>(y));
        layouts_.Clear(y);
        ActivateInPlace(p.act, static_cast<float*>(y), p.n * p.c_out * p.h_out * p.w_out);
        return;
      }
      const ConvPrim& c = prims_.Conv(p, bias != nullptr, residual != nullptr);
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
  int64_t ConvTranspose2dScratchBytes(const ConvTranspose2dParams& p) const override {
    int64_t pb, pr;
    if (!DeconvPads(p, &pb, &pr) || Blockwise(p)) return 0;
    try {
      return static_cast<int64_t>(prims_.Deconv(p, pb, pr, true).NeedBytes());
    } catch (const std::exception&) {
      return 0;
    }
  }
  // oneDNN's deconvolution, channels-last like the convolutions (selfie's last layer, a
  // 16 -> 1 channel 2x up-sampling: 1.83 ms a forward on the reference, 45% of the model).
  Status ConvTranspose2d(const ConvTranspose2dParams& p, const void* x, const void* w, const void* bias, void* y,
                         void* scratch) override {
    int64_t pb, pr;
    if (!DeconvPads(p, &pb, &pr))
      return OnReference(x, y, [&] { return ref_->ConvTranspose2d(p, x, w, bias, y, scratch); });
    if (Blockwise(p)) {
      return Guard([&] {
        const bool cl = layouts_.IsNhwc(x, {p.n, p.c_in, p.h_in, p.w_in, Dt::f32});
        if (!cl) layouts_.Plain(x);
        DeconvBlocks(p, static_cast<const float*>(x), cl, static_cast<const float*>(w),
                     static_cast<const float*>(bias), static_cast<float*>(y));
        layouts_.Clear(y);
        ActivateInPlace(p.act, static_cast<float*>(y), p.n * p.c_out * p.h_out * p.w_out);
      });
    }
    return Guard([&] {
      const ConvPrim& c = prims_.Deconv(p, pb, pr, bias != nullptr);
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
      if (const Nhwc* t = layouts_.TagOf(x); t && *t == in.As(t->dt)) in.dt = out.dt = t->dt;
      const bool cl = layouts_.IsNhwc(x, in);
      if (!cl) layouts_.Plain(x);
      const Tag tag = cl ? Tag::nhwc : Tag::nchw;
      const dnnl::algorithm alg = p.kind == PoolKind::kMax ? dnnl::algorithm::pooling_max
                                  : p.count_include_pad    ? dnnl::algorithm::pooling_avg_include_padding
                                                           : dnnl::algorithm::pooling_avg_exclude_padding;
      const std::string key = Key({p.kind == PoolKind::kMax, p.count_include_pad, cl, static_cast<int64_t>(in.dt), p.n,
                                   p.c, p.h_in, p.w_in, p.h_out, p.w_out, p.kh, p.kw, p.stride_h, p.stride_w, p.pad_t,
                                   p.pad_l, pb, pr, p.dil_h, p.dil_w});
      const memory::desc s(in.dims(), in.dt, tag), d(out.dims(), out.dt, tag);
      const dnnl::pooling_v2_forward::desc pd_desc(dnnl::prop_kind::forward_inference, alg, s, d,
                                                   {p.stride_h, p.stride_w}, {p.kh, p.kw}, {p.dil_h - 1, p.dil_w - 1},
                                                   {p.pad_t, p.pad_l}, {pb, pr});
      RunSrcDst(prims_.Pool(key, pd_desc, s, d), x, y);
      if (cl) layouts_.Set(y, out); else layouts_.Clear(y);
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
      if (ad != full && bd == full &&
          (p.op == BinaryOp::kAdd || p.op == BinaryOp::kMul || p.op == BinaryOp::kMax || p.op == BinaryOp::kMin)) {
        std::swap(x0, x1);
        std::swap(ad, bd);
      }
      if (ad != full || (bd == full && x1 == out && x0 != out)) return RefBinary(p, a, b, out);
      // Channels-last where the full operand is, and the other one's too when it is full.
      const bool four = p.rank == 4;
      Nhwc shape = four ? Nhwc{full[0], full[1], full[2], full[3]} : Nhwc{};
      if (const Nhwc* t = layouts_.TagOf(x0); four && bd == full && t && *t == shape.As(t->dt) && layouts_.IsNhwc(x1, *t))
        shape.dt = t->dt;  // both bf16 (or both fp32) channels-last
      bool cl = four && layouts_.IsNhwc(x0, shape);
      if (cl && bd == full && !layouts_.IsNhwc(x1, shape)) cl = false;
      if (!cl) layouts_.Plain(x0);
      if (!(cl && bd == full)) layouts_.Plain(x1);
      auto md = [&](const Dims& d, bool channels_last) {
        if (channels_last) return memory::desc(d, shape.dt, Tag::nhwc);
        return memory::desc(d, Dt::f32, DenseStrides(d));
      };
      const memory::desc m0 = md(full, cl), m1 = md(bd, cl && bd == full), md_out = md(full, cl);
      const Prim& bp = prims_.Binary(alg, m0, m1, md_out, p.act);
      Merge(&note_, bp.note);
      bp.prim.execute(strm_, {{DNNL_ARG_SRC_0, memory(m0, eng_, const_cast<void*>(x0))},
                              {DNNL_ARG_SRC_1, memory(m1, eng_, const_cast<void*>(x1))},
                              {DNNL_ARG_DST, memory(md_out, eng_, out)},
                              {DNNL_ARG_SCRATCHPAD, Scratchpad(bp.scratch)}});
      ActAfter(bp, out);
      if (cl) layouts_.Set(out, shape); else layouts_.Clear(out);
    });
  }

  Status Unary(const UnaryParams& p, const void* x, void* y) override {
    return Guard([&] {
      const Nhwc* t = layouts_.TagOf(x);
      std::optional<Nhwc> keep;
      dnnl::algorithm alg;
      float alpha, beta;
      const bool mapped = EltwiseOf(p, &alg, &alpha, &beta);
      if (t && t->elements() == p.count && (mapped || t->dt == Dt::f32)) keep = *t; else layouts_.Plain(x);
      if (mapped) {
        const memory::desc m({p.count}, keep ? keep->dt : Dt::f32, Tag::a);
        const Prim& e = prims_.Eltwise(alg, m, alpha, beta);
        Merge(&note_, e.note);
        e.prim.execute(strm_, {{DNNL_ARG_SRC, memory(m, eng_, const_cast<void*>(x))}, {DNNL_ARG_DST, memory(m, eng_, y)}});
      } else {
        Check(ref_->Unary(p, x, y));  // elementwise: the layout does not matter
      }
      if (keep) layouts_.Set(y, *keep); else layouts_.Clear(y);
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

  // A channels-last fp32 input is resized channels-last by our loop (own_loops.h), any mode; a
  // channels-last bf16 input goes to oneDNN's resampling where it computes the same; the rest
  // runs on the reference.
  Status Resize(const ResizeParams& p, const void* x, void* y) override {
    const Nhwc* t = layouts_.TagOf(x);
    const bool channels_last = t && t->n * t->c == p.planes && t->h == p.h_in && t->w == p.w_in;
    if (channels_last && t->dt == Dt::f32) {
      return Guard([&] {
        const Nhwc in = *t;
        ResizeChannelsLast(p, in.n, in.c, static_cast<const float*>(x), static_cast<float*>(y));
        layouts_.Set(y, {in.n, in.c, p.h_out, p.w_out, Dt::f32});
      });
    }
    if (!channels_last || t->dt != Dt::bf16 || !ResamplingTakes(p))
      return OnReference(x, y, [&] { return ref_->Resize(p, x, y); });
    return Guard([&] {
      const Nhwc in = *t, out{t->n, t->c, p.h_out, p.w_out, t->dt};
      const std::string key = Key({-2, p.mode == ResizeMode::kLinear, static_cast<int64_t>(in.dt), in.n, in.c, p.h_in,
                                   p.w_in, p.h_out, p.w_out});
      const memory::desc s(in.dims(), in.dt, Tag::nhwc), d(out.dims(), out.dt, Tag::nhwc);
      const auto alg = p.mode == ResizeMode::kLinear ? dnnl::algorithm::resampling_linear
                                                     : dnnl::algorithm::resampling_nearest;
      RunSrcDst(prims_.Resampling(key, dnnl::resampling_forward::desc(dnnl::prop_kind::forward_inference, alg, s, d), s,
                                  d),
                x, y);
      layouts_.Set(y, out);
    });
  }

  Status Pad(const PadParams& p, const void* x, void* y) override {
    const Nhwc* t = layouts_.TagOf(x);
    if (!t || t->dt != Dt::f32 || !ChannelsOnly(p, *t)) return OnReference(x, y, [&] { return ref_->Pad(p, x, y); });
    return Guard([&] {
      const Nhwc in = *t;
      const int64_t c_out = in.c + p.before[1] + p.after[1];
      PadChannelsLast(static_cast<const float*>(x), in.n * in.h * in.w, in.c, p.before[1], p.after[1], p.value,
                      static_cast<float*>(y));
      layouts_.Set(y, {in.n, c_out, in.h, in.w, Dt::f32});
    });
  }

  Status Concat(const ConcatParams& p, const void* const* inputs, void* y) override {
    return Guard([&] {
      // Channels-last when every input is, as [outer, c_k, h, w] with h * w = inner.
      bool cl = p.count > 0;
      int64_t h = 0, w = 0, total = 0;
      Dt dt = Dt::f32;
      for (int k = 0; k < p.count && cl; ++k) {
        const Nhwc* t = layouts_.TagOf(inputs[k]);
        if (k == 0 && t) dt = t->dt;
        cl = t && t->n == p.outer && t->c == p.axis_sizes[k] && t->h * t->w == p.inner && t->dt == dt &&
             (k == 0 || (t->h == h && t->w == w));
        if (cl) { h = t->h; w = t->w; total += t->c; }
      }
      if (!cl) {
        for (int k = 0; k < p.count; ++k) layouts_.Plain(inputs[k]);
        Check(ref_->Concat(p, inputs, y));
        layouts_.Clear(y);
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
      const dnnl::concat& cat = prims_.Concat(key, dst, srcs, &note_);
      std::unordered_map<int, memory> args{{DNNL_ARG_DST, memory(dst, eng_, y)}};
      for (int k = 0; k < p.count; ++k)
        args.insert({DNNL_ARG_MULTIPLE_SRC + k, memory(srcs[k], eng_, const_cast<void*>(inputs[k]))});
      cat.execute(strm_, args);
      layouts_.Set(y, out);
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
        const memory::desc src = layouts_.MdOf(x, want);
        layouts_.Reorder(x, src, y, memory::desc(want.dims(), Dt::f32, Tag::nhwc));
        layouts_.Clear(y);
        return;
      }
      layouts_.Plain(x);  // x is [n, h, w, c]: y's [n, c, h, w] held channels-last is x's bytes
      ParallelCopy(y, x, static_cast<size_t>(d[0] * d[1] * d[2] * d[3]) * 4);
      layouts_.Set(y, {d[0], d[3], d[1], d[2], Dt::f32});
    });
  }

  Status Slice(const SliceParams& p, const void* x, void* y) override {
    return Guard([&] {
      // A channels-last 4-D input sliced with unit steps: a reorder of its sub-block.
      bool unit = p.rank == 4;
      for (int d = 0; d < p.rank && unit; ++d) unit = p.steps[d] == 1;
      Nhwc in = unit ? Nhwc{p.in_dims[0], p.in_dims[1], p.in_dims[2], p.in_dims[3]} : Nhwc{};
      if (const Nhwc* t = layouts_.TagOf(x); unit && t && *t == in.As(t->dt)) in.dt = t->dt;
      if (!unit || !layouts_.IsNhwc(x, in)) {
        Check(OnReference(x, y, [&] { return ref_->Slice(p, x, y); }));
        return;
      }
      const Nhwc out{p.out_dims[0], p.out_dims[1], p.out_dims[2], p.out_dims[3], in.dt};
      const memory::desc whole = in.md();
      const memory::desc part = whole.submemory_desc(out.dims(), {p.starts[0], p.starts[1], p.starts[2], p.starts[3]});
      layouts_.Reorder(x, part, y, out.md());
      layouts_.Set(y, out);
    });
  }

  // A global average or max pool of a channels-last tensor (the mean or max over h x w of
  // each channel) as oneDNN's pooling over the whole plane (centernet's nine: 5.7 ms a forward
  // turned back and reduced on the reference); every other reduction on the reference.
  Status Reduce(const ReduceParams& p, const void* x, void* y) override {
    const Nhwc* t = layouts_.TagOf(x);
    const bool global = t && t->dt == Dt::f32 && p.inner == 1 && t->n * t->c == p.outer && t->h * t->w == p.reduce &&
                        (p.op == ReduceOp::kMean || p.op == ReduceOp::kMax);
    if (!global) return OnReference(x, y, [&] { return ref_->Reduce(p, x, y); });
    Pool2dParams g;
    g.kind = p.op == ReduceOp::kMean ? PoolKind::kAvg : PoolKind::kMax;
    g.n = t->n; g.c = t->c; g.h_in = t->h; g.w_in = t->w; g.h_out = g.w_out = 1;
    g.kh = static_cast<int32_t>(t->h); g.kw = static_cast<int32_t>(t->w);
    FM_RETURN_IF_ERROR(Pool2d(g, x, y));
    layouts_.Clear(y);  // [n, c, 1, 1]: channels-last is plain
    return Status::OK();
  }
  Status Softmax(const SoftmaxParams& p, const void* x, void* y) override {
    return OnReference(x, y, [&] { return ref_->Softmax(p, x, y); });
  }

  Status MatMul(const MatMulParams& p, const void* a, const void* b, const void* c, void* y, void* scratch) override {
    return Guard([&] {
      layouts_.Plain(a);
      layouts_.Plain(b);
      if (c) layouts_.Plain(c);
      layouts_.Clear(y);
      const bool a_dense = p.a_batch_stride == 0 || p.a_batch_stride == p.m * p.k;
      const bool b_dense = p.b_batch_stride == 0 || p.b_batch_stride == p.k * p.n;
      Dims bias_dims;
      const bool bias_ok = !c || (p.beta == 1 && BiasDims(p, &bias_dims));
      if (p.alpha != 1 || !a_dense || !b_dense || !bias_ok) {
        Check(ref_->MatMul(p, a, b, c, y, scratch));
        return;
      }
      const int64_t ba = p.a_batch_stride ? p.batch : 1, bb = p.b_batch_stride ? p.batch : 1;
      const memory::desc am({ba, p.m, p.k}, Dt::f32, p.trans_a ? Dims{p.m * p.k, 1, p.m} : Dims{p.m * p.k, p.k, 1});
      const memory::desc bm({bb, p.k, p.n}, Dt::f32, p.trans_b ? Dims{p.k * p.n, 1, p.k} : Dims{p.k * p.n, p.n, 1});
      const memory::desc ym({p.batch, p.m, p.n}, Dt::f32, Tag::abc);
      const memory::desc cm = c ? memory::desc(bias_dims, Dt::f32, Tag::abc) : memory::desc();
      const std::string key = Key({p.batch, p.m, p.n, p.k, p.trans_a, p.trans_b, ba, bb, c != nullptr,
                                   c ? bias_dims[1] : 0, c ? bias_dims[2] : 0}) + ActKey(p.act);
      const Prim& mp = prims_.MatMul(key, am, bm, cm, ym, p.act);
      Merge(&note_, mp.note);
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(am, eng_, const_cast<void*>(a))},
                                           {DNNL_ARG_WEIGHTS, memory(bm, eng_, const_cast<void*>(b))},
                                           {DNNL_ARG_DST, memory(ym, eng_, y)},
                                           {DNNL_ARG_SCRATCHPAD, Scratchpad(mp.scratch)}};
      if (c) args.insert({DNNL_ARG_BIAS, memory(cm, eng_, const_cast<void*>(c))});
      mp.prim.execute(strm_, args);
      ActAfter(mp, y);
    });
  }

  Status ArgMax(const ArgMaxParams& p, const void* x, void* y) override {
    return OnReference(x, y, [&] { return ref_->ArgMax(p, x, y); });
  }
  Status Copy(const void* src, void* dst, int64_t elements) override {
    return Guard([&] {
      const Nhwc* t = layouts_.TagOf(src);
      std::optional<Nhwc> keep;
      if (t && t->elements() == elements) keep = *t; else layouts_.Plain(src);
      ParallelCopy(dst, src, static_cast<size_t>(elements) * 4);
      if (keep) layouts_.Set(dst, *keep); else layouts_.Clear(dst);
    });
  }

 private:
  // Runs one step: a fresh note, oneDNN's and our errors as a Status.
  template <class F>
  Status Guard(F&& f) {
    note_ = {};
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
  // A reference kernel on `x` as plain NCHW; its output `y` is plain.
  template <class F>
  Status OnReference(const void* x, void* y, F&& kernel) {
    return Guard([&] {
      layouts_.Plain(x);
      Check(kernel());
      layouts_.Clear(y);
    });
  }
  void RunSrcDst(const Prim& p, const void* x, void* y) {
    Merge(&note_, p.note);
    p.prim.execute(strm_, {{DNNL_ARG_SRC, memory(p.a, eng_, const_cast<void*>(x))},
                           {DNNL_ARG_DST, memory(p.c, eng_, y)},
                           {DNNL_ARG_SCRATCHPAD, Scratchpad(p.scratch)}});
  }
  // The activation a primitive's form split off, on its output in place.
  void ActAfter(const Prim& p, void* y) {
    if (!p.act_after) return;
    memory m(p.act_md, eng_, y);
    p.act_after->execute(strm_, {{DNNL_ARG_SRC, m}, {DNNL_ARG_DST, m}});
  }
  // A fused activation applied afterwards, in place on plain fp32 values.
  void ActivateInPlace(const ActivationParams& a, float* v, int64_t count) {
    dnnl::algorithm alg;
    float alpha, beta;
    if (!EltwiseOf(a, &alg, &alpha, &beta)) return;
    const memory::desc m({count}, Dt::f32, Tag::a);
    const Prim& e = prims_.Eltwise(alg, m, alpha, beta);
    Merge(&note_, e.note);
    memory mm(m, eng_, v);
    e.prim.execute(strm_, {{DNNL_ARG_SRC, mm}, {DNNL_ARG_DST, mm}});
  }
  // A oneDNN user scratchpad of `bytes` at `at` (the kernels' own buffer when null).
  memory Scratchpad(size_t bytes, void* at = nullptr) {
    return memory(memory::desc({static_cast<int64_t>(bytes)}, Dt::u8, Tag::a), eng_,
                  at ? at : own_scratch_.Get(bytes + 1));
  }
  void RefBinary(const BinaryParams& p, const void* a, const void* b, void* out) {
    layouts_.Plain(a);
    layouts_.Plain(b);
    Check(ref_->Binary(p, a, b, out));
    layouts_.Clear(out);
  }

  // PReLU of a channels-last fp32 tensor with one slope per channel (or one for all), written
  // channels-last; the rest on the reference.
  void PRelu(const BinaryParams& p, const void* a, const void* b, void* out) {
    const Nhwc* t = layouts_.TagOf(a);
    const bool per_channel = p.b_strides[0] == 0 && p.b_strides[2] == 0 && p.b_strides[3] == 0 &&
                             (p.b_strides[1] == 1 || p.b_strides[1] == 0);
    if (p.rank != 4 || !t || t->dt != Dt::f32 || !(*t == Nhwc{p.dims[0], p.dims[1], p.dims[2], p.dims[3]}) ||
        !per_channel || p.act.kind != Activation::kNone)
      return RefBinary(p, a, b, out);
    const Nhwc shape = *t;
    std::vector<float> k(static_cast<size_t>(shape.c));  // one slope a channel
    for (int64_t ch = 0; ch < shape.c; ++ch) k[ch] = static_cast<const float*>(b)[ch * p.b_strides[1]];
    PReluChannelsLast(static_cast<const float*>(a), k.data(), shape.n * shape.h * shape.w, shape.c,
                      static_cast<float*>(out));
    layouts_.Set(out, shape);
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
  static bool BiasDims(const MatMulParams& p, Dims* d) {
    if (p.c_stride_m == 0 && p.c_stride_n == 0) *d = {1, 1, 1};
    else if (p.c_stride_m == 0 && p.c_stride_n == 1) *d = {1, 1, p.n};
    else if (p.c_stride_m == 1 && p.c_stride_n == 0) *d = {1, p.m, 1};
    else if (p.c_stride_m == p.n && p.c_stride_n == 1) *d = {1, p.m, p.n};
    else return false;
    return true;
  }

  // Runs a convolution's (or deconvolution's) primitive and what its form split off. The
  // scratch holds [the primitive's scratchpad | the source reordered | the residual reordered]:
  // an input in another layout or type is reordered there; the residual is copied into y for
  // the sum post-op, or read where it lies (in dst's layout) by a separate add.
  void RunConv(const ConvPrim& c, const Nhwc& in, const Nhwc& out, const void* x, const void* w, const void* bias,
               const void* residual, void* y, void* scratch) {
    Merge(&note_, c.note);
    const size_t need = c.NeedBytes();
    char* s = static_cast<char*>(scratch);
    if (!s || static_cast<int64_t>(need) > c.reserved) s = static_cast<char*>(own_scratch_.Get(need));
    const void* src = x;
    if (!layouts_.IsNhwc(x, in)) {
      src = s + Align(c.scratch);
      layouts_.Reorder(x, layouts_.MdOf(x, in), const_cast<void*>(src), c.src);
    }
    const void* res = residual;
    if (residual && !c.ReadsResidual()) {  // the sum post-op adds what y holds
      if (layouts_.IsNhwc(residual, out)) ParallelCopy(y, residual, c.dst.get_size());
      else layouts_.Reorder(residual, layouts_.MdOf(residual, out), y, c.dst);
    } else if (residual && !layouts_.IsNhwc(residual, out)) {
      res = s + Align(c.scratch) + Align(c.src.get_size());
      layouts_.Reorder(residual, layouts_.MdOf(residual, out), const_cast<void*>(res), c.dst);
    }
    memory dst_m(c.dst, eng_, y);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, memory(c.src, eng_, const_cast<void*>(src))},
                                         {DNNL_ARG_WEIGHTS, layouts_.WeightsFor(c.weights, PlainWeightsDesc(c), w, &c)},
                                         {DNNL_ARG_DST, dst_m},
                                         {DNNL_ARG_SCRATCHPAD, Scratchpad(c.scratch, s)}};
    if (bias) args.insert({DNNL_ARG_BIAS, memory(c.bias, eng_, const_cast<void*>(bias))});
    c.prim.execute(strm_, args);
    auto add = [&] {
      memory r(c.dst, eng_, const_cast<void*>(res));
      c.add->prim.execute(strm_, {{DNNL_ARG_SRC_0, dst_m}, {DNNL_ARG_SRC_1, r}, {DNNL_ARG_DST, dst_m},
                                  {DNNL_ARG_SCRATCHPAD, Scratchpad(c.add->scratch)}});
    };
    if (c.add && !c.residual_after_act) add();
    if (c.act) c.act->prim.execute(strm_, {{DNNL_ARG_SRC, dst_m}, {DNNL_ARG_DST, dst_m}});
    if (c.add && c.residual_after_act) add();
    layouts_.Set(y, out);
  }
  // The weights' plain layout as oneDNN reads ONNX's (fp32 (g)oihw, or (g)iohw for a
  // transposed convolution): ConvPrim::plain_weights.
  static const memory::desc& PlainWeightsDesc(const ConvPrim& c) { return c.plain_weights; }
  // A convolution's weights as the reference reads them (OIHW fp32).
  const void* PlainWeights(int32_t groups, int64_t c_out, int64_t c_in, int32_t kh, int32_t kw, const void* w) {
    const bool grouped = groups > 1;
    const Dims wei = grouped ? Dims{groups, c_out / groups, c_in / groups, kh, kw} : Dims{c_out, c_in, kh, kw};
    return layouts_.PlainWeights(memory::desc(wei, Dt::f32, grouped ? Tag::goihw : Tag::oihw), w, own_scratch_);
  }

  std::unique_ptr<Kernels> ref_;
  dnnl::engine eng_;
  dnnl::stream strm_;
  StepNote note_;  // what the step being run gave up (LastStepNote)
  mutable Primitives prims_;
  Layouts layouts_;
  Temp own_scratch_;
};

}  // namespace

void SetCpuInferenceThreads(int threads) { omp_set_num_threads(std::max(1, threads)); }
int CpuInferenceThreads() { return omp_get_max_threads(); }
bool InferenceStarted() { return g_started; }

bool CpuHasBf16() {
  const auto isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

std::string CpuIsa() { return dnnl_detail::IsaName(); }

std::unique_ptr<Kernels> MakeDnnlKernels(DnnlOptions options) { return std::make_unique<DnnlKernels>(options); }

}  // namespace framemill::engine
