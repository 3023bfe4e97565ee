// The oneDNN backend's primitives (engine/dnnl/ only): made once per shape and kept, each one
// checked for the implementation oneDNN chose. oneDNN falls back to its reference kernels
// (`ref:any`, plain C++ loops) for a descriptor no JIT kernel of the CPU's ISA takes: on an
// AVX2 CPU, oneDNN 2.6's convolutions take no sum post-op after an activation (YOLOv8's
// bottlenecks, isnet's residual blocks), and such a convolution ran 50-300x slower than its
// JIT form (yolov8n: 858 ms a forward against ONNX Runtime's 61). So each primitive is tried
// in the forms that compute the same thing, the fused one first, and the first that runs on a
// JIT kernel is kept; what it gave up is the primitive's StepNote (kSplit), and a primitive
// that has no JIT form at all is noted kReference, which the ISA tests fail on.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/dnnl/dnnl_internal.h"

namespace framemill::engine::dnnl_detail {

// The instruction set oneDNN's kernels use in this process ("avx2", "avx512_core_amx"): the
// CPU's, or less under ONEDNN_MAX_CPU_ISA.
std::string IsaName();
// Whether an implementation name (primitive_desc::impl_info_str()) is one of oneDNN's
// reference kernels ("ref:any", "ref_int8:any", "ref_fused_convolution:any").
bool IsReference(const std::string& impl);

// oneDNN's eltwise for a fused activation; false when it has none (kNone).
bool EltwiseOf(const ActivationParams& a, dnnl::algorithm* alg, float* alpha, float* beta);
// oneDNN's eltwise for a unary op; false for the ops it lacks (the reference runs them).
bool EltwiseOf(const UnaryParams& u, dnnl::algorithm* alg, float* alpha, float* beta);
bool BinaryAlgOf(BinaryOp op, dnnl::algorithm* alg);
// "swish", "clip_v2:0:6": an activation as oneDNN's verbose output names its post-op.
std::string ActName(const ActivationParams& a);

// One way to compute a primitive: its name, for notes, and how to make its descriptor (which
// throws dnnl::error where oneDNN has no implementation of it); `refused`: why it is not even
// tried (a form oneDNN is known to get wrong here).
template <class PD>
struct Form {
  std::string name;
  std::function<PD()> make;
  std::string refused{};
};

// The first of `forms` (in order of preference, the one asked for first) that oneDNN runs on a
// JIT kernel: its index in *chosen, and in *note what it gave up (kSplit) or, where every
// form is a reference kernel, the first form and kReference. Throws the last dnnl::error when
// no form can be made at all.
template <class PD>
PD Choose(const std::string& what, const std::vector<Form<PD>>& forms, int* chosen, StepNote* note) {
  std::optional<PD> first;
  std::string first_impl, why_not_first;
  std::optional<dnnl::error> last_error;
  for (size_t k = 0; k < forms.size(); ++k) {
    if (!forms[k].refused.empty()) {
      if (k == 0) why_not_first = forms[k].refused;
      continue;
    }
    try {
      PD pd = forms[k].make();
      const std::string impl = pd.impl_info_str();
      if (!IsReference(impl)) {
        *chosen = static_cast<int>(k);
        if (k > 0) {
          if (why_not_first.empty())
            why_not_first = "oneDNN has only its reference kernel (" + (first_impl.empty() ? "none" : first_impl) +
                            ") for it at " + IsaName();
          note->kind = StepNote::Kind::kSplit;
          note->what = what + ": " + why_not_first + "; ran as " + forms[k].name + " (" + impl + ")";
        }
        return pd;
      }
      if (k == 0) first_impl = impl;
      if (!first) { first = pd; *chosen = static_cast<int>(k); }
    } catch (const dnnl::error& e) {
      if (k == 0) why_not_first = std::string("oneDNN has no kernel for it (") + e.what() + ")";
      last_error = e;
    }
  }
  if (!first) throw last_error ? *last_error : dnnl::error(dnnl_unimplemented, "no form of it can run");
  note->kind = StepNote::Kind::kReference;
  note->what = what + ": every form on oneDNN's reference kernel (" + first->impl_info_str() + ") at " +
               IsaName() + " (tried: ";
  for (size_t k = 0; k < forms.size(); ++k) note->what += (k ? ", " : "") + forms[k].name;
  note->what += ")";
  return *first;
}

// A primitive with a source and a destination (or two sources), its scratchpad's bytes, what
// its form gave up, and where the activation could not be fused: an eltwise run after it on
// its destination, in place.
struct Prim {
  dnnl::primitive prim;
  memory::desc a, c;
  size_t scratch = 0;
  StepNote note;
  std::optional<dnnl::primitive> act_after;
  memory::desc act_md;
};

// How a convolution computes its residual and its activation: fused as post-ops, or as
// primitives of their own after it. (A binary-add post-op that reads the residual where it lies
// was tried as a third form: oneDNN 2.6's gemm convolution (x64:gemm:jit, a grouped one at
// AVX2) computed it wrongly, off by up to 1.0 where the sum and a separate add agreed to 3e-7;
// DnnlKernelsTest.Conv2dOnRandomShapes at AVX2 found it. It was no faster than a separate add.)
struct ConvForm {
  enum class Residual { kSum, kSeparate };
  Residual residual = Residual::kSum;
  bool act_separate = false;
  bool plain_weights = false;
  std::string Name(bool has_residual, bool residual_after_act, const ActivationParams& act) const;
};

// A convolution's (or a transposed convolution's) primitive and what it reads and writes,
// with the steps its form split off: `add` (y += residual, with the activation as its post-op
// where the sum comes first) and `act` (the activation on y), run after it in that order, but
// for a residual after a split activation, which is added last.
struct ConvPrim {
  dnnl::primitive prim;
  memory::desc src, weights, plain_weights, bias, dst;
  size_t scratch = 0;                // the primitive's scratchpad
  mutable int64_t reserved = -1;     // the plan's scratch for this step (Conv2dScratchBytes), once known
  bool has_residual = false, residual_after_act = false;
  ConvForm form;
  std::optional<Prim> add;
  std::optional<Prim> act;
  StepNote note;
  // The residual is read by a separate add, in dst's layout (reordered into scratch where it
  // lies otherwise).
  bool ReadsResidual() const { return has_residual && form.residual == ConvForm::Residual::kSeparate; }
  // The scratch a call needs: the scratchpad, the source reordered, the residual reordered.
  size_t NeedBytes() const {
    return Align(scratch) + Align(src.get_size()) + (ReadsResidual() ? Align(dst.get_size()) : 0);
  }
};

// The cache of every primitive the kernels made, keyed by their parameters.
class Primitives {
 public:
  Primitives(const dnnl::engine& eng, bool bf16) : eng_(eng), bf16_(bf16) {}
  bool bf16() const { return bf16_; }
  // A user scratchpad, and bf16 arithmetic in bf16 mode.
  dnnl::primitive_attr Attr() const;

  const ConvPrim& Conv(const Conv2dParams& p, bool has_bias, bool has_residual) const;
  // pad_b, pad_r: oneDNN's bottom and right pads (DnnlKernels::DeconvPads).
  const ConvPrim& Deconv(const ConvTranspose2dParams& p, int64_t pad_b, int64_t pad_r, bool has_bias) const;
  const Prim& Pool(const std::string& key, const dnnl::pooling_v2_forward::desc& d, const memory::desc& src,
                   const memory::desc& dst);
  const Prim& Resampling(const std::string& key, const dnnl::resampling_forward::desc& d, const memory::desc& src,
                         const memory::desc& dst);
  // src0 `op` src1 -> dst, then `act`.
  const Prim& Binary(dnnl::algorithm op, const memory::desc& m0, const memory::desc& m1, const memory::desc& dst,
                     const ActivationParams& act);
  const Prim& Eltwise(dnnl::algorithm alg, const memory::desc& m, float alpha, float beta);
  // a [batch, m, k] x b [batch, k, n] (+ bias c) -> y, then `act`.
  const Prim& MatMul(const std::string& key, const memory::desc& a, const memory::desc& b, const memory::desc& c,
                     const memory::desc& y, const ActivationParams& act);
  const dnnl::concat& Concat(const std::string& key, const memory::desc& dst, const std::vector<memory::desc>& srcs,
                             StepNote* note);
  // A reorder from s to d (oneDNN's primitive cache keeps its code); its note added to *note.
  dnnl::reorder Reorder(const memory::desc& s, const memory::desc& d, StepNote* note);

 private:
  // The first of `forms` of a convolution (or deconvolution, P) that runs on a JIT kernel, made
  // from its descriptor's maker and kept under `key`; `refuse_sum`, where not empty, why a
  // form with the sum post-op is not tried.
  template <class P>
  const ConvPrim& CachedConv(const std::string& key, ConvPrim c, const std::string& what,
                             const std::vector<ConvForm>& forms,
                             const std::function<typename P::desc(const ConvForm&)>& desc,
                             const ActivationParams& act, const std::string& refuse_sum) const;
  Prim SplitOff(const ConvPrim& c, bool add, const ActivationParams& act) const;
  void AddActAfter(Prim* p, const memory::desc& dst, const ActivationParams& act) const;

  dnnl::engine eng_;
  bool bf16_;
  mutable std::map<std::string, ConvPrim> convs_;  // std::map: the weights' cache keys on a ConvPrim's address
  std::unordered_map<std::string, Prim> prims_;
  std::unordered_map<std::string, std::pair<dnnl::concat, StepNote>> concats_;
  std::unordered_map<std::string, StepNote> reorders_;  // the note of each reorder made
};

}  // namespace framemill::engine::dnnl_detail
