#include "gpu/engine/plan.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <set>

namespace framemill::gpu::engine {

const char* StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kConv2d: return "Conv2d";
    case StepKind::kConvTranspose2d: return "ConvTranspose2d";
    case StepKind::kPool2d: return "Pool2d";
    case StepKind::kBinary: return "Binary";
    case StepKind::kUnary: return "Unary";
    case StepKind::kResize: return "Resize";
    case StepKind::kPad: return "Pad";
    case StepKind::kConcat: return "Concat";
    case StepKind::kTranspose: return "Transpose";
    case StepKind::kSlice: return "Slice";
    case StepKind::kReduce: return "Reduce";
    case StepKind::kSoftmax: return "Softmax";
    case StepKind::kMatMul: return "MatMul";
    case StepKind::kArgMax: return "ArgMax";
    case StepKind::kCopy: return "Copy";
  }
  return "?";
}

namespace {

using Shape = std::vector<int64_t>;

int64_t Prod(const Shape& s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t k = from; k < std::min(to, s.size()); ++k) n *= s[k];
  return n;
}

Shape Strides(const Shape& s) {
  Shape st(s.size(), 1);
  for (int k = static_cast<int>(s.size()) - 2; k >= 0; --k) st[k] = st[k + 1] * s[k + 1];
  return st;
}

std::string ShapeStr(const Shape& s) {
  std::string r = "[";
  for (size_t k = 0; k < s.size(); ++k) r += (k ? "," : "") + std::to_string(s[k]);
  return r + "]";
}

int64_t AlignUp(int64_t v) { return (v + kPlanAlignment - 1) / kPlanAlignment * kPlanAlignment; }

// A host tensor gathered from `src` at linear indices `idx`.
HostTensor Take(const HostTensor& src, const std::vector<int64_t>& idx, Shape shape) {
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
void ForEachIndex(const Shape& shape, const std::function<void(int64_t, const Shape&)>& fn) {
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
};

class Builder {
 public:
  Builder(const Graph& g, int batch, StorageType st, const Kernels* k)
      : g_(g), batch_(batch), kernels_(k) {
    plan_.batch = batch;
    plan_.storage = st;
  }

  Result<Plan> Build();

 private:
  Status Lower(size_t i);
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
  // The usual step: one output buffer for the node's first output, with `params`.
  template <typename Params>
  Status Emit(StepKind kind, std::vector<int> inputs, const Node& n,
              const std::vector<int64_t>& out_shape, const Params& params) {
    Step s;
    s.kind = kind;
    s.inputs = std::move(inputs);
    s.output = NewBuffer(n.outputs[0], out_shape);
    s.params = params;
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
  // Reads `n` as a fusable activation.
  bool AsActivation(const Node& n, ActivationParams* act);
  // Fuses a following activation node into *act; returns the new output name.
  std::string FuseActivation(const std::string& out, ActivationParams* act) {
    int c = SoleConsumer(out);
    if (c < 0 || act->kind != Activation::kNone) return out;
    ActivationParams a;
    if (!AsActivation(g_.nodes[c], &a)) return out;
    *act = a;
    skip_[c] = true;
    plan_.fused++;
    return g_.nodes[c].outputs[0];
  }
  Result<std::vector<int64_t>> ConstInts(const Node& n, size_t k) {
    if (!IsConst(n, k)) return Unsup(n, "input " + std::to_string(k) + " must be a constant");
    const HostTensor& t = V(n.inputs[k]).c;
    std::vector<int64_t> r;
    for (int64_t e = 0; e < t.size(); ++e) r.push_back(static_cast<int64_t>(t.At(e)));
    return r;
  }
  Result<std::vector<float>> ConstFloats(const Node& n, size_t k) {
    if (!IsConst(n, k)) return Unsup(n, "input " + std::to_string(k) + " must be a constant");
    const HostTensor& t = V(n.inputs[k]).c;
    std::vector<float> r;
    for (int64_t e = 0; e < t.size(); ++e) r.push_back(static_cast<float>(t.At(e)));
    return r;
  }

  Status LowerConv(size_t i);
  Status LowerConvTranspose(size_t i);
  Status LowerPool(size_t i);
  Status LowerBinary(size_t i);
  Status LowerUnary(size_t i);
  Status LowerMatMul(size_t i);
  Status LowerGemm(size_t i);
  Status LowerReduce(size_t i);
  Status LowerResize(size_t i);
  Status LowerPad(size_t i);
  Status LowerConcat(size_t i);
  Status LowerTranspose(size_t i);
  Status LowerSlice(size_t i);
  Status LowerGather(size_t i);
  Status LowerSplit(size_t i);
  Status LowerReshapeLike(size_t i);
  Status LowerBatchNorm(size_t i);
  Status SliceStep(const Node& n, const std::string& in, const std::string& out,
                   const Shape& starts, const Shape& steps, const Shape& out_dims);
  void Place();

  const Graph& g_;
  int batch_;
  const Kernels* kernels_;
  Plan plan_;
  std::map<std::string, Val> vals_;
  std::map<std::string, std::vector<size_t>> consumers_;
  std::set<std::string> graph_outputs_;
  std::vector<bool> skip_;
};

bool Builder::AsActivation(const Node& n, ActivationParams* act) {
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

Status Builder::LowerConv(size_t i) {
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
  auto st = n.AttrInts("strides"), dl = n.AttrInts("dilations"), pd = n.AttrInts("pads");
  if (st.size() == 2) { p.stride_h = st[0]; p.stride_w = st[1]; }
  if (dl.size() == 2) { p.dil_h = dl[0]; p.dil_w = dl[1]; }
  if (pd.size() == 4) { p.pad_t = pd[0]; p.pad_l = pd[1]; p.pad_b = pd[2]; p.pad_r = pd[3]; }
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
  p.h_out = (p.h_in + p.pad_t + p.pad_b - ekh) / p.stride_h + 1;
  p.w_out = (p.w_in + p.pad_l + p.pad_r - ekw) / p.stride_w + 1;
  if (p.h_out <= 0 || p.w_out <= 0) return Bad(n, "empty output for input " + ShapeStr(x.shape));
  Shape out_shape = {p.n, p.c_out, p.h_out, p.w_out};

  Step s;
  s.kind = StepKind::kConv2d;
  int xb = x.buf;
  int wb = DeviceOf(n.inputs[1]);
  int bb = -1, rb = -1;
  if (Has(n, 2)) {
    if (!IsConst(n, 2) || V(n.inputs[2]).c.size() != p.c_out) return Unsup(n, "bias must be a constant [C_out]");
    bb = DeviceOf(n.inputs[2]);
  }
  // Fusions: Conv -> act, Conv -> Add(residual) -> act, Conv -> act -> Add(residual).
  std::string out = FuseActivation(n.outputs[0], &p.act);
  int c = SoleConsumer(out);
  if (c >= 0 && g_.nodes[c].op == "Add" && g_.nodes[c].inputs.size() == 2) {
    const Node& add = g_.nodes[c];
    const std::string& other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
    auto it = vals_.find(other);
    if (other != out && it != vals_.end() && !it->second.is_const && it->second.shape == out_shape) {
      rb = it->second.buf;
      p.residual_after_act = p.act.kind != Activation::kNone;
      skip_[c] = true;
      plan_.fused++;
      out = add.outputs[0];
      if (!p.residual_after_act) out = FuseActivation(out, &p.act);
    }
  }
  s.inputs = {xb, wb, bb, rb};
  s.output = NewBuffer(out, out_shape);
  if (kernels_) s.scratch_bytes = kernels_->Conv2dScratchBytes(p);
  s.params = p;
  AddStep(std::move(s), n);
  return Status::OK();
}

Status Builder::LowerConvTranspose(size_t i) {
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
  auto st = n.AttrInts("strides"), dl = n.AttrInts("dilations"), pd = n.AttrInts("pads");
  auto op = n.AttrInts("output_padding"), os = n.AttrInts("output_shape");
  if (st.size() == 2) { p.stride_h = st[0]; p.stride_w = st[1]; }
  if (dl.size() == 2) { p.dil_h = dl[0]; p.dil_w = dl[1]; }
  if (pd.size() == 4) { p.pad_t = pd[0]; p.pad_l = pd[1]; p.pad_b = pd[2]; p.pad_r = pd[3]; }
  if (op.size() != 2) op = {0, 0};
  std::string auto_pad = n.AttrString("auto_pad", "NOTSET");
  for (int d = 0; d < 2; ++d) {
    int64_t in = d ? p.w_in : p.h_in, s = d ? p.stride_w : p.stride_h;
    int64_t ek = ((d ? p.kw : p.kh) - 1) * int64_t{d ? p.dil_w : p.dil_h} + 1;
    int32_t& b = d ? p.pad_l : p.pad_t;
    int32_t& e = d ? p.pad_r : p.pad_b;
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
  Step s;
  s.kind = StepKind::kConvTranspose2d;
  int wb = DeviceOf(n.inputs[1]);
  int bb = -1;
  if (Has(n, 2)) {
    if (!IsConst(n, 2)) return Unsup(n, "bias must be a constant");
    bb = DeviceOf(n.inputs[2]);
  }
  std::string out = FuseActivation(n.outputs[0], &p.act);
  s.inputs = {x.buf, wb, bb};
  s.output = NewBuffer(out, {p.n, p.c_out, p.h_out, p.w_out});
  if (kernels_) s.scratch_bytes = kernels_->ConvTranspose2dScratchBytes(p);
  s.params = p;
  AddStep(std::move(s), n);
  return Status::OK();
}

Status Builder::LowerPool(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  if (x.is_const || x.shape.size() != 4) return Unsup(n, "only 4-D non-constant input");
  if (n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool") {
    ReduceParams r;
    r.op = n.op == "GlobalAveragePool" ? ReduceOp::kMean : ReduceOp::kMax;
    r.outer = x.shape[0] * x.shape[1];
    r.reduce = x.shape[2] * x.shape[3];
    r.inner = 1;
    Step s;
    s.kind = StepKind::kReduce;
    s.inputs = {x.buf};
    s.output = NewBuffer(n.outputs[0], {x.shape[0], x.shape[1], 1, 1});
    s.params = r;
    AddStep(std::move(s), n);
    return Status::OK();
  }
  Pool2dParams p;
  p.kind = n.op == "MaxPool" ? PoolKind::kMax : PoolKind::kAvg;
  p.n = x.shape[0]; p.c = x.shape[1]; p.h_in = x.shape[2]; p.w_in = x.shape[3];
  auto ks = n.AttrInts("kernel_shape"), st = n.AttrInts("strides"), pd = n.AttrInts("pads"),
       dl = n.AttrInts("dilations");
  if (ks.size() != 2) return Unsup(n, "kernel_shape must have 2 entries");
  p.kh = ks[0]; p.kw = ks[1];
  if (st.size() == 2) { p.stride_h = st[0]; p.stride_w = st[1]; }
  if (dl.size() == 2) { p.dil_h = dl[0]; p.dil_w = dl[1]; }
  if (pd.size() == 4) { p.pad_t = pd[0]; p.pad_l = pd[1]; p.pad_b = pd[2]; p.pad_r = pd[3]; }
  p.count_include_pad = n.AttrInt("count_include_pad", 0) != 0;
  bool ceil_mode = n.AttrInt("ceil_mode", 0) != 0;
  std::string auto_pad = n.AttrString("auto_pad", "NOTSET");
  for (int d = 0; d < 2; ++d) {
    int64_t in = d ? p.w_in : p.h_in, s = d ? p.stride_w : p.stride_h;
    int64_t ek = ((d ? p.kw : p.kh) - 1) * int64_t{d ? p.dil_w : p.dil_h} + 1;
    int32_t& b = d ? p.pad_l : p.pad_t;
    int32_t& e = d ? p.pad_r : p.pad_b;
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
  Step s;
  s.kind = StepKind::kPool2d;
  s.inputs = {x.buf};
  s.output = NewBuffer(n.outputs[0], {p.n, p.c, p.h_out, p.w_out});
  s.params = p;
  AddStep(std::move(s), n);
  return Status::OK();
}

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

double ApplyBinary(const std::string& op, double a, double b, bool ints) {
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return ints ? static_cast<double>(static_cast<int64_t>(a) / static_cast<int64_t>(b)) : a / b;
  if (op == "Max") return std::max(a, b);
  if (op == "Min") return std::min(a, b);
  if (op == "Pow") return std::pow(a, b);
  return NAN;
}

Status Builder::LowerBinary(size_t i) {
  const Node& n = g_.nodes[i];
  if (n.inputs.size() == 1) {  // variadic Max/Min of one input
    vals_[n.outputs[0]] = V(n.inputs[0]);
    return Status::OK();
  }
  if (n.inputs.size() != 2) return Unsup(n, "only two inputs");
  const Val& a = V(n.inputs[0]);
  const Val& b = V(n.inputs[1]);
  auto out_shape = Broadcast(a.shape, b.shape);
  if (!out_shape.ok()) return Bad(n, out_shape.status().message());
  if (a.is_const && b.is_const) {
    HostTensor t;
    t.is_int = a.c.is_int && b.c.is_int;
    t.shape = *out_shape;
    Shape sa = BroadcastStrides(a.shape, t.shape), sb = BroadcastStrides(b.shape, t.shape);
    ForEachIndex(t.shape, [&](int64_t, const Shape& idx) {
      int64_t ia = 0, ib = 0;
      for (size_t d = 0; d < idx.size(); ++d) { ia += idx[d] * sa[d]; ib += idx[d] * sb[d]; }
      double v = ApplyBinary(n.op, a.c.At(ia), b.c.At(ib), t.is_int);
      if (t.is_int) t.i.push_back(static_cast<int64_t>(v)); else t.f.push_back(static_cast<float>(v));
    });
    SetConst(n.outputs[0], std::move(t));
    return Status::OK();
  }
  if (n.op == "Pow" && b.is_const && b.c.size() == 1) {
    UnaryParams u;
    u.count = Prod(a.shape);
    float e = static_cast<float>(b.c.At(0));
    if (e == 2.0f) u.op = UnaryOp::kSquare;
    else if (e == 0.5f) u.op = UnaryOp::kSqrt;
    else if (e == 1.0f) u.op = UnaryOp::kIdentity;
    else { u.op = UnaryOp::kPowScalar; u.alpha = e; }
    Step s;
    s.kind = StepKind::kUnary;
    s.inputs = {a.buf};
    s.output = NewBuffer(n.outputs[0], a.shape);
    s.params = u;
    AddStep(std::move(s), n);
    return Status::OK();
  }
  if (out_shape->size() > static_cast<size_t>(kMaxRank)) return Unsup(n, "rank above 6");
  BinaryParams p;
  static const std::map<std::string, BinaryOp> kOps = {
      {"Add", BinaryOp::kAdd}, {"Sub", BinaryOp::kSub}, {"Mul", BinaryOp::kMul},
      {"Div", BinaryOp::kDiv}, {"Max", BinaryOp::kMax}, {"Min", BinaryOp::kMin},
      {"Pow", BinaryOp::kPow}};
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
  Step s;
  s.kind = StepKind::kBinary;
  int ab = DeviceOf(n.inputs[0]);
  int bb = DeviceOf(n.inputs[1]);
  s.inputs = {ab, bb};
  std::string out = FuseActivation(n.outputs[0], &p.act);
  s.output = NewBuffer(out, *out_shape);
  s.params = p;
  AddStep(std::move(s), n);
  return Status::OK();
}

Status Builder::LowerUnary(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
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
  Step s;
  s.kind = StepKind::kUnary;
  s.inputs = {x.buf};
  s.output = NewBuffer(n.outputs[0], x.shape);
  s.params = u;
  AddStep(std::move(s), n);
  return Status::OK();
}

Status Builder::LowerMatMul(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& a = V(n.inputs[0]);
  const Val& b = V(n.inputs[1]);
  if (a.is_const && b.is_const) return Unsup(n, "constant folding of MatMul");
  Shape as = a.shape, bs = b.shape;
  bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  MatMulParams p;
  p.m = as[as.size() - 2]; p.k = as.back(); p.n = bs.back();
  if (bs[bs.size() - 2] != p.k) return Bad(n, "inner dims of " + ShapeStr(a.shape) + " x " + ShapeStr(b.shape));
  Shape lead_a(as.begin(), as.end() - 2), lead_b(bs.begin(), bs.end() - 2), lead;
  if (lead_b.empty() || Prod(lead_b) == 1) {
    // [.., M, K] x [K, N]: one GEMM with M' = prod(leading) * M.
    p.m *= Prod(lead_a);
    lead = lead_a;
  } else if (lead_a == lead_b) {
    p.batch = Prod(lead_a);
    p.a_batch_stride = p.m * p.k;
    p.b_batch_stride = p.k * p.n;
    lead = lead_a;
  } else if (lead_a.empty() || Prod(lead_a) == 1) {
    p.batch = Prod(lead_b);
    p.b_batch_stride = p.k * p.n;
    lead = lead_b;
  } else {
    return Unsup(n, "broadcast of batch dims " + ShapeStr(a.shape) + " x " + ShapeStr(b.shape));
  }
  Shape out = lead;
  if (!a_vec) out.push_back(as[as.size() - 2]);
  if (!b_vec) out.push_back(p.n);
  p.beta = 0;
  Step s;
  s.kind = StepKind::kMatMul;
  int ab = DeviceOf(n.inputs[0]), bb = DeviceOf(n.inputs[1]), cb = -1;
  std::string name = n.outputs[0];
  int c = SoleConsumer(name);
  if (c >= 0 && g_.nodes[c].op == "Add" && g_.nodes[c].inputs.size() == 2) {
    const Node& add = g_.nodes[c];
    const std::string& other = add.inputs[0] == name ? add.inputs[1] : add.inputs[0];
    const Val& o = V(other);
    if (o.is_const && o.c.size() == p.n && (o.shape.empty() || o.shape.back() == p.n) &&
        o.shape.size() <= out.size()) {
      cb = DeviceOf(other);
      p.beta = 1;
      p.c_stride_n = 1;
      skip_[c] = true;
      plan_.fused++;
      name = add.outputs[0];
    }
  }
  name = FuseActivation(name, &p.act);
  s.inputs = {ab, bb, cb};
  s.output = NewBuffer(name, out);
  if (kernels_) s.scratch_bytes = kernels_->MatMulScratchBytes(p);
  s.params = p;
  AddStep(std::move(s), n);
  return Status::OK();
}

Status Builder::LowerGemm(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& a = V(n.inputs[0]);
  const Val& b = V(n.inputs[1]);
  if (a.shape.size() != 2 || b.shape.size() != 2) return Bad(n, "Gemm needs 2-D inputs");
  MatMulParams p;
  p.trans_a = n.AttrInt("transA", 0) != 0;
  p.trans_b = n.AttrInt("transB", 0) != 0;
  p.alpha = n.AttrFloat("alpha", 1.0f);
  p.beta = n.AttrFloat("beta", 1.0f);
  p.m = p.trans_a ? a.shape[1] : a.shape[0];
  p.k = p.trans_a ? a.shape[0] : a.shape[1];
  p.n = p.trans_b ? b.shape[0] : b.shape[1];
  if ((p.trans_b ? b.shape[1] : b.shape[0]) != p.k) return Bad(n, "inner dims disagree");
  int cb = -1;
  if (Has(n, 2)) {
    const Val& c = V(n.inputs[2]);
    Shape cs = c.shape;
    while (cs.size() < 2) cs.insert(cs.begin(), 1);
    if ((cs[0] != 1 && cs[0] != p.m) || (cs[1] != 1 && cs[1] != p.n)) return Bad(n, "C does not broadcast");
    p.c_stride_m = cs[0] == 1 ? 0 : cs[1];
    p.c_stride_n = cs[1] == 1 ? 0 : 1;
    cb = DeviceOf(n.inputs[2]);
  } else {
    p.beta = 0;
  }
  Step s;
  s.kind = StepKind::kMatMul;
  int ab = DeviceOf(n.inputs[0]), bb = DeviceOf(n.inputs[1]);
  std::string name = FuseActivation(n.outputs[0], &p.act);
  s.inputs = {ab, bb, cb};
  s.output = NewBuffer(name, {p.m, p.n});
  if (kernels_) s.scratch_bytes = kernels_->MatMulScratchBytes(p);
  s.params = p;
  AddStep(std::move(s), n);
  return Status::OK();
}

Status Builder::LowerReduce(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  int64_t r = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> axes = n.AttrInts("axes");
  if (axes.empty() && Has(n, 1)) {
    auto ax = ConstInts(n, 1);
    if (!ax.ok()) return ax.status();
    axes = *ax;
  }
  if (axes.empty()) {
    if (n.AttrInt("noop_with_empty_axes", 0)) { vals_[n.outputs[0]] = x; return Status::OK(); }
    for (int64_t k = 0; k < r; ++k) axes.push_back(k);
  }
  for (auto& a : axes) {
    if (a < 0) a += r;
    if (a < 0 || a >= r) return Bad(n, "axis out of range");
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  for (size_t k = 1; k < axes.size(); ++k)
    if (axes[k] != axes[k - 1] + 1) return Unsup(n, "reduction over non-adjacent axes");
  bool keep = n.AttrInt("keepdims", 1) != 0;
  Shape out;
  for (int64_t k = 0; k < r; ++k) {
    bool red = std::find(axes.begin(), axes.end(), k) != axes.end();
    if (!red) out.push_back(x.shape[k]);
    else if (keep) out.push_back(1);
  }
  ReduceParams p;
  static const std::map<std::string, ReduceOp> kOps = {
      {"ReduceMean", ReduceOp::kMean}, {"ReduceSum", ReduceOp::kSum}, {"ReduceMax", ReduceOp::kMax},
      {"ReduceMin", ReduceOp::kMin}, {"ReduceSumSquare", ReduceOp::kSumSquare}, {"ReduceL2", ReduceOp::kL2}};
  p.op = kOps.at(n.op);
  p.outer = Prod(x.shape, 0, axes.front());
  p.reduce = Prod(x.shape, axes.front(), axes.back() + 1);
  p.inner = Prod(x.shape, axes.back() + 1);
  if (x.is_const) return Unsup(n, "constant folding of reductions");
  return Emit(StepKind::kReduce, {x.buf}, n, out, p);
}

Status Builder::LowerResize(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  if (x.is_const || x.shape.size() != 4) return Unsup(n, "only 4-D non-constant input");
  std::vector<float> scales;
  std::vector<int64_t> sizes;
  size_t scale_in = n.inputs.size() >= 3 ? 2 : 1;
  if (Has(n, 3)) {
    auto s = ConstInts(n, 3);
    if (!s.ok()) return s.status();
    sizes = *s;
  }
  if (sizes.empty() && Has(n, scale_in)) {
    auto s = ConstFloats(n, scale_in);
    if (!s.ok()) return s.status();
    scales = *s;
  }
  if (sizes.empty() && scales.empty()) scales = n.AttrFloats("scales");
  ResizeParams p;
  Shape out = x.shape;
  if (sizes.size() == 4) {
    out = sizes;
    p.scale_h = static_cast<float>(out[2]) / x.shape[2];
    p.scale_w = static_cast<float>(out[3]) / x.shape[3];
  } else if (scales.size() == 4) {
    for (int d = 0; d < 4; ++d) out[d] = static_cast<int64_t>(std::floor(x.shape[d] * scales[d]));
    p.scale_h = scales[2];
    p.scale_w = scales[3];
  } else {
    return Unsup(n, "needs constant 4-entry scales or sizes");
  }
  if (out[0] != x.shape[0] || out[1] != x.shape[1]) return Unsup(n, "only spatial resizing");
  std::string mode = n.AttrString("mode", "nearest");
  if (mode == "linear" || mode == "bilinear") p.mode = ResizeMode::kLinear;
  else if (mode == "nearest") p.mode = ResizeMode::kNearest;
  else return Unsup(n, "mode " + mode);
  std::string ct = n.AttrString("coordinate_transformation_mode", "half_pixel");
  static const std::map<std::string, ResizeCoord> kCt = {
      {"half_pixel", ResizeCoord::kHalfPixel}, {"pytorch_half_pixel", ResizeCoord::kPytorchHalfPixel},
      {"align_corners", ResizeCoord::kAlignCorners}, {"asymmetric", ResizeCoord::kAsymmetric},
      {"tf_half_pixel_for_nn", ResizeCoord::kTfHalfPixelForNn}};
  if (!kCt.count(ct)) return Unsup(n, "coordinate_transformation_mode " + ct);
  p.coord = kCt.at(ct);
  std::string nm = n.AttrString("nearest_mode", "round_prefer_floor");
  static const std::map<std::string, ResizeNearest> kNm = {
      {"round_prefer_floor", ResizeNearest::kRoundPreferFloor},
      {"round_prefer_ceil", ResizeNearest::kRoundPreferCeil}, {"floor", ResizeNearest::kFloor},
      {"ceil", ResizeNearest::kCeil}};
  if (!kNm.count(nm)) return Unsup(n, "nearest_mode " + nm);
  p.nearest = kNm.at(nm);
  p.planes = x.shape[0] * x.shape[1];
  p.h_in = x.shape[2]; p.w_in = x.shape[3]; p.h_out = out[2]; p.w_out = out[3];
  return Emit(StepKind::kResize, {x.buf}, n, out, p);
}

Status Builder::LowerPad(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  std::vector<int64_t> pads = n.AttrInts("pads");
  if (Has(n, 1)) {
    auto p = ConstInts(n, 1);
    if (!p.ok()) return p.status();
    pads = *p;
  }
  float value = n.AttrFloat("value", 0.0f);
  if (Has(n, 2)) {
    auto v = ConstFloats(n, 2);
    if (!v.ok()) return v.status();
    if (!v->empty()) value = (*v)[0];
  }
  size_t r = x.shape.size();
  if (pads.size() != 2 * r) return Bad(n, "pads needs 2 x rank entries");
  if (r > static_cast<size_t>(kMaxRank) || x.is_const) return Unsup(n, "rank above 6 or constant input");
  PadParams p;
  std::string mode = n.AttrString("mode", "constant");
  if (mode == "constant") p.mode = PadMode::kConstant;
  else if (mode == "reflect") p.mode = PadMode::kReflect;
  else if (mode == "edge") p.mode = PadMode::kEdge;
  else return Unsup(n, "mode " + mode);
  p.rank = static_cast<int32_t>(r);
  p.value = value;
  Shape out(r);
  for (size_t d = 0; d < r; ++d) {
    if (pads[d] < 0 || pads[d + r] < 0) return Unsup(n, "negative pads");
    p.in_dims[d] = x.shape[d];
    p.before[d] = pads[d];
    p.after[d] = pads[d + r];
    out[d] = x.shape[d] + pads[d] + pads[d + r];
    if (p.mode == PadMode::kReflect && (pads[d] >= x.shape[d] || pads[d + r] >= x.shape[d]))
      return Bad(n, "reflect pad wider than the input");
  }
  return Emit(StepKind::kPad, {x.buf}, n, out, p);
}

Status Builder::LowerConcat(size_t i) {
  const Node& n = g_.nodes[i];
  std::vector<const Val*> in;
  for (const auto& name : n.inputs)
    if (!name.empty()) in.push_back(&V(name));
  if (in.empty()) return Bad(n, "no inputs");
  int64_t r = static_cast<int64_t>(in[0]->shape.size());
  int64_t axis = n.AttrInt("axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return Bad(n, "axis out of range");
  Shape out = in[0]->shape;
  out[axis] = 0;
  bool all_const = true;
  for (const Val* v : in) {
    if (static_cast<int64_t>(v->shape.size()) != r) return Bad(n, "ranks differ");
    for (int64_t d = 0; d < r; ++d)
      if (d != axis && v->shape[d] != out[d]) return Bad(n, "shapes " + ShapeStr(v->shape) + " and " + ShapeStr(in[0]->shape));
    out[axis] += v->shape[axis];
    all_const = all_const && v->is_const;
  }
  int64_t outer = Prod(out, 0, axis), inner = Prod(out, axis + 1);
  if (all_const) {
    HostTensor t;
    t.is_int = in[0]->c.is_int;
    t.shape = out;
    for (int64_t o = 0; o < outer; ++o)
      for (const Val* v : in) {
        int64_t chunk = v->shape[axis] * inner;
        for (int64_t k = 0; k < chunk; ++k) {
          double e = v->c.At(o * chunk + k);
          if (t.is_int) t.i.push_back(v->c.is_int ? v->c.i[o * chunk + k] : static_cast<int64_t>(e));
          else t.f.push_back(static_cast<float>(e));
        }
      }
    SetConst(n.outputs[0], std::move(t));
    return Status::OK();
  }
  Step s;
  s.kind = StepKind::kConcat;
  for (const auto& name : n.inputs) {
    if (name.empty()) continue;
    s.inputs.push_back(DeviceOf(name));
    s.concat_sizes.push_back(V(name).shape[axis]);
  }
  ConcatParams p;
  p.count = static_cast<int32_t>(s.inputs.size());
  p.outer = outer;
  p.inner = inner;
  s.output = NewBuffer(n.outputs[0], out);
  s.params = p;
  AddStep(std::move(s), n);
  return Status::OK();
}

Status Builder::LowerTranspose(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  int r = static_cast<int>(x.shape.size());
  std::vector<int64_t> perm = n.AttrInts("perm");
  if (perm.empty())
    for (int k = r - 1; k >= 0; --k) perm.push_back(k);
  if (static_cast<int>(perm.size()) != r) return Bad(n, "perm size");
  Shape out(r);
  for (int k = 0; k < r; ++k) out[k] = x.shape[perm[k]];
  if (x.is_const) {
    Shape st = Strides(x.shape);
    std::vector<int64_t> idx;
    ForEachIndex(out, [&](int64_t, const Shape& oi) {
      int64_t src = 0;
      for (int k = 0; k < r; ++k) src += oi[k] * st[perm[k]];
      idx.push_back(src);
    });
    SetConst(n.outputs[0], Take(x.c, idx, out));
    return Status::OK();
  }
  // When the non-unit axes keep their order the bytes do not move.
  std::vector<int64_t> order;
  for (int k = 0; k < r; ++k)
    if (x.shape[perm[k]] != 1) order.push_back(perm[k]);
  if (std::is_sorted(order.begin(), order.end())) {
    Alias(n.outputs[0], x.buf, out);
    return Status::OK();
  }
  if (r > kMaxRank) return Unsup(n, "rank above 6");
  TransposeParams p;
  p.rank = r;
  for (int k = 0; k < r; ++k) { p.in_dims[k] = x.shape[k]; p.perm[k] = static_cast<int32_t>(perm[k]); }
  return Emit(StepKind::kTranspose, {x.buf}, n, out, p);
}

Status Builder::SliceStep(const Node& n, const std::string& in, const std::string& out,
                          const Shape& starts, const Shape& steps, const Shape& out_dims) {
  const Val& x = V(in);
  int r = static_cast<int>(x.shape.size());
  if (x.is_const) {
    Shape st = Strides(x.shape);
    std::vector<int64_t> idx;
    ForEachIndex(out_dims, [&](int64_t, const Shape& oi) {
      int64_t src = 0;
      for (int k = 0; k < r; ++k) src += (starts[k] + oi[k] * steps[k]) * st[k];
      idx.push_back(src);
    });
    SetConst(out, Take(x.c, idx, out_dims));
    return Status::OK();
  }
  if (out_dims == x.shape) {
    bool whole = true;
    for (int k = 0; k < r; ++k) whole = whole && starts[k] == 0 && steps[k] == 1;
    if (whole) { Alias(out, x.buf, out_dims); return Status::OK(); }
  }
  if (r > kMaxRank) return Unsup(n, "rank above 6");
  SliceParams p;
  p.rank = r;
  for (int k = 0; k < r; ++k) {
    p.in_dims[k] = x.shape[k]; p.out_dims[k] = out_dims[k];
    p.starts[k] = starts[k]; p.steps[k] = steps[k];
  }
  Step s;
  s.kind = StepKind::kSlice;
  s.inputs = {x.buf};
  s.output = NewBuffer(out, out_dims);
  s.params = p;
  AddStep(std::move(s), n);
  return Status::OK();
}

Status Builder::LowerSlice(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  int r = static_cast<int>(x.shape.size());
  std::vector<int64_t> st = n.AttrInts("starts"), en = n.AttrInts("ends"), ax = n.AttrInts("axes"), sp;
  if (n.inputs.size() >= 3) {
    auto a = ConstInts(n, 1), b = ConstInts(n, 2);
    if (!a.ok()) return a.status();
    if (!b.ok()) return b.status();
    st = *a; en = *b;
    if (Has(n, 3)) { auto c = ConstInts(n, 3); if (!c.ok()) return c.status(); ax = *c; }
    if (Has(n, 4)) { auto d = ConstInts(n, 4); if (!d.ok()) return d.status(); sp = *d; }
  }
  if (ax.empty()) for (size_t k = 0; k < st.size(); ++k) ax.push_back(static_cast<int64_t>(k));
  if (sp.empty()) sp.assign(st.size(), 1);
  if (st.size() != en.size() || ax.size() != st.size() || sp.size() != st.size())
    return Bad(n, "starts/ends/axes/steps sizes differ");
  Shape starts(r, 0), steps(r, 1), out = x.shape;
  for (size_t k = 0; k < st.size(); ++k) {
    int64_t a = ax[k] < 0 ? ax[k] + r : ax[k];
    if (a < 0 || a >= r) return Bad(n, "axis out of range");
    int64_t dim = x.shape[a], step = sp[k];
    if (step == 0) return Bad(n, "step 0");
    int64_t s = st[k], e = en[k];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      out[a] = std::max<int64_t>(0, (e - s + step - 1) / step);
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      out[a] = std::max<int64_t>(0, (s - e + (-step) - 1) / (-step));
    }
    starts[a] = s;
    steps[a] = step;
  }
  return SliceStep(n, n.inputs[0], n.outputs[0], starts, steps, out);
}

Status Builder::LowerGather(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  if (!IsConst(n, 1)) return Unsup(n, "indices must be a constant");
  const HostTensor& ind = V(n.inputs[1]).c;
  int r = static_cast<int>(x.shape.size());
  int64_t axis = n.AttrInt("axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return Bad(n, "axis out of range");
  std::vector<int64_t> idx;
  for (int64_t k = 0; k < ind.size(); ++k) {
    int64_t v = static_cast<int64_t>(ind.At(k));
    if (v < 0) v += x.shape[axis];
    if (v < 0 || v >= x.shape[axis]) return Bad(n, "index out of range");
    idx.push_back(v);
  }
  Shape out;
  for (int64_t d = 0; d < axis; ++d) out.push_back(x.shape[d]);
  for (int64_t d : ind.shape) out.push_back(d);
  for (int64_t d = axis + 1; d < r; ++d) out.push_back(x.shape[d]);
  if (x.is_const) {
    Shape xs = Strides(x.shape);
    int64_t outer = Prod(x.shape, 0, axis), inner = Prod(x.shape, axis + 1);
    std::vector<int64_t> src;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t v : idx)
        for (int64_t in = 0; in < inner; ++in) src.push_back((o * x.shape[axis] + v) * inner + in);
    SetConst(n.outputs[0], Take(x.c, src, out));
    return Status::OK();
  }
  // On the device: an arithmetic run of indices is a Slice.
  int64_t step = idx.size() > 1 ? idx[1] - idx[0] : 1;
  for (size_t k = 1; k < idx.size(); ++k)
    if (idx[k] - idx[k - 1] != step || step == 0) return Unsup(n, "indices that are not an arithmetic run");
  if (idx.empty()) return Unsup(n, "empty indices");
  Shape starts(r, 0), steps(r, 1), sliced = x.shape;
  starts[axis] = idx[0];
  steps[axis] = step;
  sliced[axis] = static_cast<int64_t>(idx.size());
  std::string tmp = n.outputs[0] + "#slice";
  FM_RETURN_IF_ERROR(SliceStep(n, n.inputs[0], tmp, starts, steps, sliced));
  Alias(n.outputs[0], V(tmp).buf, out);
  return Status::OK();
}

Status Builder::LowerSplit(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  int r = static_cast<int>(x.shape.size());
  int64_t axis = n.AttrInt("axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return Bad(n, "axis out of range");
  std::vector<int64_t> split = n.AttrInts("split");
  if (split.empty() && Has(n, 1)) {
    auto s = ConstInts(n, 1);
    if (!s.ok()) return s.status();
    split = *s;
  }
  int64_t parts = static_cast<int64_t>(n.outputs.size());
  if (split.empty()) {
    if (x.shape[axis] % parts) return Bad(n, "axis not divisible into equal parts");
    split.assign(parts, x.shape[axis] / parts);
  }
  if (static_cast<int64_t>(split.size()) != parts) return Bad(n, "split sizes vs outputs");
  int64_t start = 0;
  for (int64_t k = 0; k < parts; ++k) {
    Shape starts(r, 0), steps(r, 1), out = x.shape;
    starts[axis] = start;
    out[axis] = split[k];
    start += split[k];
    if (!n.outputs[k].empty()) FM_RETURN_IF_ERROR(SliceStep(n, n.inputs[0], n.outputs[k], starts, steps, out));
  }
  if (start != x.shape[axis]) return Bad(n, "split sizes do not add up");
  return Status::OK();
}

Status Builder::LowerReshapeLike(size_t i) {
  const Node& n = g_.nodes[i];
  const Val x = V(n.inputs[0]);
  int64_t total = Prod(x.shape);
  int r = static_cast<int>(x.shape.size());
  Shape out;
  if (n.op == "Identity" || n.op == "Dropout") {
    out = x.shape;
  } else if (n.op == "Cast") {
    int64_t to = n.AttrInt("to", 1);
    bool to_float = to == 1 || to == 10 || to == 11 || to == 16;
    if (x.is_const) {
      HostTensor t = x.c;
      if (to_float && t.is_int) { t.f.assign(t.i.begin(), t.i.end()); t.i.clear(); t.is_int = false; }
      if (!to_float && !t.is_int) {
        for (float v : t.f) t.i.push_back(static_cast<int64_t>(v));
        t.f.clear();
        t.is_int = true;
      }
      SetConst(n.outputs[0], std::move(t));
      return Status::OK();
    }
    if (!to_float) return Unsup(n, "casting an activation to an integer type");
    out = x.shape;
  } else if (n.op == "Shape") {
    HostTensor t;
    t.is_int = true;
    int64_t start = n.AttrInt("start", 0), end = n.AttrInt("end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, start, r);
    t.i.assign(x.shape.begin() + start, x.shape.begin() + end);
    t.shape = {end - start};
    SetConst(n.outputs[0], std::move(t));
    return Status::OK();
  } else if (n.op == "Flatten") {
    int64_t axis = n.AttrInt("axis", 1);
    if (axis < 0) axis += r;
    out = {Prod(x.shape, 0, axis), Prod(x.shape, axis)};
  } else if (n.op == "Squeeze" || n.op == "Unsqueeze") {
    std::vector<int64_t> axes = n.AttrInts("axes");
    if (axes.empty() && Has(n, 1)) {
      auto a = ConstInts(n, 1);
      if (!a.ok()) return a.status();
      axes = *a;
    }
    if (n.op == "Squeeze") {
      for (auto& a : axes) if (a < 0) a += r;
      for (int d = 0; d < r; ++d) {
        bool listed = std::find(axes.begin(), axes.end(), d) != axes.end();
        if (listed && x.shape[d] != 1) return Bad(n, "squeezing a dimension that is not 1");
        if (!(listed || (axes.empty() && x.shape[d] == 1))) out.push_back(x.shape[d]);
      }
    } else {
      int64_t ro = r + static_cast<int64_t>(axes.size());
      for (auto& a : axes) if (a < 0) a += ro;
      size_t src = 0;
      for (int64_t d = 0; d < ro; ++d) {
        if (std::find(axes.begin(), axes.end(), d) != axes.end()) out.push_back(1);
        else if (src < x.shape.size()) out.push_back(x.shape[src++]);
        else return Bad(n, "axes out of range");
      }
    }
  } else {  // Reshape
    std::vector<int64_t> target = n.AttrInts("shape");
    if (Has(n, 1)) {
      auto t = ConstInts(n, 1);
      if (!t.ok()) return t.status();
      target = *t;
    }
    bool allowzero = n.AttrInt("allowzero", 0) != 0;
    int64_t known = 1, infer = -1;
    for (size_t d = 0; d < target.size(); ++d) {
      int64_t v = target[d];
      if (v == 0 && !allowzero) v = d < x.shape.size() ? x.shape[d] : 0;
      if (v == -1) { if (infer >= 0) return Bad(n, "two -1 dims"); infer = static_cast<int64_t>(d); }
      else known *= v;
      out.push_back(v);
    }
    // A batch of 1 baked into a reshape (converted from a fixed-batch TF.js graph) follows
    // the real batch, so one plan serves every batch size.
    if (batch_ > 1 && !out.empty() && out[0] == 1 && !x.shape.empty() && x.shape[0] == batch_ &&
        known * batch_ == total * (infer >= 0 ? 1 : 1) && infer < 0) {
      out[0] = batch_;
      known *= batch_;
    } else if (batch_ > 1 && !out.empty() && out[0] == 1 && infer > 0 && !x.shape.empty() &&
               x.shape[0] == batch_ && known > 0 && total % (known * batch_) == 0) {
      out[0] = batch_;
      known *= batch_;
    }
    if (infer >= 0) {
      if (known == 0 || total % known) return Bad(n, "cannot reshape " + ShapeStr(x.shape) + " to " + ShapeStr(target));
      out[infer] = total / known;
    }
  }
  if (Prod(out) != total) return Bad(n, "cannot reshape " + ShapeStr(x.shape) + " to " + ShapeStr(out));
  if (x.is_const) {
    HostTensor t = x.c;
    t.shape = out;
    SetConst(n.outputs[0], std::move(t));
  } else {
    Alias(n.outputs[0], x.buf, out);
  }
  return Status::OK();
}

Status Builder::LowerBatchNorm(size_t i) {
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
  Shape dims = x.shape;
  BinaryParams p;
  p.rank = static_cast<int32_t>(dims.size());
  Shape xs = Strides(dims), cs = BroadcastStrides(V(mname).shape, dims);
  for (size_t k = 0; k < dims.size(); ++k) { p.dims[k] = dims[k]; p.a_strides[k] = xs[k]; p.b_strides[k] = cs[k]; }
  p.op = BinaryOp::kMul;
  Step s1;
  s1.kind = StepKind::kBinary;
  s1.inputs = {x.buf, DeviceOf(mname)};
  s1.output = NewBuffer(tname, dims);
  s1.params = p;
  AddStep(std::move(s1), n);
  p.op = BinaryOp::kAdd;
  Step s2;
  s2.kind = StepKind::kBinary;
  s2.inputs = {V(tname).buf, DeviceOf(aname)};
  std::string out = FuseActivation(n.outputs[0], &p.act);
  s2.output = NewBuffer(out, dims);
  s2.params = p;
  AddStep(std::move(s2), n);
  return Status::OK();
}

Status Builder::Lower(size_t i) {
  const Node& n = g_.nodes[i];
  const std::string& op = n.op;
  if (op == "Constant") {
    HostTensor t;
    if (n.attrs.contains("value")) {
      const auto& v = n.attrs["value"];
      std::string dtype = v.value("dtype", "float32");
      t.is_int = dtype != "float32" && dtype != "float16" && dtype != "float64";
      for (const auto& d : v.value("shape", nlohmann::json::array())) t.shape.push_back(d.get<int64_t>());
      const auto& data = v.value("data", nlohmann::json::array());
      for (const auto& e : data) {
        if (t.is_int) t.i.push_back(e.get<int64_t>()); else t.f.push_back(e.get<float>());
      }
      if (static_cast<int64_t>(data.size()) != t.size()) return Bad(n, "value data does not fill its shape");
    } else if (n.attrs.contains("value_float") || n.attrs.contains("value_floats")) {
      t.f = n.AttrFloats(n.attrs.contains("value_float") ? "value_float" : "value_floats");
      if (n.attrs.contains("value_floats")) t.shape = {static_cast<int64_t>(t.f.size())};
    } else if (n.attrs.contains("value_int") || n.attrs.contains("value_ints")) {
      t.is_int = true;
      t.i = n.AttrInts(n.attrs.contains("value_int") ? "value_int" : "value_ints");
      if (n.attrs.contains("value_ints")) t.shape = {static_cast<int64_t>(t.i.size())};
    } else {
      return Unsup(n, "Constant without value");
    }
    SetConst(n.outputs[0], std::move(t));
    return Status::OK();
  }
  if (op == "Conv") return LowerConv(i);
  if (op == "ConvTranspose") return LowerConvTranspose(i);
  if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "GlobalMaxPool")
    return LowerPool(i);
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min" || op == "Pow")
    return LowerBinary(i);
  if (op == "Relu" || op == "Clip" || op == "Sigmoid" || op == "LeakyRelu" || op == "Tanh" ||
      op == "Abs" || op == "Neg" || op == "Sqrt" || op == "Exp" || op == "Log" ||
      op == "Reciprocal" || op == "Floor" || op == "Ceil" || op == "Erf" || op == "HardSigmoid" ||
      op == "HardSwish")
    return LowerUnary(i);
  if (op == "MatMul") return LowerMatMul(i);
  if (op == "Gemm") return LowerGemm(i);
  if (op.rfind("Reduce", 0) == 0) return LowerReduce(i);
  if (op == "Resize") return LowerResize(i);
  if (op == "Pad") return LowerPad(i);
  if (op == "Concat") return LowerConcat(i);
  if (op == "Transpose") return LowerTranspose(i);
  if (op == "Slice") return LowerSlice(i);
  if (op == "Gather") return LowerGather(i);
  if (op == "Split") return LowerSplit(i);
  if (op == "BatchNormalization") return LowerBatchNorm(i);
  if (op == "Softmax" || op == "LogSoftmax") {
    const Val& x = V(n.inputs[0]);
    if (x.is_const) return Unsup(n, "constant input");
    int64_t r = static_cast<int64_t>(x.shape.size());
    int64_t axis = n.AttrInt("axis", 1);
    if (axis < 0) axis += r;
    SoftmaxParams p;  // opset 11: the input is coerced to 2-D at `axis`
    p.outer = Prod(x.shape, 0, axis);
    p.axis = Prod(x.shape, axis);
    p.inner = 1;
    p.log = op == "LogSoftmax";
    Step s;
    s.kind = StepKind::kSoftmax;
    s.inputs = {x.buf};
    s.output = NewBuffer(n.outputs[0], x.shape);
    s.params = p;
    AddStep(std::move(s), n);
    return Status::OK();
  }
  if (op == "ArgMax") {
    const Val& x = V(n.inputs[0]);
    if (x.is_const) return Unsup(n, "constant input");
    int64_t r = static_cast<int64_t>(x.shape.size());
    int64_t axis = n.AttrInt("axis", 0);
    if (axis < 0) axis += r;
    if (n.AttrInt("select_last_index", 0)) return Unsup(n, "select_last_index");
    ArgMaxParams p;
    p.outer = Prod(x.shape, 0, axis);
    p.axis = x.shape[axis];
    p.inner = Prod(x.shape, axis + 1);
    Shape out = x.shape;
    if (n.AttrInt("keepdims", 1)) out[axis] = 1; else out.erase(out.begin() + axis);
    Step s;
    s.kind = StepKind::kArgMax;
    s.inputs = {x.buf};
    s.output = NewBuffer(n.outputs[0], out);
    s.params = p;
    AddStep(std::move(s), n);
    return Status::OK();
  }
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" ||
      op == "Identity" || op == "Dropout" || op == "Cast" || op == "Shape")
    return LowerReshapeLike(i);
  return Unsup(n, "no lowering");
}

// Greedy best-offset placement, largest buffers first: each goes at the lowest offset
// where it overlaps no placed buffer whose lifetime intersects its own.
void Builder::Place() {
  std::vector<int> order;
  int64_t woff = 0;
  for (size_t b = 0; b < plan_.buffers.size(); ++b) {
    Buffer& buf = plan_.buffers[b];
    if (buf.weight) {
      buf.offset = woff;
      woff += AlignUp(buf.bytes);
    } else {
      order.push_back(static_cast<int>(b));
      plan_.activation_bytes += AlignUp(buf.bytes);
    }
  }
  plan_.weight_bytes = woff;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return plan_.buffers[a].bytes > plan_.buffers[b].bytes;
  });
  std::vector<int> placed;
  int64_t arena = 0;
  for (int b : order) {
    Buffer& buf = plan_.buffers[b];
    int64_t size = AlignUp(buf.bytes);
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int o : placed) {
      const Buffer& ob = plan_.buffers[o];
      if (ob.first_step <= buf.last_step && buf.first_step <= ob.last_step)
        busy.emplace_back(ob.offset, ob.offset + AlignUp(ob.bytes));
    }
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (const auto& [lo, hi] : busy) {
      if (off + size <= lo) break;
      off = std::max(off, hi);
    }
    buf.offset = off;
    arena = std::max(arena, off + size);
    placed.push_back(b);
  }
  plan_.arena_bytes = arena;
  int64_t scratch = 0;
  for (const Step& s : plan_.steps) scratch = std::max(scratch, s.scratch_bytes);
  plan_.scratch_bytes = AlignUp(scratch);
}

Result<Plan> Builder::Build() {
  if (batch_ < 1) return Status::InvalidArgument("plan: batch must be >= 1");
  skip_.assign(g_.nodes.size(), false);
  for (const auto& o : g_.outputs) graph_outputs_.insert(o);
  // Dead nodes (no output reaches a graph output) are dropped.
  std::set<std::string> live(graph_outputs_.begin(), graph_outputs_.end());
  for (size_t k = g_.nodes.size(); k-- > 0;) {
    const Node& n = g_.nodes[k];
    bool used = false;
    for (const auto& o : n.outputs) used = used || live.count(o);
    if (!used) { skip_[k] = true; continue; }
    for (const auto& in : n.inputs) if (!in.empty()) live.insert(in);
  }
  for (size_t k = 0; k < g_.nodes.size(); ++k)
    if (!skip_[k])
      for (const auto& in : g_.nodes[k].inputs)
        if (!in.empty()) consumers_[in].push_back(k);

  for (const auto& [name, t] : g_.initializers) SetConst(name, t);
  const ValueDecl& in = g_.inputs[0];
  for (size_t k = 1; k < g_.inputs.size(); ++k)
    if (live.count(g_.inputs[k].name))
      return Status::Unsupported("plan: graphs with more than one input");
  Shape in_shape = in.shape;
  if (in_shape.empty()) return Status::InvalidArgument("plan: input has no shape");
  if (in_shape[0] == 1 && batch_ != 1) {
    // A fixed-batch graph (shape [1, ...]) still runs batches when nothing ties it to 1.
    in_shape[0] = batch_;
  } else if (in_shape[0] < 0) {
    in_shape[0] = batch_;
  } else if (in_shape[0] != batch_) {
    return Status::InvalidArgument("plan: input batch is fixed at " + std::to_string(in.shape[0]));
  }
  for (size_t d = 1; d < in_shape.size(); ++d)
    if (in_shape[d] <= 0) return Status::Unsupported("plan: input dimension " + std::to_string(d) + " is not fixed");
  plan_.input_shape = in_shape;
  plan_.input = NewBuffer(in.name, in_shape);
  plan_.buffers[plan_.input].first_step = -1;

  for (size_t k = 0; k < g_.nodes.size(); ++k) {
    if (skip_[k]) continue;
    Status st = Lower(k);
    if (!st.ok()) return st;
  }
  int end = static_cast<int>(plan_.steps.size());
  for (const auto& name : g_.outputs) {
    auto it = vals_.find(name);
    if (it == vals_.end()) return Status::InvalidArgument("plan: output '" + name + "' undefined");
    if (it->second.is_const) return Status::Unsupported("plan: output '" + name + "' is a constant");
    PlanOutput o;
    o.name = name;
    o.shape = it->second.shape;
    o.buffer = it->second.buf;
    plan_.buffers[o.buffer].last_step = end;
    plan_.outputs.push_back(std::move(o));
  }
  // Aliases: a buffer lives as long as any value viewing it; liveness above is kept per
  // buffer (AddStep records uses by buffer id), so nothing more to do.
  Place();
  return std::move(plan_);
}

}  // namespace

Result<Plan> BuildPlan(const Graph& graph, int batch, StorageType storage, const Kernels* kernels) {
  Builder b(graph, batch, storage, kernels);
  return b.Build();
}

int64_t DeviceBytes(const Graph& graph, int batch, StorageType storage, const Kernels* kernels) {
  auto p = BuildPlan(graph, batch, storage, kernels);
  return p.ok() ? p->DeviceBytes() : -1;
}

}  // namespace framemill::gpu::engine
