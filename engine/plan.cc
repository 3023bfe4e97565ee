#include "engine/plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "engine/plan_builder.h"

namespace framemill::engine {
namespace plan_detail {

const std::map<std::string, PlanBuilder::Lowering>& PlanBuilder::Lowerings() {
  using B = PlanBuilder;
  static const std::map<std::string, B::Lowering> kLowerings = [] {
    std::map<std::string, B::Lowering> m;
    auto add = [&](std::initializer_list<const char*> ops, B::Lowering l) {
      for (const char* op : ops) m[op] = l;
    };
    add({"Constant"}, &B::LowerConstant);
    add({"Conv"}, &B::LowerConv);
    add({"ConvTranspose"}, &B::LowerConvTranspose);
    add({"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"}, &B::LowerPool);
    add({"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "PRelu"}, &B::LowerBinary);
    add({"Relu", "Clip", "Sigmoid", "LeakyRelu", "Tanh", "Abs", "Neg", "Sqrt", "Exp", "Log",
         "Reciprocal", "Floor", "Ceil", "Erf", "HardSigmoid", "HardSwish"},
        &B::LowerUnary);
    add({"BatchNormalization"}, &B::LowerBatchNorm);
    add({"MatMul"}, &B::LowerMatMul);
    add({"Gemm"}, &B::LowerGemm);
    add({"Resize"}, &B::LowerResize);
    add({"Pad"}, &B::LowerPad);
    add({"Concat"}, &B::LowerConcat);
    add({"Transpose"}, &B::LowerTranspose);
    add({"Slice"}, &B::LowerSlice);
    add({"Gather"}, &B::LowerGather);
    add({"Split"}, &B::LowerSplit);
    add({"Softmax", "LogSoftmax"}, &B::LowerSoftmax);
    add({"ArgMax"}, &B::LowerArgMax);
    add({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Cast", "Shape"},
        &B::LowerReshapeLike);
    return m;
  }();
  return kLowerings;
}

Status PlanBuilder::Lower(size_t i) {
  const Node& n = g_.nodes[i];
  const auto& table = Lowerings();
  auto it = table.find(n.op);
  if (it != table.end()) return (this->*(it->second))(i);
  if (n.op.rfind("Reduce", 0) == 0) return LowerReduce(i);
  return Unsup(n, "no lowering");
}

Status PlanBuilder::LowerConstant(size_t i) {
  const Node& n = g_.nodes[i];
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

Status PlanBuilder::LowerSoftmax(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  if (x.is_const) return Unsup(n, "constant input");
  const int64_t axis = AxisOf(n, 1, x.shape.size());
  SoftmaxParams p;  // opset 11: the input is coerced to 2-D at `axis`
  p.outer = Prod(x.shape, 0, axis);
  p.axis = Prod(x.shape, axis);
  p.inner = 1;
  p.log = n.op == "LogSoftmax";
  return Emit(StepKind::kSoftmax, {x.buf}, n, x.shape, p);
}

Status PlanBuilder::LowerArgMax(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  if (x.is_const) return Unsup(n, "constant input");
  const int64_t axis = AxisOf(n, 0, x.shape.size());
  if (n.AttrInt("select_last_index", 0)) return Unsup(n, "select_last_index");
  ArgMaxParams p;
  p.outer = Prod(x.shape, 0, axis);
  p.axis = x.shape[axis];
  p.inner = Prod(x.shape, axis + 1);
  Shape out = x.shape;
  if (n.AttrInt("keepdims", 1)) out[axis] = 1; else out.erase(out.begin() + axis);
  return Emit(StepKind::kArgMax, {x.buf}, n, out, p);
}

std::set<std::string> PlanBuilder::MarkLive() {
  skip_.assign(g_.nodes.size(), false);
  for (const auto& o : g_.outputs) graph_outputs_.insert(o);
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
  return live;
}

// Every input an output depends on gets a buffer. A batch dimension of -1 (or 1, where
// nothing ties the graph to one image) becomes the plan's batch; the rest must be fixed.
Status PlanBuilder::PlanInputs(const std::set<std::string>& live) {
  for (size_t k = 0; k < g_.inputs.size(); ++k) {
    const ValueDecl& in = g_.inputs[k];
    if (k > 0 && !live.count(in.name)) continue;  // the first is planned even when unused
    Shape shape = in.shape;
    if (shape.empty()) return Status::InvalidArgument("plan: input '" + in.name + "' has no shape");
    if (shape[0] < 0 || (shape[0] == 1 && batch_ != 1)) {
      shape[0] = batch_;
    } else if (shape[0] != batch_) {
      return Status::InvalidArgument("plan: input '" + in.name + "' batch is fixed at " +
                                     std::to_string(in.shape[0]));
    }
    for (size_t d = 1; d < shape.size(); ++d)
      if (shape[d] <= 0)
        return Status::Unsupported("plan: input '" + in.name + "' dimension " + std::to_string(d) +
                                   " is not fixed");
    PlanInput pi;
    pi.name = in.name;
    pi.shape = shape;
    pi.buffer = NewBuffer(in.name, shape);
    plan_.buffers[pi.buffer].first_step = -1;
    plan_.inputs.push_back(std::move(pi));
  }
  return Status::OK();
}

Status PlanBuilder::PlanOutputs() {
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
  return Status::OK();
}

Result<Plan> PlanBuilder::Build() {
  if (batch_ < 1) return Status::InvalidArgument("plan: batch must be >= 1");
  const std::set<std::string> live = MarkLive();
  for (const auto& [name, t] : g_.initializers) SetConst(name, t);
  if (g_.inputs.empty()) return Status::InvalidArgument("plan: the graph has no input");
  FM_RETURN_IF_ERROR(PlanInputs(live));
  for (size_t k = 0; k < g_.nodes.size(); ++k) {
    if (skip_[k]) continue;
    Status st = Lower(k);
    if (!st.ok()) return st;
  }
  FM_RETURN_IF_ERROR(PlanOutputs());
  // Aliases: a buffer lives as long as any value viewing it; liveness above is kept per
  // buffer (AddStep records uses by buffer id), so nothing more to do.
  Place();
  return std::move(plan_);
}

}  // namespace plan_detail

Result<Plan> BuildPlan(const Graph& graph, int batch, StorageType storage, const Kernels* kernels) {
  plan_detail::PlanBuilder b(graph, batch, storage, kernels);
  return b.Build();
}

int64_t DeviceBytes(const Graph& graph, int batch, StorageType storage, const Kernels* kernels) {
  auto p = BuildPlan(graph, batch, storage, kernels);
  return p.ok() ? p->DeviceBytes() : -1;
}

}  // namespace framemill::engine
