#include "engine/plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "engine/opset.h"
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
  FM_RETURN_IF_ERROR(CheckNode(n, g_.opset));
  bool integers = false;
  FM_RETURN_IF_ERROR(CheckIntegerInputs(n, &integers));
  const auto& table = Lowerings();
  auto it = table.find(n.op);
  Status st = it != table.end() ? (this->*(it->second))(i)
              : n.op.rfind("Reduce", 0) == 0 ? LowerReduce(i)
                                              : Unsup(n, "no lowering");
  if (st.ok() && integers) MarkIntegerOutputs(n);
  return st;
}

namespace {
// The ops that keep an integer-valued tensor's values exact in float (below 2^24): they move,
// select, add or multiply its elements.
bool KeepsIntegers(const std::string& op) {
  static const std::set<std::string> kOps = {
      "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Transpose", "Slice", "Gather", "Concat",
      "Split", "Cast", "Add", "Sub", "Mul", "Max", "Min", "Neg", "Abs", "ReduceSum", "ReduceMax", "ReduceMin"};
  return kOps.count(op) > 0;
}
}  // namespace

Status PlanBuilder::CheckIntegerInputs(const Node& n, bool* any) {
  *any = false;
  for (const auto& in : n.inputs) {
    if (in.empty()) continue;
    auto it = vals_.find(in);
    if (it == vals_.end() || it->second.is_const || !it->second.int_valued) continue;
    if (!KeepsIntegers(n.op))
      return Unsup(n, "'" + in + "' holds integers (indices), which this op would compute as floats");
    *any = true;
  }
  return Status::OK();
}

void PlanBuilder::MarkIntegerOutputs(const Node& n) {
  // A Cast to a float type makes them floats again.
  if (n.op == "Cast" && (n.AttrInt("to", 1) == 1)) return;
  for (const auto& out : n.outputs) {
    auto it = vals_.find(out);
    if (it != vals_.end() && !it->second.is_const) it->second.int_valued = true;
  }
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
  const int64_t r = static_cast<int64_t>(x.shape.size());
  SoftmaxParams p;
  p.log = n.op == "LogSoftmax";
  if (g_.opset >= 13) {  // over one axis (default the last)
    const int64_t axis = AxisOf(n, -1, x.shape.size());
    if (axis < 0 || axis >= r) return Bad(n, "axis out of range");
    p.outer = Prod(x.shape, 0, axis);
    p.axis = x.shape[axis];
    p.inner = Prod(x.shape, axis + 1);
  } else {  // before 13: the input coerced to 2-D at `axis` (default 1)
    const int64_t axis = AxisOf(n, 1, x.shape.size());
    if (axis < 0 || axis > r) return Bad(n, "axis out of range");
    p.outer = Prod(x.shape, 0, axis);
    p.axis = Prod(x.shape, axis);
    p.inner = 1;
  }
  return Emit(StepKind::kSoftmax, {x.buf}, n, x.shape, p);
}

Status PlanBuilder::LowerArgMax(size_t i) {
  const Node& n = g_.nodes[i];
  const Val& x = V(n.inputs[0]);
  if (x.is_const) return Unsup(n, "constant input");
  const int64_t axis = AxisOf(n, 0, x.shape.size());
  if (axis < 0 || axis >= static_cast<int64_t>(x.shape.size())) return Bad(n, "axis out of range");
  ArgMaxParams p;
  p.outer = Prod(x.shape, 0, axis);
  p.axis = x.shape[axis];
  p.inner = Prod(x.shape, axis + 1);
  Shape out = x.shape;
  if (n.AttrInt("keepdims", 1)) out[axis] = 1; else out.erase(out.begin() + axis);
  if (!n.AttrInt("select_last_index", 0)) {
    FM_RETURN_IF_ERROR(Emit(StepKind::kArgMax, {x.buf}, n, out, p));
    V(n.outputs[0]).int_valued = true;
    return Status::OK();
  }
  // The last maximum: the first one of the axis reversed, counted back from its end.
  const int64_t r = static_cast<int64_t>(x.shape.size());
  Shape starts(r, 0), steps(r, 1);
  starts[axis] = x.shape[axis] - 1;
  steps[axis] = -1;
  const std::string reversed = n.outputs[0] + "#reversed", first = n.outputs[0] + "#first";
  FM_RETURN_IF_ERROR(SliceStep(n, n.inputs[0], reversed, starts, steps, x.shape));
  FM_RETURN_IF_ERROR(Emit(StepKind::kArgMax, {V(reversed).buf}, n, out, p, first));
  UnaryParams back;
  back.op = UnaryOp::kAffine;
  back.count = Prod(out);
  back.alpha = -1.0f;
  back.beta = static_cast<float>(x.shape[axis] - 1);
  FM_RETURN_IF_ERROR(Emit(StepKind::kUnary, {V(first).buf}, n, out, back, n.outputs[0]));
  V(n.outputs[0]).int_valued = true;
  return Status::OK();
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

namespace {
// The engine computes in float32: a graph whose inputs or outputs are of another float type
// would be computed at another precision than it asks; integers and booleans are taken as
// exact floats where they are computed (ArgMax) and bound as constants where they are given.
Status CheckFloatType(const std::string& what, const std::string& name, const std::string& dtype, bool ints_ok) {
  if (dtype == "float32") return Status::OK();
  const bool integer = dtype == "int64" || dtype == "int32" || dtype == "int16" || dtype == "int8" ||
                       dtype == "uint8" || dtype == "uint16" || dtype == "uint32" || dtype == "uint64" || dtype == "bool";
  if (integer && ints_ok) return Status::OK();
  if (integer)
    return Status::Unsupported("plan: " + what + " '" + name + "' is " + dtype +
                               ": the engine takes float32 inputs (`framemill infer --inputs` binds integer inputs "
                               "as constants)");
  return Status::Unsupported("plan: " + what + " '" + name + "' is " + dtype + ": the engine computes in float32");
}
}  // namespace

// Every input an output depends on gets a buffer. A batch dimension of -1 becomes the plan's
// batch; so does one of the graph's natural batch (NaturalBatch) when the plan's batch is
// another; at the natural batch every declared dimension stands.
Status PlanBuilder::PlanInputs(const std::set<std::string>& live) {
  const int natural = NaturalBatch(g_);
  for (size_t k = 0; k < g_.inputs.size(); ++k) {
    const ValueDecl& in = g_.inputs[k];
    if (k > 0 && !live.count(in.name)) continue;  // the first is planned even when unused
    FM_RETURN_IF_ERROR(CheckFloatType("input", in.name, in.dtype, false));
    Shape shape = in.shape;
    if (!shape.empty() && (shape[0] < 0 || (shape[0] == natural && batch_ != natural))) {
      shape[0] = batch_;
    } else if (!shape.empty() && shape[0] != batch_ && batch_ != natural) {
      return Status::InvalidArgument("plan: input '" + in.name + "' batch is fixed at " +
                                     std::to_string(in.shape[0]));
    } else if (shape.empty() && batch_ != natural) {
      return Status::InvalidArgument("plan: input '" + in.name + "' is a scalar: no batch of " +
                                     std::to_string(batch_));
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

Status PlanBuilder::ConstantOutput(const std::string& name) {
  const int w = DeviceOf(name);
  const Shape shape = V(name).shape;
  Step s;
  s.kind = StepKind::kCopy;
  s.inputs = {w};
  s.output = NewBuffer(name, shape);
  s.params = CopyParams{Prod(shape)};
  Node n;
  n.op = "Constant";
  n.name = name;
  AddStep(std::move(s), n);
  return Status::OK();
}

Status PlanBuilder::PlanOutputs() {
  for (const auto& name : g_.outputs) {
    auto it = vals_.find(name);
    if (it == vals_.end()) return Status::InvalidArgument("plan: output '" + name + "' undefined");
    auto dt = g_.output_dtypes.find(name);
    FM_RETURN_IF_ERROR(CheckFloatType("output", name, dt == g_.output_dtypes.end() ? "float32" : dt->second, true));
    if (it->second.is_const) FM_RETURN_IF_ERROR(ConstantOutput(name));
  }
  int end = static_cast<int>(plan_.steps.size());
  for (const auto& name : g_.outputs) {
    auto it = vals_.find(name);
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

int NaturalBatch(const Graph& graph) {
  if (graph.inputs.empty() || graph.inputs[0].shape.empty() || graph.inputs[0].shape[0] <= 0) return 1;
  return static_cast<int>(graph.inputs[0].shape[0]);
}

int64_t DeviceBytes(const Graph& graph, int batch, StorageType storage, const Kernels* kernels) {
  auto p = BuildPlan(graph, batch, storage, kernels);
  return p.ok() ? p->DeviceBytes() : -1;
}

}  // namespace framemill::engine
