// Lowerings of elementwise ops (plan_builder.h): binary ops with broadcasting (folded when
// both inputs are constants), unary ops, batch normalisation.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "engine/plan_builder.h"

namespace framemill::engine::plan_detail {

namespace {


Result<Shape> Broadcast(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t k = 0; k < r; ++k) {
    int64_t da = k + a.size() >= r ? a[k + a.size() - r] : 1;
    int64_t db = k + b.size() >= r ? b[k + b.size() - r] : 1;
    if (da != db && da != 1 && db != 1)
      return Status::InvalidArgument("cannot broadcast " + ShapeStr(a) + " with " + ShapeStr(b));
    out[k] = da == 1 ? db : da;
  }
  return out;
}

// Strides of `s` read as a tensor of `out` dims (0 where broadcast).
Shape BroadcastStrides(const Shape& s, const Shape& out) {
  Shape st = Strides(s), r(out.size(), 0);
  for (size_t k = 0; k < s.size(); ++k) {
    size_t o = k + out.size() - s.size();
    r[o] = s[k] == 1 ? 0 : st[k];
  }
  return r;
}


// `op` of a dense tensor of `dims` with a second operand of `b_shape` broadcast to it.
BinaryParams PerElementOf(BinaryOp op, const Shape& dims, const Shape& b_shape) {
  BinaryParams p;
  p.op = op;
  p.rank = static_cast<int32_t>(dims.size());
  const Shape as = Strides(dims), bs = BroadcastStrides(b_shape, dims);
  for (size_t d = 0; d < dims.size(); ++d) { p.dims[d] = dims[d]; p.a_strides[d] = as[d]; p.b_strides[d] = bs[d]; }
  return p;
}

float ApplyBinary(const std::string& op, float a, float b) {
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return a / b;
  if (op == "Max") return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
  if (op == "Min") return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
  if (op == "Pow") return std::pow(a, b);
  if (op == "PRelu") return std::max(a, 0.0f) + b * std::min(a, 0.0f);
  return NAN;
}

// Integer arithmetic as ONNX's integer ops do it (Div truncates toward zero; a division by
// zero gives 0 here, where C++ has none).
int64_t ApplyIntBinary(const std::string& op, int64_t a, int64_t b) {
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return b == 0 ? 0 : a / b;
  if (op == "Max") return std::max(a, b);
  if (op == "Min") return std::min(a, b);
  if (op == "PRelu") return a >= 0 ? a : a * b;
  return 0;
}

}  // namespace


Status PlanBuilder::LowerBinary(size_t i) {
  const Node& n = g_.nodes[i];
  if (n.inputs.size() == 1) {  // variadic Max/Min of one input
    vals_[n.outputs[0]] = V(n.inputs[0]);
    return Status::OK();
  }
  for (const auto& in : n.inputs)
    if (in.empty()) return Bad(n, "an empty input name");
  if (n.inputs.size() == 2) return BinaryStep(n, n.inputs[0], n.inputs[1], n.outputs[0], true);
  // Max and Min of more: one step a pair, left to right (the same values in any order).
  std::string acc = n.inputs[0];
  for (size_t k = 1; k < n.inputs.size(); ++k) {
    const bool last = k + 1 == n.inputs.size();
    const std::string out = last ? n.outputs[0] : n.outputs[0] + "#" + std::to_string(k);
    FM_RETURN_IF_ERROR(BinaryStep(n, acc, n.inputs[k], out, last));
    acc = out;
  }
  return Status::OK();
}

Status PlanBuilder::BinaryStep(const Node& n, const std::string& an, const std::string& bn, const std::string& out_name,
                               bool fuse) {
  const Val& a = V(an);
  const Val& b = V(bn);
  auto out_shape = Broadcast(a.shape, b.shape);
  if (!out_shape.ok()) return Bad(n, out_shape.status().message());
  // Numpy broadcasting came at opset 7 (Max and Min at 8); before, only with an attribute.
  const int64_t broadcasts_from = n.op == "Max" || n.op == "Min" ? 8 : 7;
  if (g_.opset < broadcasts_from && a.shape != b.shape)
    return Unsup(n, "shapes " + ShapeStr(a.shape) + " and " + ShapeStr(b.shape) + " at opset " +
                        std::to_string(g_.opset) + ", before numpy broadcasting");
  if (a.is_const && b.is_const) return FoldBinary(n, a, b, *out_shape, out_name);
  if (n.op == "Pow" && b.is_const && b.c.size() == 1 && out_shape->size() == a.shape.size()) {
    UnaryParams u;
    u.count = Prod(a.shape);
    float e = static_cast<float>(b.c.At(0));
    if (e == 2.0f) u.op = UnaryOp::kSquare;
    else if (e == 0.5f) u.op = UnaryOp::kSqrt;
    else if (e == 1.0f) u.op = UnaryOp::kIdentity;
    else { u.op = UnaryOp::kPowScalar; u.alpha = e; }
    return Emit(StepKind::kUnary, {a.buf}, n, a.shape, u, out_name);
  }
  if (out_shape->size() > static_cast<size_t>(kMaxRank)) return Unsup(n, "rank above 6");
  BinaryParams p;
  static const std::map<std::string, BinaryOp> kOps = {
      {"Add", BinaryOp::kAdd}, {"Sub", BinaryOp::kSub}, {"Mul", BinaryOp::kMul},
      {"Div", BinaryOp::kDiv}, {"Max", BinaryOp::kMax}, {"Min", BinaryOp::kMin},
      {"Pow", BinaryOp::kPow}, {"PRelu", BinaryOp::kPRelu}};
  p.op = kOps.at(n.op);
  // Merge nothing; rank as is (at least 1).
  Shape dims = *out_shape;
  if (dims.empty()) dims = {1};
  Shape as = BroadcastStrides(a.shape, dims), bs = BroadcastStrides(b.shape, dims);
  p.rank = static_cast<int32_t>(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    p.dims[k] = dims[k];
    p.a_strides[k] = as[k];
    p.b_strides[k] = bs[k];
  }
  int ab = DeviceOf(an);
  int bb = DeviceOf(bn);
  std::string out = fuse ? FuseActivation(out_name, &p.act) : out_name;
  return Emit(StepKind::kBinary, {ab, bb}, n, *out_shape, p, out);
}

Status PlanBuilder::FoldBinary(const Node& n, const Val& a, const Val& b, const Shape& out,
                               const std::string& out_name) {
  HostTensor t;
  t.is_int = a.c.is_int && b.c.is_int;
  if (t.is_int && n.op == "Pow") return Unsup(n, "folding Pow of integers");
  t.shape = out;
  Shape sa = BroadcastStrides(a.shape, t.shape), sb = BroadcastStrides(b.shape, t.shape);
  ForEachIndex(t.shape, [&](int64_t, const Shape& idx) {
    int64_t ia = 0, ib = 0;
    for (size_t d = 0; d < idx.size(); ++d) { ia += idx[d] * sa[d]; ib += idx[d] * sb[d]; }
    if (t.is_int) {
      t.i.push_back(ApplyIntBinary(n.op, a.c.i[ia], b.c.i[ib]));
    } else {
      // As the kernels compute it: in float.
      t.f.push_back(ApplyBinary(n.op, static_cast<float>(a.c.At(ia)), static_cast<float>(b.c.At(ib))));
    }
  });
  SetConst(out_name, std::move(t));
  return Status::OK();
}

// x's negative part beside the Relu at node relu_i, as TF.js converters write a PReLU:
//   Clip(x, max 0)   (facemesh): the slope is k;
//   x - Abs(x)       (mobilefacenet): 2 min(x, 0), the slope 2k (k * 2x and 2k * x round
//                    alike: the same floats).
// x's only other users are those nodes. Returns the node giving the part (the Clip or the
// Sub), with the nodes to fuse and the slope's scale; -1 when x is not used so.
int PlanBuilder::NegativePart(size_t relu_i, const std::vector<size_t>& users, std::vector<size_t>* nodes,
                              float* scale) {
  const std::string& x = g_.nodes[relu_i].inputs[0];
  for (size_t u : users)
    if (skip_[u]) return -1;
  ActivationParams a;
  if (users.size() == 2) {
    const size_t c = users[0] == relu_i ? users[1] : users[0];
    const Node& clip = g_.nodes[c];
    if (clip.op != "Clip" || clip.inputs[0] != x || !AsActivation(clip, &a) || a.hi != 0.0f || a.lo > -3.0e38f)
      return -1;
    *nodes = {c};
    *scale = 1.0f;
    return static_cast<int>(c);
  }
  if (users.size() != 3) return -1;
  int sub_i = -1, abs_i = -1;
  for (size_t u : users) {
    if (g_.nodes[u].op == "Sub") sub_i = static_cast<int>(u);
    if (g_.nodes[u].op == "Abs") abs_i = static_cast<int>(u);
  }
  if (sub_i < 0 || abs_i < 0) return -1;
  const Node& sub = g_.nodes[sub_i];
  const std::string& abs_out = g_.nodes[abs_i].outputs[0];
  if (sub.inputs.size() != 2 || sub.inputs[0] != x || sub.inputs[1] != abs_out || SoleConsumer(abs_out) != sub_i)
    return -1;
  *nodes = {static_cast<size_t>(abs_i), static_cast<size_t>(sub_i)};
  *scale = 2.0f;
  return sub_i;
}

// Relu(x) + k * (x's negative part) after the Relu at node i: fills the slope's constant,
// the nodes to fuse and the last one's output; false when the nodes are not that.
bool PlanBuilder::MatchPRelu(size_t i, std::string* slope, std::vector<size_t>* fused, std::string* out) {
  const Node& relu = g_.nodes[i];
  const std::string& x = relu.inputs[0];
  auto users = consumers_.find(x);
  if (V(x).is_const || graph_outputs_.count(x) || users == consumers_.end()) return false;
  std::vector<size_t> nodes;
  float scale = 1.0f;
  const int neg_i = NegativePart(i, users->second, &nodes, &scale);
  if (neg_i < 0) return false;
  const std::string& neg = g_.nodes[neg_i].outputs[0];
  const int mul_i = SoleConsumer(neg), add_i = SoleConsumer(relu.outputs[0]);
  if (mul_i < 0 || add_i < 0 || g_.nodes[mul_i].op != "Mul" || g_.nodes[add_i].op != "Add") return false;
  const Node &mul = g_.nodes[mul_i], &add = g_.nodes[add_i];
  if (mul.inputs.size() != 2 || add.inputs.size() != 2 || SoleConsumer(mul.outputs[0]) != add_i) return false;
  const std::string& k = mul.inputs[0] == neg ? mul.inputs[1] : mul.inputs[0];
  const bool add_ok = (add.inputs[0] == relu.outputs[0] && add.inputs[1] == mul.outputs[0]) ||
                      (add.inputs[1] == relu.outputs[0] && add.inputs[0] == mul.outputs[0]);
  // The nodes after the Relu are not lowered yet: only constants have values.
  if (!add_ok || vals_.count(k) == 0 || !V(k).is_const || (scale != 1.0f && V(k).c.is_int)) return false;
  const Shape& dims = V(x).shape;
  auto shape = Broadcast(dims, V(k).shape);
  if (!shape.ok() || *shape != dims || dims.empty() || dims.size() > static_cast<size_t>(kMaxRank)) return false;
  *slope = k;
  if (scale != 1.0f) {
    HostTensor t = V(k).c;
    for (float& v : t.f) v *= scale;
    *slope = relu.outputs[0] + "#prelu_slope";
    SetConst(*slope, std::move(t));
  }
  nodes.push_back(static_cast<size_t>(mul_i));
  nodes.push_back(static_cast<size_t>(add_i));
  *fused = std::move(nodes);
  *out = add.outputs[0];
  return true;
}

bool PlanBuilder::FusePRelu(size_t i, Status* st) {
  std::string slope, out;
  std::vector<size_t> fused;
  if (!MatchPRelu(i, &slope, &fused, &out)) return false;
  const Node& relu = g_.nodes[i];
  const Shape& dims = V(relu.inputs[0]).shape;
  const BinaryParams p = PerElementOf(BinaryOp::kPRelu, dims, V(slope).shape);
  const int xb = V(relu.inputs[0]).buf, kb = DeviceOf(slope);
  for (size_t f : fused) skip_[f] = true;
  plan_.fused += static_cast<int>(fused.size());
  *st = Emit(StepKind::kBinary, {xb, kb}, relu, dims, p, out);
  return true;
}

Status PlanBuilder::LowerUnary(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  if (Status st; n.op == "Relu" && FusePRelu(i, &st)) return st;
  UnaryParams u;
  ActivationParams act;
  if (AsActivation(n, &act)) {
    u.op = act.kind == Activation::kRelu ? UnaryOp::kRelu
         : act.kind == Activation::kClip ? UnaryOp::kClip
         : act.kind == Activation::kSigmoid ? UnaryOp::kSigmoid
         : act.kind == Activation::kLeakyRelu ? UnaryOp::kLeakyRelu : UnaryOp::kTanh;
    u.alpha = act.alpha; u.lo = act.lo; u.hi = act.hi;
  } else if (n.op == "Clip") {
    return Unsup(n, "min/max must be constants");
  } else {
    static const std::map<std::string, UnaryOp> kOps = {
        {"Abs", UnaryOp::kAbs}, {"Neg", UnaryOp::kNeg}, {"Sqrt", UnaryOp::kSqrt},
        {"Exp", UnaryOp::kExp}, {"Log", UnaryOp::kLog}, {"Reciprocal", UnaryOp::kReciprocal},
        {"Floor", UnaryOp::kFloor}, {"Ceil", UnaryOp::kCeil}, {"Erf", UnaryOp::kErf},
        {"HardSigmoid", UnaryOp::kHardSigmoid}, {"HardSwish", UnaryOp::kHardSwish}};
    u.op = kOps.at(n.op);
    if (n.op == "HardSigmoid") { u.alpha = n.AttrFloat("alpha", 0.2f); u.beta = n.AttrFloat("beta", 0.5f); }
  }
  if (x.is_const) {
    HostTensor t = x.c;
    if (t.is_int) { t.f.assign(t.i.begin(), t.i.end()); t.i.clear(); t.is_int = false; }
    for (float& v : t.f) {
      switch (u.op) {
        case UnaryOp::kRelu: v = std::max(v, 0.0f); break;
        case UnaryOp::kClip: v = std::min(std::max(v, u.lo), u.hi); break;
        case UnaryOp::kSigmoid: v = 1.0f / (1.0f + std::exp(-v)); break;
        case UnaryOp::kLeakyRelu: v = v >= 0 ? v : u.alpha * v; break;
        case UnaryOp::kTanh: v = std::tanh(v); break;
        case UnaryOp::kAbs: v = std::fabs(v); break;
        case UnaryOp::kNeg: v = -v; break;
        case UnaryOp::kSqrt: v = std::sqrt(v); break;
        case UnaryOp::kExp: v = std::exp(v); break;
        case UnaryOp::kLog: v = std::log(v); break;
        case UnaryOp::kReciprocal: v = 1.0f / v; break;
        case UnaryOp::kFloor: v = std::floor(v); break;
        case UnaryOp::kCeil: v = std::ceil(v); break;
        case UnaryOp::kErf: v = std::erf(v); break;
        default: return Unsup(n, "constant folding of this op");
      }
    }
    SetConst(n.outputs[0], std::move(t));
    return Status::OK();
  }
  u.count = Prod(x.shape);
  return Emit(StepKind::kUnary, {x.buf}, n, x.shape, u);
}


Status PlanBuilder::LowerBatchNorm(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  for (size_t k = 1; k <= 4; ++k)
    if (!IsConst(n, k)) return Unsup(n, "scale/bias/mean/var must be constants");
  if (x.is_const || x.shape.size() < 2) return Unsup(n, "input");
  float eps = n.AttrFloat("epsilon", 1e-5f);
  const HostTensor &sc = V(n.inputs[1]).c, &bi = V(n.inputs[2]).c, &mu = V(n.inputs[3]).c,
                   &var = V(n.inputs[4]).c;
  int64_t c = x.shape[1];
  HostTensor mul, add;
  mul.shape = add.shape = Shape(x.shape.size() - 1, 1);
  mul.shape[0] = add.shape[0] = c;
  for (int64_t k = 0; k < c; ++k) {
    float a = static_cast<float>(sc.At(k) / std::sqrt(var.At(k) + eps));
    mul.f.push_back(a);
    add.f.push_back(static_cast<float>(bi.At(k) - mu.At(k) * a));
  }
  std::string mname = n.outputs[0] + "#bn_mul", aname = n.outputs[0] + "#bn_add",
              tname = n.outputs[0] + "#bn_tmp";
  SetConst(mname, std::move(mul));
  SetConst(aname, std::move(add));
  const Shape dims = x.shape;
  BinaryParams p = PerElementOf(BinaryOp::kMul, dims, V(mname).shape);
  FM_RETURN_IF_ERROR(Emit(StepKind::kBinary, {x.buf, DeviceOf(mname)}, n, dims, p, tname));
  p.op = BinaryOp::kAdd;
  const int scaled = V(tname).buf, shift = DeviceOf(aname);
  std::string out = FuseActivation(n.outputs[0], &p.act);
  return Emit(StepKind::kBinary, {scaled, shift}, n, dims, p, out);
}

}  // namespace framemill::engine::plan_detail
