// How a Graph becomes a Plan (engine/plan.h), internal to engine/: the shape helpers,
// the values the lowering tracks, and PlanBuilder. Its lowerings, one per family of ONNX ops,
// live in plan_conv.cc (convolutions, pooling), plan_elementwise.cc (binary and unary ops,
// batch norm), plan_linear.cc (MatMul, Gemm, reductions) and plan_shape.cc (resize, pad,
// concat, transpose, slices, gathers, reshapes); plan.cc dispatches them by the Lowerings()
// table and holds the constants, softmax and argmax; plan_place.cc places the buffers.
// Adding an ONNX op: one lowering (PlanBuilder::Lower*, in its family's file, ending in Emit),
// one row of Lowerings(), and one kernel (engine/kernels.h: its CPU and CUDA twins).
#pragma once

#include <array>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/plan.h"

namespace framemill::engine::plan_detail {

using Shape = std::vector<int64_t>;

inline int64_t Prod(const Shape& s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t k = from; k < std::min(to, s.size()); ++k) n *= s[k];
  return n;
}

inline Shape Strides(const Shape& s) {
  Shape st(s.size(), 1);
  for (int k = static_cast<int>(s.size()) - 2; k >= 0; --k) st[k] = st[k + 1] * s[k + 1];
  return st;
}

inline std::string ShapeStr(const Shape& s) {
  std::string r = "[";
  for (size_t k = 0; k < s.size(); ++k) r += (k ? "," : "") + std::to_string(s[k]);
  return r + "]";
}

inline int64_t AlignUp(int64_t v) { return (v + kPlanAlignment - 1) / kPlanAlignment * kPlanAlignment; }

// A host tensor gathered from `src` at linear indices `idx`.
inline HostTensor Take(const HostTensor& src, const std::vector<int64_t>& idx, Shape shape) {
  HostTensor t;
  t.is_int = src.is_int;
  t.shape = std::move(shape);
  if (src.is_int) {
    t.i.reserve(idx.size());
    for (int64_t k : idx) t.i.push_back(src.i[k]);
  } else {
    t.f.reserve(idx.size());
    for (int64_t k : idx) t.f.push_back(src.f[k]);
  }
  return t;
}

// Calls fn(out_linear, multi_index) over every element of `shape`.
inline void ForEachIndex(const Shape& shape, const std::function<void(int64_t, const Shape&)>& fn) {
  int64_t total = Prod(shape);
  Shape idx(shape.size(), 0);
  for (int64_t lin = 0; lin < total; ++lin) {
    fn(lin, idx);
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

struct Val {
  Shape shape;
  bool is_const = false;
  HostTensor c;
  int buf = -1;
  // A computed tensor holding integers as floats (ArgMax's indices, and what only moves or
  // adds them): exact below 2^24, but no op that would compute it as a float may take it.
  bool int_valued = false;
};

class PlanBuilder {
 public:
  PlanBuilder(const Graph& g, int batch, StorageType st, const Kernels* k)
      : g_(g), batch_(batch), kernels_(k) {
    plan_.batch = batch;
    plan_.storage = st;
  }

  Result<Plan> Build();

  // One ONNX node (g_.nodes[i]) lowered: steps added, its outputs' values set.
  using Lowering = Status (PlanBuilder::*)(size_t i);

 private:
  // The lowering of g_.nodes[i]'s op (Lowerings()), or Unsupported: what the op, its opset
  // or its attributes ask that the engine does not implement (engine/opset.h).
  Status Lower(size_t i);
  // Unsupported where an integer-valued computed input (Val::int_valued) meets an op that
  // would compute it as a float; marks the outputs of the ops that keep it integer.
  Status CheckIntegerInputs(const Node& n, bool* any);
  void MarkIntegerOutputs(const Node& n);
  // Which lowering takes each ONNX op (plan.cc; an op named "Reduce*" takes LowerReduce).
  static const std::map<std::string, Lowering>& Lowerings();
  Status Bad(const Node& n, const std::string& msg) {
    return Status::InvalidArgument("node '" + n.name + "' (" + n.op + "): " + msg);
  }
  Status Unsup(const Node& n, const std::string& msg) {
    return Status::Unsupported("node '" + n.name + "' (" + n.op + "): " + msg);
  }
  bool Has(const Node& n, size_t k) const { return n.inputs.size() > k && !n.inputs[k].empty(); }
  Val& V(const std::string& name) { return vals_.at(name); }
  bool IsConst(const Node& n, size_t k) { return Has(n, k) && V(n.inputs[k]).is_const; }
  void SetConst(const std::string& name, HostTensor t) {
    Val v;
    v.shape = t.shape;
    v.is_const = true;
    v.c = std::move(t);
    vals_[name] = std::move(v);
  }
  void Alias(const std::string& name, int buf, Shape shape) {
    Val v;
    v.shape = std::move(shape);
    v.buf = buf;
    vals_[name] = std::move(v);
  }
  int NewBuffer(const std::string& name, const Shape& shape) {
    Buffer b;
    b.name = name;
    b.shape = shape;
    b.elements = Prod(shape);
    b.bytes = b.elements * static_cast<int64_t>(StorageBytes(plan_.storage));
    b.first_step = b.last_step = static_cast<int>(plan_.steps.size());
    plan_.buffers.push_back(std::move(b));
    int id = static_cast<int>(plan_.buffers.size()) - 1;
    Alias(name, id, shape);
    return id;
  }
  // The device buffer of an input: an activation, or a constant placed in the weights.
  int DeviceOf(const std::string& name) {
    Val& v = V(name);
    if (v.buf >= 0) return v.buf;
    Buffer b;
    b.name = name;
    b.shape = v.shape;
    b.elements = v.c.size();
    b.bytes = b.elements * static_cast<int64_t>(StorageBytes(plan_.storage));
    b.weight = true;
    HostTensor f = v.c;
    if (f.is_int) {
      f.f.assign(f.i.begin(), f.i.end());
      f.i.clear();
      f.is_int = false;
    }
    b.host_const = static_cast<int>(plan_.constants.size());
    plan_.constants.push_back(std::move(f));
    plan_.buffers.push_back(std::move(b));
    v.buf = static_cast<int>(plan_.buffers.size()) - 1;
    return v.buf;
  }
  // The usual step: one output buffer, for the node's first output or `out` (the output of
  // an activation fused into it), with `params` and the kernel's scratch.
  template <typename Params>
  Status Emit(StepKind kind, std::vector<int> inputs, const Node& n,
              const std::vector<int64_t>& out_shape, const Params& params,
              const std::string& out = "", int64_t scratch_bytes = 0) {
    Step s;
    s.kind = kind;
    s.inputs = std::move(inputs);
    s.output = NewBuffer(out.empty() ? n.outputs[0] : out, out_shape);
    s.params = params;
    s.scratch_bytes = scratch_bytes;
    AddStep(std::move(s), n);
    return Status::OK();
  }
  void AddStep(Step s, const Node& n) {
    s.node = n.name + " (" + n.op + ")";
    int idx = static_cast<int>(plan_.steps.size());
    for (int b : s.inputs)
      if (b >= 0) plan_.buffers[b].last_step = std::max(plan_.buffers[b].last_step, idx);
    plan_.buffers[s.output].first_step = std::min(plan_.buffers[s.output].first_step, idx);
    plan_.buffers[s.output].last_step = std::max(plan_.buffers[s.output].last_step, idx);
    plan_.steps.push_back(std::move(s));
  }
  // The single node consuming `name`, or -1 (several consumers, or a graph output).
  int SoleConsumer(const std::string& name) {
    if (graph_outputs_.count(name)) return -1;
    auto it = consumers_.find(name);
    if (it == consumers_.end() || it->second.size() != 1) return -1;
    int c = static_cast<int>(it->second[0]);
    return skip_[c] ? -1 : c;
  }
  // x -> Sigmoid -> Mul(x, sigmoid(x)), x's only two consumers (YOLOv8's SiLU), as one
  // kSwish in *act; returns the Mul's output, or "" when `out` is not followed so.
  std::string FuseSwish(const std::string& out, ActivationParams* act) {
    if (graph_outputs_.count(out)) return "";
    auto it = consumers_.find(out);
    if (it == consumers_.end() || it->second.size() != 2) return "";
    int sig = -1, mul = -1;
    for (auto k : it->second) {
      if (skip_[k]) return "";
      const std::string& op = g_.nodes[k].op;
      if (op == "Sigmoid") sig = static_cast<int>(k);
      else if (op == "Mul") mul = static_cast<int>(k);
    }
    if (sig < 0 || mul < 0 || SoleConsumer(g_.nodes[sig].outputs[0]) != mul) return "";
    const Node& m = g_.nodes[mul];
    const std::string& s = g_.nodes[sig].outputs[0];
    if (m.inputs.size() != 2 || !((m.inputs[0] == out && m.inputs[1] == s) || (m.inputs[0] == s && m.inputs[1] == out)))
      return "";
    act->kind = Activation::kSwish;
    skip_[sig] = skip_[mul] = true;
    plan_.fused += 2;
    return m.outputs[0];
  }
  // A Pad node absorbed by its Conv (pad_into_conv_); true when it emits nothing.
  bool FusePadIntoConv(const Node& n, const PadParams& p);
  // Reads `n` as a fusable activation.
  bool AsActivation(const Node& n, ActivationParams* act);
  // Fuses a following activation node into *act; returns the new output name.
  std::string FuseActivation(const std::string& out, ActivationParams* act) {
    if (act->kind != Activation::kNone) return out;
    if (std::string swish = FuseSwish(out, act); !swish.empty()) return swish;
    int c = SoleConsumer(out);
    if (c < 0) return out;
    ActivationParams a;
    if (!AsActivation(g_.nodes[c], &a)) return out;
    *act = a;
    skip_[c] = true;
    plan_.fused++;
    return MergeClamps(g_.nodes[c].outputs[0], act);
  }
  // Relu and Clips one after another (faceres' Relu -> Clip -> Clip after each convolution)
  // are one clamp to the intersection of their ranges: the same floats. Returns the last
  // one's output.
  std::string MergeClamps(std::string out, ActivationParams* act) {
    const auto clamp = [](const ActivationParams& a, float* lo, float* hi) {
      if (a.kind == Activation::kRelu) { *lo = 0.0f; *hi = INFINITY; return true; }
      if (a.kind == Activation::kClip) { *lo = a.lo; *hi = a.hi; return true; }
      return false;
    };
    float lo, hi;
    while (clamp(*act, &lo, &hi)) {
      const int c = SoleConsumer(out);
      ActivationParams next;
      float lo2, hi2;
      if (c < 0 || !AsActivation(g_.nodes[c], &next) || !clamp(next, &lo2, &hi2)) break;
      if (std::max(lo, lo2) > std::min(hi, hi2)) break;  // disjoint ranges: not one clamp
      act->kind = Activation::kClip;
      act->lo = std::max(lo, lo2);
      act->hi = std::min(hi, hi2);
      skip_[c] = true;
      plan_.fused++;
      out = g_.nodes[c].outputs[0];
    }
    return out;
  }
  // Input k's values, which must be a constant.
  template <class T>
  Result<std::vector<T>> ConstValues(const Node& n, size_t k) {
    if (!IsConst(n, k)) return Unsup(n, "input " + std::to_string(k) + " must be a constant");
    const HostTensor& t = V(n.inputs[k]).c;
    std::vector<T> r;
    for (int64_t e = 0; e < t.size(); ++e) r.push_back(static_cast<T>(t.At(e)));
    return r;
  }
  Result<std::vector<int64_t>> ConstInts(const Node& n, size_t k) { return ConstValues<int64_t>(n, k); }
  Result<std::vector<float>> ConstFloats(const Node& n, size_t k) { return ConstValues<float>(n, k); }
  // The node's "axis" attribute (default `dflt`), counted from the front of a rank-`rank` shape.
  static int64_t AxisOf(const Node& n, int64_t dflt, size_t rank) {
    const int64_t axis = n.AttrInt("axis", dflt);
    return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
  }

  // plan.cc
  Status LowerConstant(size_t i);
  // A graph output that folded to a constant: copied from the weights into its own buffer.
  Status ConstantOutput(const std::string& name);
  Status LowerSoftmax(size_t i);
  Status LowerArgMax(size_t i);
  // The graph's inputs an output depends on as the plan's, at this batch.
  Status PlanInputs(const std::set<std::string>& live);
  // The graph's outputs, each live to the end of the plan.
  Status PlanOutputs();
  // Drops dead nodes (no output reaches a graph output) and counts each value's consumers.
  std::set<std::string> MarkLive();
  // plan_conv.cc
  Status LowerConv(size_t i);
  // A residual Add of the convolution's output `out` (Conv -> Add -> act, Conv -> act -> Add)
  // fused into it: *residual its other input's buffer; returns the new output name.
  std::string FuseResidual(const std::string& out, const Shape& out_shape, Conv2dParams* p, int* residual);
  Status LowerConvTranspose(size_t i);
  Status LowerPool(size_t i);
  // plan_elementwise.cc
  Status LowerBinary(size_t i);
  // One binary step (or fold) of `n`'s op on values a and b into value `out`; `fuse`: a
  // following activation may join it.
  Status BinaryStep(const Node& n, const std::string& a, const std::string& b, const std::string& out, bool fuse);
  // Both constant: the op computed now, as the kernels would (in float, or on integers).
  Status FoldBinary(const Node& n, const Val& a, const Val& b, const Shape& out, const std::string& out_name);
  Status LowerUnary(size_t i);
  // Relu(x) + k * Clip(x, max 0) (a PReLU as TF.js converters write it: facemesh's 23) as one
  // kPRelu step from the Relu at node i; false when the nodes after it are not that.
  bool FusePRelu(size_t i, Status* st);
  bool MatchPRelu(size_t i, std::string* slope, std::vector<size_t>* fused, std::string* out);
  int NegativePart(size_t relu_i, const std::vector<size_t>& users, std::vector<size_t>* nodes, float* scale);
  Status LowerBatchNorm(size_t i);
  // plan_linear.cc
  Status LowerMatMul(size_t i);
  Status LowerGemm(size_t i);
  Status LowerReduce(size_t i);
  // plan_shape.cc
  Status LowerResize(size_t i);
  Result<Shape> ResizeOutput(const Node& n, const Val& x, bool v10, ResizeParams* p, std::vector<float>* scales);
  Status ResizeModes(const Node& n, bool v10, ResizeParams* p);
  Status LowerPad(size_t i);
  Status LowerConcat(size_t i);
  Status LowerTranspose(size_t i);
  Status LowerSlice(size_t i);
  Status LowerGather(size_t i);
  Status GatherBySlices(const Node& n, const Val& x, const std::vector<int64_t>& idx, int64_t axis, const Shape& out);
  // One concat of values `parts` along `axis` into n's first output, of shape `out`.
  void ConcatStep(const Node& n, const std::vector<std::string>& parts, int64_t axis, const Shape& out);
  Status LowerSplit(size_t i);
  // Reshape, Flatten, (Un)squeeze, Identity, Dropout, Cast, Shape: a new view of the same
  // buffer, or a folded constant.
  Status LowerReshapeLike(size_t i);
  Status FoldShapeOf(const Node& n, const Val& x);
  Status FoldCast(const Node& n, const Val& x, int64_t to);
  Status LowerCast(const Node& n, const Val& x);
  Result<Shape> SqueezedShape(const Node& n, const Val& x);
  Result<Shape> ReshapedShape(const Node& n, const Val& x);
  Status SliceStep(const Node& n, const std::string& in, const std::string& out,
                   const Shape& starts, const Shape& steps, const Shape& out_dims);
  // plan_place.cc: weights packed, activations in one arena by liveness.
  void Place();

  const Graph& g_;
  int batch_;
  const Kernels* kernels_;
  Plan plan_;
  std::map<std::string, Val> vals_;
  // A zero Pad of H and W whose only consumer is a Conv: no step of its own, its pads (t, l,
  // b, r) added to the convolution's, which reads the Pad's input (FusePadIntoConv).
  std::map<std::string, std::array<int64_t, 4>> pad_into_conv_;
  std::map<std::string, std::vector<size_t>> consumers_;
  std::set<std::string> graph_outputs_;
  std::vector<bool> skip_;
};

}  // namespace framemill::engine::plan_detail
