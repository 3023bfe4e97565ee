#include "engine/dnnl/primitives.h"

#include <cstdio>

namespace framemill::engine::dnnl_detail {

std::string IsaName() {
  using I = dnnl::cpu_isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case I::sse41: return "sse41";
    case I::avx: return "avx";
    case I::avx2: return "avx2";
    case I::avx2_vnni: return "avx2_vnni";
    case I::avx512_mic: return "avx512_mic";
    case I::avx512_mic_4ops: return "avx512_mic_4ops";
    case I::avx512_core: return "avx512_core";
    case I::avx512_core_vnni: return "avx512_core_vnni";
    case I::avx512_core_bf16: return "avx512_core_bf16";
    case I::avx512_core_amx: return "avx512_core_amx";
    case I::all: return "all";
  }
  return "unknown";
}

bool IsReference(const std::string& impl) { return impl.rfind("ref", 0) == 0; }

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
    case UnaryOp::kSquare: *alg = A::eltwise_square; return true;
    case UnaryOp::kAffine: *alg = A::eltwise_linear; *alpha = u.alpha; *beta = u.beta; return true;
    // identity, rsqrt, reciprocal, pow, floor, ceil, erf, hard sigmoid and swish; and log:
    // oneDNN's is a polynomial, log(1) = -1.4e-6 at AVX-512 (ONNX's test_log_example), where
    // the reference's std::log gives 0.
    default: return false;
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

std::string ActName(const ActivationParams& a) {
  char b[64];
  switch (a.kind) {
    case Activation::kNone: return "none";
    case Activation::kRelu: return "relu";
    case Activation::kLeakyRelu: std::snprintf(b, sizeof b, "relu:%g", a.alpha); return b;
    case Activation::kClip: std::snprintf(b, sizeof b, "clip_v2:%g:%g", a.lo, a.hi); return b;
    case Activation::kSigmoid: return "logistic";
    case Activation::kTanh: return "tanh";
    case Activation::kSwish: return "swish";
  }
  return "?";
}

std::string ConvForm::Name(bool has_residual, bool residual_after_act, const ActivationParams& act) const {
  const bool has_act = act.kind != Activation::kNone;
  std::vector<std::string> fused, after;
  const std::string res = residual == Residual::kSum ? "sum" : "";
  const bool act_in_conv = has_act && !act_separate && !(has_residual && residual == Residual::kSeparate && !residual_after_act);
  if (has_residual && !res.empty() && !residual_after_act) fused.push_back(res);
  if (act_in_conv) fused.push_back("eltwise_" + ActName(act));
  if (has_residual && !res.empty() && residual_after_act) fused.push_back(res);
  if (has_residual && residual == Residual::kSeparate && !residual_after_act)
    after.push_back(std::string("a binary add") + (has_act && !act_separate ? " with eltwise_" + ActName(act) : ""));
  if (act_separate && has_act) after.push_back("an eltwise_" + ActName(act));
  if (has_residual && residual == Residual::kSeparate && residual_after_act) after.push_back("a binary add");
  std::string s = fused.empty() ? "no post-op" : "post-ops ";
  for (size_t k = 0; k < fused.size(); ++k) s += (k ? "+" : "") + fused[k];
  for (size_t k = 0; k < after.size(); ++k) s += (k ? ", then " : " then ") + after[k];
  if (plain_weights) s += ", plain weights";
  return s;
}

namespace {

using Residual = ConvForm::Residual;

// The forms to try for a convolution, fastest first: each split costs one more pass over the
// output (at AVX2, YOLOv8's 3x3 bottleneck at 64 channels of 40x40: 0.60 ms with the residual's
// add split off, 83 ms fused on the reference kernel; bench/README "Every CPU"). The activation
// split with the residual still fused before it only where the residual comes first (the sum
// then the activation).
std::vector<ConvForm> ConvForms(bool has_act, bool has_residual, bool residual_after_act) {
  std::vector<ConvForm> forms;
  for (bool plain : {false, true}) {
    forms.push_back({Residual::kSum, false, plain});
    if (has_residual) forms.push_back({Residual::kSeparate, false, plain});
    if (!has_act) continue;
    if (!has_residual) {
      forms.push_back({Residual::kSum, true, plain});
    } else {
      if (!residual_after_act) forms.push_back({Residual::kSum, true, plain});
      forms.push_back({Residual::kSeparate, true, plain});
    }
  }
  return forms;
}

// The post-ops of a convolution in form `f`.
dnnl::post_ops PostOps(const ConvForm& f, bool has_residual, bool residual_after_act, const ActivationParams& act) {
  dnnl::post_ops po;
  dnnl::algorithm alg;
  float alpha, beta;
  const bool has_act = EltwiseOf(act, &alg, &alpha, &beta);
  const bool fuse_res = has_residual && f.residual != Residual::kSeparate;
  // A residual added after the convolution but before the activation takes the activation with it.
  const bool fuse_act = has_act && !f.act_separate && !(has_residual && f.residual == Residual::kSeparate && !residual_after_act);
  if (fuse_res && !residual_after_act) po.append_sum(1.f);
  if (fuse_act) po.append_eltwise(1.f, alg, alpha, beta);
  if (fuse_res && residual_after_act) po.append_sum(1.f);
  return po;
}

std::string ConvWhat(const char* kind, int64_t c_in, int64_t h_in, int64_t w_in, int64_t c_out, int64_t h_out,
                     int64_t w_out, int kh, int kw, int stride, int groups, const std::string& post_ops) {
  char b[256];
  std::snprintf(b, sizeof b, "%s %lldx%lldx%lld -> %lldx%lldx%lld, %dx%d kernel, stride %d, %d group(s), %s", kind,
                (long long)c_in, (long long)h_in, (long long)w_in, (long long)c_out, (long long)h_out, (long long)w_out,
                kh, kw, stride, groups, post_ops.c_str());
  return b;
}

std::string MdKey(const memory::desc& m) {
  return std::string(reinterpret_cast<const char*>(&m.data), sizeof m.data);
}

}  // namespace

dnnl::primitive_attr Primitives::Attr() const {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (bf16_) attr.set_fpmath_mode(dnnl::fpmath_mode::bf16);
  return attr;
}

const ConvPrim& Primitives::Conv(const Conv2dParams& p, bool has_bias, bool has_residual) const {
  const std::string key = Key({p.n, p.c_in, p.h_in, p.w_in, p.c_out, p.h_out, p.w_out, p.kh, p.kw, p.stride_h,
                               p.stride_w, p.pad_t, p.pad_l, p.pad_b, p.pad_r, p.dil_h, p.dil_w, p.groups,
                               p.residual_after_act, has_bias, has_residual}) + ActKey(p.act);
  if (auto it = convs_.find(key); it != convs_.end()) return it->second;
  const bool grouped = p.groups > 1;
  const Dims wei = grouped ? Dims{p.groups, p.c_out / p.groups, p.c_in / p.groups, p.kh, p.kw}
                           : Dims{p.c_out, p.c_in, p.kh, p.kw};
  ConvPrim c;
  const Dt dt = bf16_ ? Dt::bf16 : Dt::f32;  // bf16: activations and weights, fp32 sums
  c.src = memory::desc({p.n, p.c_in, p.h_in, p.w_in}, dt, Tag::nhwc);
  c.dst = memory::desc({p.n, p.c_out, p.h_out, p.w_out}, dt, Tag::nhwc);
  c.bias = memory::desc({p.c_out}, Dt::f32, Tag::a);
  c.plain_weights = memory::desc(wei, Dt::f32, grouped ? Tag::goihw : Tag::oihw);
  c.has_residual = has_residual;
  c.residual_after_act = p.residual_after_act;
  const Dims strides{p.stride_h, p.stride_w}, dil{p.dil_h - 1, p.dil_w - 1};
  const Dims pad_l{p.pad_t, p.pad_l}, pad_r{p.pad_b, p.pad_r};
  using CF = dnnl::convolution_forward;
  const memory::desc src = c.src, dst = c.dst, bias = c.bias;
  auto desc = [=](const ConvForm& f) {
    const memory::desc w(wei, dt, f.plain_weights ? (grouped ? Tag::goihw : Tag::oihw) : Tag::any);
    const auto prop = dnnl::prop_kind::forward_inference;
    const auto alg = dnnl::algorithm::convolution_direct;
    return has_bias ? CF::desc(prop, alg, src, w, bias, dst, strides, dil, pad_l, pad_r)
                    : CF::desc(prop, alg, src, w, dst, strides, dil, pad_l, pad_r);
  };
  const std::string what = ConvWhat("convolution", p.c_in, p.h_in, p.w_in, p.c_out, p.h_out, p.w_out, p.kh, p.kw,
                                    p.stride_h, p.groups, ConvForm{}.Name(has_residual, p.residual_after_act, p.act));
  // oneDNN 2.6's depthwise kernel below AVX2 (jit_dw:sse41, which AVX runs too) crashes on a
  // sum post-op where the channels are no multiple of 8 (19 channels, 5x5, stride 2:
  // DnnlKernelsTest.Conv2dOnRandomShapes at SSE41; 16 channels run): the residual's add there
  // is always its own primitive.
  const bool depthwise = p.groups > 1 && p.groups == p.c_in && p.groups == p.c_out;
  const bool below_avx2 = static_cast<int>(dnnl::get_effective_cpu_isa()) < static_cast<int>(dnnl::cpu_isa::avx2);
  const std::string refuse_sum = depthwise && below_avx2 && p.c_out % 8 != 0
                                     ? "oneDNN 2.6 crashes on it below AVX2 (" + IsaName() + ")"
                                     : "";
  return CachedConv<CF>(key, std::move(c), what, ConvForms(p.act.kind != Activation::kNone, has_residual,
                                                           p.residual_after_act), desc, p.act, refuse_sum);
}

const ConvPrim& Primitives::Deconv(const ConvTranspose2dParams& p, int64_t pad_b, int64_t pad_r, bool has_bias) const {
  const std::string key = Key({-1, p.n, p.c_in, p.h_in, p.w_in, p.c_out, p.h_out, p.w_out, p.kh, p.kw, p.stride_h,
                               p.stride_w, p.pad_t, p.pad_l, pad_b, pad_r, p.dil_h, p.dil_w, p.groups, has_bias}) +
                          ActKey(p.act);
  if (auto it = convs_.find(key); it != convs_.end()) return it->second;
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
  const memory::desc src = c.src, dst = c.dst, bias = c.bias;
  const Dims strides{p.stride_h, p.stride_w}, dil{p.dil_h - 1, p.dil_w - 1}, pl{p.pad_t, p.pad_l}, pr{pad_b, pad_r};
  auto desc = [=](const ConvForm& f) {
    const memory::desc w(wei, dt, f.plain_weights ? (grouped ? Tag::giohw : Tag::iohw) : Tag::any);
    return DF::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, src, w,
                    has_bias ? bias : memory::desc(), dst, strides, dil, pl, pr);
  };
  std::vector<ConvForm> forms;
  for (bool plain : {false, true}) {
    forms.push_back({Residual::kSum, false, plain});
    if (p.act.kind != Activation::kNone) forms.push_back({Residual::kSum, true, plain});
  }
  const std::string what = ConvWhat("transposed convolution", p.c_in, p.h_in, p.w_in, p.c_out, p.h_out, p.w_out, p.kh,
                                    p.kw, p.stride_h, p.groups, ConvForm{}.Name(false, false, p.act));
  return CachedConv<DF>(key, std::move(c), what, forms, desc, p.act, "");
}

template <class P>
const ConvPrim& Primitives::CachedConv(const std::string& key, ConvPrim c, const std::string& what,
                                       const std::vector<ConvForm>& forms,
                                       const std::function<typename P::desc(const ConvForm&)>& desc,
                                       const ActivationParams& act, const std::string& refuse_sum) const {
  using PD = typename P::primitive_desc;
  std::vector<Form<PD>> candidates;
  for (const ConvForm& f : forms) {
    const bool sums = c.has_residual && f.residual == Residual::kSum;
    candidates.push_back({f.Name(c.has_residual, c.residual_after_act, act),
                          [&, f] {
                            dnnl::primitive_attr attr = Attr();
                            attr.set_post_ops(PostOps(f, c.has_residual, c.residual_after_act, act));
                            return PD(desc(f), attr, eng_);
                          },
                          sums ? refuse_sum : ""});
  }
  int chosen = 0;
  const PD pd = Choose(what, candidates, &chosen, &c.note);
  c.form = forms[chosen];
  c.weights = pd.weights_desc();
  c.scratch = pd.scratchpad_desc().get_size();
  c.prim = P(pd);
  if (c.has_residual && c.form.residual == Residual::kSeparate) c.add = SplitOff(c, true, act);
  if (c.form.act_separate && act.kind != Activation::kNone) c.act = SplitOff(c, false, act);
  if (c.add) Merge(&c.note, c.add->note);
  if (c.act) Merge(&c.note, c.act->note);
  return convs_.emplace(key, std::move(c)).first->second;
}

// The step a convolution's form split off: its residual's add (y += residual, with the
// activation where the sum came first and the activation was not split too), or its
// activation, in place on y.
Prim Primitives::SplitOff(const ConvPrim& c, bool add, const ActivationParams& act) const {
  Prim p;
  p.a = p.c = c.dst;
  dnnl::algorithm alg;
  float alpha, beta;
  const bool has_act = EltwiseOf(act, &alg, &alpha, &beta);
  std::string impl;
  if (add) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (has_act && !c.form.act_separate && !c.residual_after_act) {
      dnnl::post_ops po;
      po.append_eltwise(1.f, alg, alpha, beta);
      attr.set_post_ops(po);
    }
    dnnl::binary::primitive_desc pd(dnnl::binary::desc(dnnl::algorithm::binary_add, c.dst, c.dst, c.dst), attr, eng_);
    impl = pd.impl_info_str();
    p.scratch = pd.scratchpad_desc().get_size();
    p.prim = dnnl::binary(pd);
  } else {
    dnnl::eltwise_forward::primitive_desc pd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, alg, c.dst, alpha, beta), eng_);
    impl = pd.impl_info_str();
    p.prim = dnnl::eltwise_forward(pd);
  }
  if (IsReference(impl)) {
    p.note.kind = StepNote::Kind::kReference;
    p.note.what = std::string(add ? "the residual's binary add" : "the split activation") +
                  " on oneDNN's reference kernel (" + impl + ") at " + IsaName();
  }
  return p;
}

void Primitives::AddActAfter(Prim* p, const memory::desc& dst, const ActivationParams& act) const {
  dnnl::algorithm alg;
  float alpha, beta;
  if (!EltwiseOf(act, &alg, &alpha, &beta)) return;
  dnnl::eltwise_forward::primitive_desc pd(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, alg, dst, alpha, beta), eng_);
  if (IsReference(pd.impl_info_str()))
    Merge(&p->note, {StepNote::Kind::kReference, std::string("the split activation on oneDNN's reference kernel (") +
                                                     pd.impl_info_str() + ") at " + IsaName()});
  p->act_after = dnnl::eltwise_forward(pd);
  p->act_md = dst;
}

const Prim& Primitives::Pool(const std::string& key, const dnnl::pooling_v2_forward::desc& d, const memory::desc& src,
                             const memory::desc& dst) {
  if (auto it = prims_.find(key); it != prims_.end()) return it->second;
  using PD = dnnl::pooling_v2_forward::primitive_desc;
  Prim p;
  int chosen;
  const PD pd = Choose<PD>("pooling", {{"as asked", [&] {
                                          dnnl::primitive_attr attr;
                                          attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
                                          return PD(d, attr, eng_);
                                        }}},
                           &chosen, &p.note);
  p.prim = dnnl::pooling_v2_forward(pd);
  p.a = src;
  p.c = dst;
  p.scratch = pd.scratchpad_desc().get_size();
  return prims_.emplace(key, std::move(p)).first->second;
}

const Prim& Primitives::Resampling(const std::string& key, const dnnl::resampling_forward::desc& d,
                                   const memory::desc& src, const memory::desc& dst) {
  if (auto it = prims_.find(key); it != prims_.end()) return it->second;
  using PD = dnnl::resampling_forward::primitive_desc;
  Prim p;
  int chosen;
  const PD pd = Choose<PD>("resampling", {{"as asked", [&] {
                                             dnnl::primitive_attr attr;
                                             attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
                                             return PD(d, attr, eng_);
                                           }}},
                           &chosen, &p.note);
  p.prim = dnnl::resampling_forward(pd);
  p.a = src;
  p.c = dst;
  p.scratch = pd.scratchpad_desc().get_size();
  return prims_.emplace(key, std::move(p)).first->second;
}

const Prim& Primitives::Binary(dnnl::algorithm op, const memory::desc& m0, const memory::desc& m1,
                               const memory::desc& dst, const ActivationParams& act) {
  const std::string key = "binary" + Key({static_cast<int64_t>(op)}) + MdKey(m0) + MdKey(m1) + MdKey(dst) + ActKey(act);
  if (auto it = prims_.find(key); it != prims_.end()) return it->second;
  using PD = dnnl::binary::primitive_desc;
  dnnl::algorithm act_alg;
  float alpha, beta;
  const bool has_act = EltwiseOf(act, &act_alg, &alpha, &beta);
  auto make = [&](bool fuse_act) {
    dnnl::primitive_attr attr;
    if (fuse_act) {
      dnnl::post_ops po;
      po.append_eltwise(1.f, act_alg, alpha, beta);
      attr.set_post_ops(po);
    }
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return PD(dnnl::binary::desc(op, m0, m1, dst), attr, eng_);
  };
  std::vector<Form<PD>> forms{{has_act ? "post-op eltwise_" + ActName(act) : "no post-op", [&] { return make(has_act); }}};
  if (has_act) forms.push_back({"then an eltwise_" + ActName(act), [&] { return make(false); }});
  Prim p;
  int chosen = 0;
  const PD pd = Choose("binary", forms, &chosen, &p.note);
  p.prim = dnnl::binary(pd);
  p.a = m0;
  p.c = m1;
  p.scratch = pd.scratchpad_desc().get_size();
  if (chosen == 1) AddActAfter(&p, dst, act);
  return prims_.emplace(key, std::move(p)).first->second;
}

const Prim& Primitives::Eltwise(dnnl::algorithm alg, const memory::desc& m, float alpha, float beta) {
  const std::string key = "eltwise" + Key({static_cast<int64_t>(alg), Bits(alpha), Bits(beta)}) + MdKey(m);
  if (auto it = prims_.find(key); it != prims_.end()) return it->second;
  using PD = dnnl::eltwise_forward::primitive_desc;
  Prim p;
  int chosen;
  const PD pd = Choose<PD>("eltwise", {{"as asked", [&] {
                                          return PD(dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference,
                                                                                alg, m, alpha, beta),
                                                    eng_);
                                        }}},
                           &chosen, &p.note);
  p.prim = dnnl::eltwise_forward(pd);
  p.a = p.c = m;
  return prims_.emplace(key, std::move(p)).first->second;
}

const Prim& Primitives::MatMul(const std::string& key, const memory::desc& a, const memory::desc& b,
                               const memory::desc& c, const memory::desc& y, const ActivationParams& act) {
  if (auto it = prims_.find(key); it != prims_.end()) return it->second;
  using PD = dnnl::matmul::primitive_desc;
  dnnl::algorithm act_alg;
  float alpha, beta;
  const bool has_act = EltwiseOf(act, &act_alg, &alpha, &beta);
  const bool has_bias = c.get_size() > 0;
  auto make = [&](bool fuse_act) {
    dnnl::matmul::desc d = has_bias ? dnnl::matmul::desc(a, b, c, y) : dnnl::matmul::desc(a, b, y);
    dnnl::primitive_attr attr = Attr();
    if (fuse_act) {
      dnnl::post_ops po;
      po.append_eltwise(1.f, act_alg, alpha, beta);
      attr.set_post_ops(po);
    }
    return PD(d, attr, eng_);
  };
  std::vector<Form<PD>> forms{{has_act ? "post-op eltwise_" + ActName(act) : "no post-op", [&] { return make(has_act); }}};
  if (has_act) forms.push_back({"then an eltwise_" + ActName(act), [&] { return make(false); }});
  Prim p;
  int chosen = 0;
  const PD pd = Choose("matmul", forms, &chosen, &p.note);
  p.prim = dnnl::matmul(pd);
  p.a = a;
  p.c = b;
  p.scratch = pd.scratchpad_desc().get_size();
  if (chosen == 1) AddActAfter(&p, y, act);
  return prims_.emplace(key, std::move(p)).first->second;
}

const dnnl::concat& Primitives::Concat(const std::string& key, const memory::desc& dst,
                                       const std::vector<memory::desc>& srcs, StepNote* note) {
  auto it = concats_.find(key);
  if (it == concats_.end()) {
    dnnl::concat::primitive_desc pd(dst, 1, srcs, eng_);
    StepNote n;
    if (IsReference(pd.impl_info_str()))
      n = {StepNote::Kind::kReference,
           std::string("concat on oneDNN's reference kernel (") + pd.impl_info_str() + ") at " + IsaName()};
    it = concats_.emplace(key, std::make_pair(dnnl::concat(pd), n)).first;
  }
  Merge(note, it->second.second);
  return it->second.first;
}

dnnl::reorder Primitives::Reorder(const memory::desc& s, const memory::desc& d, StepNote* note) {
  dnnl::reorder::primitive_desc pd(eng_, s, eng_, d);
  const std::string key = MdKey(s) + MdKey(d);
  auto it = reorders_.find(key);
  if (it == reorders_.end()) {
    StepNote n;
    if (IsReference(pd.impl_info_str()))
      n = {StepNote::Kind::kReference, std::string("a reorder on oneDNN's reference kernel (") + pd.impl_info_str() +
                                           ") at " + IsaName()};
    it = reorders_.emplace(key, n).first;
  }
  Merge(note, it->second);
  return dnnl::reorder(pd);
}

}  // namespace framemill::engine::dnnl_detail
