// Lowerings of convolutions and pooling (plan_builder.h), with a following activation or
// residual Add fused into the convolution's step.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "engine/plan_builder.h"

namespace framemill::engine::plan_detail {
namespace {

// A 2-D window's strides, dilations and pads (t, l, b, r) from the node's attributes, where
// given; Conv2dParams, ConvTranspose2dParams and Pool2dParams name them alike.
template <class P>
void ReadWindow(const Node& n, P* p) {
  auto st = n.AttrInts("strides"), dl = n.AttrInts("dilations"), pd = n.AttrInts("pads");
  if (st.size() == 2) { p->stride_h = st[0]; p->stride_w = st[1]; }
  if (dl.size() == 2) { p->dil_h = dl[0]; p->dil_w = dl[1]; }
  if (pd.size() == 4) { p->pad_t = pd[0]; p->pad_l = pd[1]; p->pad_b = pd[2]; p->pad_r = pd[3]; }
}

// Dimension d (0: height, 1: width) of a window: its input size, stride, dilated kernel
// extent, and its leading and trailing pads.
struct WindowDim {
  int64_t in, stride, extent;
  int32_t& pad_begin;
  int32_t& pad_end;
};
template <class P>
WindowDim DimOf(P& p, int d) {
  return {d ? p.w_in : p.h_in, d ? p.stride_w : p.stride_h,
          ((d ? p.kw : p.kh) - 1) * int64_t{d ? p.dil_w : p.dil_h} + 1, d ? p.pad_l : p.pad_t,
          d ? p.pad_r : p.pad_b};
}

}  // namespace

bool PlanBuilder::AsActivation(const Node& n, ActivationParams* act) {
  if (n.op == "Relu") {
    act->kind = Activation::kRelu;
  } else if (n.op == "Sigmoid") {
    act->kind = Activation::kSigmoid;
  } else if (n.op == "Tanh") {
    act->kind = Activation::kTanh;
  } else if (n.op == "LeakyRelu") {
    act->kind = Activation::kLeakyRelu;
    act->alpha = n.AttrFloat("alpha", 0.01f);
  } else if (n.op == "Clip") {
    act->kind = Activation::kClip;
    act->lo = n.AttrFloat("min", -INFINITY);
    act->hi = n.AttrFloat("max", INFINITY);
    for (size_t k : {size_t{1}, size_t{2}}) {
      if (!Has(n, k)) continue;
      if (!IsConst(n, k) || V(n.inputs[k]).c.size() != 1) return false;
      (k == 1 ? act->lo : act->hi) = static_cast<float>(V(n.inputs[k]).c.At(0));
    }
  } else {
    return false;
  }
  return true;
}


std::string PlanBuilder::FuseResidual(const std::string& out, const Shape& out_shape,
                                      Conv2dParams* p, int* residual) {
  int c = SoleConsumer(out);
  if (c < 0 || g_.nodes[c].op != "Add" || g_.nodes[c].inputs.size() != 2) return out;
  const Node& add = g_.nodes[c];
  const std::string& other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
  auto it = vals_.find(other);
  if (other == out || it == vals_.end() || it->second.is_const || it->second.shape != out_shape) return out;
  *residual = it->second.buf;
  p->residual_after_act = p->act.kind != Activation::kNone;
  skip_[c] = true;
  plan_.fused++;
  return p->residual_after_act ? add.outputs[0] : FuseActivation(add.outputs[0], &p->act);
}

Status PlanBuilder::LowerConv(size_t i) {
  const Node& n = g_.nodes[i];
  if (n.inputs.size() < 2 || !IsConst(n, 1)) return Unsup(n, "weights must be a constant");
  const Val& x = V(n.inputs[0]);
  const Shape w = V(n.inputs[1]).shape;
  if (x.is_const) return Unsup(n, "constant input");
  if (x.shape.size() != 4 || w.size() != 4)
    return Unsup(n, "only 2-D convolution (input " + ShapeStr(x.shape) + ")");
  Conv2dParams p;
  p.n = x.shape[0]; p.c_in = x.shape[1]; p.h_in = x.shape[2]; p.w_in = x.shape[3];
  p.c_out = w[0];
  p.kh = static_cast<int32_t>(w[2]); p.kw = static_cast<int32_t>(w[3]);
  p.groups = static_cast<int32_t>(n.AttrInt("group", 1));
  ReadWindow(n, &p);
  if (p.groups <= 0 || p.c_in % p.groups || p.c_out % p.groups || w[1] * p.groups != p.c_in)
    return Bad(n, "weights " + ShapeStr(w) + " do not fit input " + ShapeStr(x.shape) +
                      " with group " + std::to_string(p.groups));
  int64_t ekh = (p.kh - 1) * int64_t{p.dil_h} + 1, ekw = (p.kw - 1) * int64_t{p.dil_w} + 1;
  std::string auto_pad = n.AttrString("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (int d = 0; d < 2; ++d) {
      int64_t in = d ? p.w_in : p.h_in, s = d ? p.stride_w : p.stride_h, ek = d ? ekw : ekh;
      int64_t out = (in + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (out - 1) * s + ek - in);
      int32_t small = static_cast<int32_t>(total / 2), big = static_cast<int32_t>(total - total / 2);
      int32_t& b = d ? p.pad_l : p.pad_t;
      int32_t& e = d ? p.pad_r : p.pad_b;
      b = auto_pad == "SAME_UPPER" ? small : big;
      e = auto_pad == "SAME_UPPER" ? big : small;
    }
  } else if (auto_pad == "VALID") {
    p.pad_t = p.pad_l = p.pad_b = p.pad_r = 0;
  }
  if (auto pad = pad_into_conv_.find(n.inputs[0]); pad != pad_into_conv_.end()) {
    p.pad_t += pad->second[0]; p.pad_l += pad->second[1];
    p.pad_b += pad->second[2]; p.pad_r += pad->second[3];
  }
  p.h_out = (p.h_in + p.pad_t + p.pad_b - ekh) / p.stride_h + 1;
  p.w_out = (p.w_in + p.pad_l + p.pad_r - ekw) / p.stride_w + 1;
  if (p.h_out <= 0 || p.w_out <= 0) return Bad(n, "empty output for input " + ShapeStr(x.shape));
  Shape out_shape = {p.n, p.c_out, p.h_out, p.w_out};

  int xb = x.buf;
  int wb = DeviceOf(n.inputs[1]);
  int bb = -1, rb = -1;
  if (Has(n, 2)) {
    if (!IsConst(n, 2) || V(n.inputs[2]).c.size() != p.c_out) return Unsup(n, "bias must be a constant [C_out]");
    bb = DeviceOf(n.inputs[2]);
  }
  // Fusions: Conv -> act, Conv -> Add(residual) -> act, Conv -> act -> Add(residual).
  std::string out = FuseActivation(n.outputs[0], &p.act);
  out = FuseResidual(out, out_shape, &p, &rb);
  return Emit(StepKind::kConv2d, {xb, wb, bb, rb}, n, out_shape, p, out,
              kernels_ ? kernels_->Conv2dScratchBytes(p) : 0);
}


Status PlanBuilder::LowerConvTranspose(size_t i) {
  const Node& n = g_.nodes[i];
  if (n.inputs.size() < 2 || !IsConst(n, 1)) return Unsup(n, "weights must be a constant");
  const Val& x = V(n.inputs[0]);
  const Shape w = V(n.inputs[1]).shape;
  if (x.is_const || x.shape.size() != 4 || w.size() != 4) return Unsup(n, "only 2-D, non-constant input");
  ConvTranspose2dParams p;
  p.n = x.shape[0]; p.c_in = x.shape[1]; p.h_in = x.shape[2]; p.w_in = x.shape[3];
  p.groups = static_cast<int32_t>(n.AttrInt("group", 1));
  if (w[0] != p.c_in) return Bad(n, "weights " + ShapeStr(w) + " for input " + ShapeStr(x.shape));
  p.c_out = w[1] * p.groups;
  p.kh = static_cast<int32_t>(w[2]); p.kw = static_cast<int32_t>(w[3]);
  ReadWindow(n, &p);
  auto op = n.AttrInts("output_padding"), os = n.AttrInts("output_shape");
  if (op.size() != 2) op = {0, 0};
  std::string auto_pad = n.AttrString("auto_pad", "NOTSET");
  for (int d = 0; d < 2; ++d) {
    auto [in, s, ek, b, e] = DimOf(p, d);
    int64_t full = s * (in - 1) + op[d] + ek;
    if (os.size() >= 2 || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t target = os.size() >= 2 ? os[os.size() - 2 + d] : in * s;
      int64_t total = full - target;
      if (total < 0) return Unsup(n, "output_shape larger than the full output");
      b = static_cast<int32_t>(auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2);
      e = static_cast<int32_t>(total - b);
    } else if (auto_pad == "VALID") {
      b = e = 0;
    }
    (d ? p.w_out : p.h_out) = full - b - e;
  }
  if (p.h_out <= 0 || p.w_out <= 0) return Bad(n, "empty output");
  int wb = DeviceOf(n.inputs[1]);
  int bb = -1;
  if (Has(n, 2)) {
    if (!IsConst(n, 2)) return Unsup(n, "bias must be a constant");
    bb = DeviceOf(n.inputs[2]);
  }
  std::string out = FuseActivation(n.outputs[0], &p.act);
  return Emit(StepKind::kConvTranspose2d, {x.buf, wb, bb}, n, {p.n, p.c_out, p.h_out, p.w_out}, p, out,
              kernels_ ? kernels_->ConvTranspose2dScratchBytes(p) : 0);
}


Status PlanBuilder::LowerPool(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  if (x.is_const || x.shape.size() != 4) return Unsup(n, "only 4-D non-constant input");
  if (n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool") {
    ReduceParams r;
    r.op = n.op == "GlobalAveragePool" ? ReduceOp::kMean : ReduceOp::kMax;
    r.outer = x.shape[0] * x.shape[1];
    r.reduce = x.shape[2] * x.shape[3];
    r.inner = 1;
    return Emit(StepKind::kReduce, {x.buf}, n, {x.shape[0], x.shape[1], 1, 1}, r);
  }
  Pool2dParams p;
  p.kind = n.op == "MaxPool" ? PoolKind::kMax : PoolKind::kAvg;
  p.n = x.shape[0]; p.c = x.shape[1]; p.h_in = x.shape[2]; p.w_in = x.shape[3];
  auto ks = n.AttrInts("kernel_shape");
  if (ks.size() != 2) return Unsup(n, "kernel_shape must have 2 entries");
  p.kh = ks[0]; p.kw = ks[1];
  ReadWindow(n, &p);
  p.count_include_pad = n.AttrInt("count_include_pad", 0) != 0;
  bool ceil_mode = n.AttrInt("ceil_mode", 0) != 0;
  std::string auto_pad = n.AttrString("auto_pad", "NOTSET");
  for (int d = 0; d < 2; ++d) {
    auto [in, s, ek, b, e] = DimOf(p, d);
    int64_t out;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out = (in + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (out - 1) * s + ek - in);
      int32_t small = static_cast<int32_t>(total / 2), big = static_cast<int32_t>(total - small);
      b = auto_pad == "SAME_UPPER" ? small : big;
      e = auto_pad == "SAME_UPPER" ? big : small;
    } else {
      if (auto_pad == "VALID") b = e = 0;
      int64_t span = in + b + e - ek;
      out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
      if (ceil_mode && (out - 1) * s >= in + b) --out;
    }
    (d ? p.w_out : p.h_out) = out;
  }
  if (p.h_out <= 0 || p.w_out <= 0) return Bad(n, "empty output");
  return Emit(StepKind::kPool2d, {x.buf}, n, {p.n, p.c, p.h_out, p.w_out}, p);
}

}  // namespace framemill::engine::plan_detail
