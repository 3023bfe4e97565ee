#include "engine/opset.h"

#include <map>
#include <string>
#include <vector>

namespace framemill::engine {
namespace {

// An attribute an op takes from opset `since` until (not including) `until`.
struct AttrRule {
  const char* name;
  int64_t since = 1, until = 1000;
};

// An op's attributes, and the most inputs it takes from an opset on (ascending `since`).
struct OpRule {
  std::vector<AttrRule> attrs;
  std::vector<std::pair<int64_t, size_t>> max_inputs;  // {since, most inputs}
};

const std::vector<AttrRule> kWindow = {{"auto_pad"}, {"dilations"}, {"kernel_shape"}, {"pads"}, {"strides"}};

std::vector<AttrRule> Join(std::vector<AttrRule> a, const std::vector<AttrRule>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const std::map<std::string, OpRule>& Rules() {
  static const std::map<std::string, OpRule> kRules = [] {
    std::map<std::string, OpRule> m;
    auto one = [&](std::initializer_list<const char*> ops, OpRule r) {
      for (const char* op : ops) m[op] = r;
    };
    one({"Conv"}, {Join(kWindow, {{"group"}}), {{1, 3}}});
    one({"ConvTranspose"}, {Join(kWindow, {{"group"}, {"output_padding"}, {"output_shape"}}), {{1, 3}}});
    one({"MaxPool"}, {{{"auto_pad"}, {"kernel_shape"}, {"pads"}, {"strides"}, {"storage_order", 8},
                       {"ceil_mode", 10}, {"dilations", 10}},
                      {{1, 1}}});
    one({"AveragePool"}, {{{"auto_pad"}, {"kernel_shape"}, {"pads"}, {"strides"}, {"count_include_pad"},
                           {"ceil_mode", 10}, {"dilations", 19}},
                          {{1, 1}}});
    one({"GlobalAveragePool", "GlobalMaxPool", "Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Sqrt", "Exp", "Log",
         "Reciprocal", "Floor", "Ceil", "Erf", "HardSwish", "Identity"},
        {{}, {{1, 1}}});
    one({"Add", "Sub", "Mul", "Div", "Pow", "PRelu", "MatMul"}, {{}, {{1, 2}}});
    one({"Max", "Min"}, {{}, {{1, 1000}}});
    one({"LeakyRelu"}, {{{"alpha"}}, {{1, 1}}});
    one({"HardSigmoid"}, {{{"alpha"}, {"beta"}}, {{1, 1}}});
    one({"Clip"}, {{{"min", 1, 11}, {"max", 1, 11}}, {{1, 1}, {11, 3}}});
    one({"BatchNormalization"}, {{{"epsilon"}, {"momentum"}, {"spatial", 1, 9}, {"training_mode", 14}}, {{1, 5}}});
    one({"Gemm"}, {{{"alpha"}, {"beta"}, {"transA"}, {"transB"}}, {{1, 3}}});
    one({"Resize"}, {{{"mode"}, {"coordinate_transformation_mode", 11}, {"cubic_coeff_a", 11},
                      {"exclude_outside", 11}, {"extrapolation_value", 11}, {"nearest_mode", 11},
                      {"antialias", 18}, {"axes", 18}, {"keep_aspect_ratio_policy", 18}},
                     {{10, 2}, {11, 4}}});
    one({"Pad"}, {{{"mode"}, {"pads", 1, 11}, {"value", 1, 11}}, {{1, 1}, {11, 3}, {18, 4}}});
    one({"Concat"}, {{{"axis"}}, {{1, 1000}}});
    one({"Transpose"}, {{{"perm"}}, {{1, 1}}});
    one({"Slice"}, {{{"starts", 1, 10}, {"ends", 1, 10}, {"axes", 1, 10}}, {{1, 1}, {10, 5}}});
    one({"Gather"}, {{{"axis"}}, {{1, 2}}});
    one({"Split"}, {{{"axis"}, {"split", 1, 13}, {"num_outputs", 18}}, {{1, 1}, {13, 2}}});
    one({"Softmax", "LogSoftmax"}, {{{"axis"}}, {{1, 1}}});
    one({"ArgMax"}, {{{"axis"}, {"keepdims"}, {"select_last_index", 12}}, {{1, 1}}});
    one({"Reshape"}, {{{"allowzero", 14}}, {{5, 2}}});
    one({"Flatten"}, {{{"axis"}}, {{1, 1}}});
    one({"Squeeze", "Unsqueeze"}, {{{"axes", 1, 13}}, {{1, 1}, {13, 2}}});
    one({"Dropout"}, {{{"ratio", 1, 12}, {"seed", 12}}, {{1, 1}, {12, 3}}});
    one({"Cast"}, {{{"to"}, {"saturate", 19}}, {{1, 1}}});
    one({"Shape"}, {{{"start", 15}, {"end", 15}}, {{1, 1}}});
    one({"Constant"}, {{{"value"}, {"value_float", 12}, {"value_floats", 12}, {"value_int", 12}, {"value_ints", 12}},
                       {{1, 0}}});
    one({"ReduceSum"}, {{{"axes", 1, 13}, {"keepdims"}, {"noop_with_empty_axes", 13}}, {{1, 1}, {13, 2}}});
    one({"ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL2"},
        {{{"axes", 1, 18}, {"keepdims"}, {"noop_with_empty_axes", 18}}, {{1, 1}, {18, 2}}});
    return m;
  }();
  return kRules;
}

Status Refuse(const Node& n, const std::string& what) {
  return Status::Unsupported("node '" + n.name + "' (" + n.op + "): " + what);
}

// Attribute values the engine does not implement, and outputs it does not compute.
Status CheckValues(const Node& n) {
  auto out_used = [&](size_t k) { return n.outputs.size() > k && !n.outputs[k].empty(); };
  if (n.op == "MaxPool" && out_used(1)) return Refuse(n, "its Indices output is not computed");
  if (n.op == "BatchNormalization") {
    if (n.AttrInt("training_mode", 0) != 0 || out_used(1)) return Refuse(n, "training mode");
    if (n.AttrInt("spatial", 1) != 1) return Refuse(n, "spatial=0 (per-element statistics)");
  }
  if (n.op == "Resize") {
    if (n.AttrInt("antialias", 0) != 0) return Refuse(n, "antialias=1");
    if (n.AttrInt("exclude_outside", 0) != 0) return Refuse(n, "exclude_outside=1");
    if (n.HasAttr("axes")) return Refuse(n, "the axes attribute");
    if (n.AttrString("keep_aspect_ratio_policy", "stretch") != "stretch")
      return Refuse(n, "keep_aspect_ratio_policy " + n.AttrString("keep_aspect_ratio_policy", ""));
  }
  if (n.op == "Pad" && n.inputs.size() > 3 && !n.inputs[3].empty()) return Refuse(n, "its axes input");
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (out_used(k) && n.op != "Split" && !(n.op == "Dropout" && k == 1))
      return Refuse(n, "output " + std::to_string(k) + " is not computed");
  return Status::OK();
}

// What an op meant before the opset it took its present form, where the engine does not
// compute that: Cast's `to` was a string before 6, Dropout trained by default before 7.
Status CheckOldOpsets(const Node& n, int64_t opset) {
  if (n.op == "Cast" && opset < 6) return Refuse(n, "opset " + std::to_string(opset) + " (`to` as a string)");
  if (n.op == "Dropout" && opset < 7) return Refuse(n, "opset " + std::to_string(opset) + " (training by default)");
  return Status::OK();
}

}  // namespace

bool TakesOnlyConstant(const Node& n, size_t k) {
  static const std::map<std::string, size_t> kFrom = {
      {"Conv", 1},   {"ConvTranspose", 1}, {"BatchNormalization", 1}, {"Resize", 1}, {"Pad", 1},
      {"Clip", 1},   {"Reshape", 1},       {"Slice", 1},              {"Gather", 1}, {"Split", 1},
      {"Squeeze", 1}, {"Unsqueeze", 1},    {"Dropout", 1}};
  auto it = kFrom.find(n.op);
  if (it != kFrom.end()) return k >= it->second;
  return n.op.rfind("Reduce", 0) == 0 && k >= 1;
}

Status CheckOpset(int64_t opset) {
  if (opset < kMinOpset || opset > kMaxOpset)
    return Status::Unsupported("the graph follows ai.onnx opset " + std::to_string(opset) + "; the engine implements " +
                               std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset));
  return Status::OK();
}

Status CheckNode(const Node& n, int64_t opset) {
  const auto& rules = Rules();
  auto it = rules.find(n.op);
  if (it == rules.end()) return Refuse(n, "the op is not implemented");
  const OpRule& r = it->second;
  for (const auto& [name, value] : n.attrs.items()) {
    bool known = false;
    for (const AttrRule& a : r.attrs) known = known || (name == a.name && opset >= a.since && opset < a.until);
    if (!known) return Refuse(n, "attribute '" + name + "' at opset " + std::to_string(opset) + " is not implemented");
  }
  size_t most = 0;
  bool defined = false;
  for (const auto& [since, max] : r.max_inputs)
    if (opset >= since) { most = max; defined = true; }
  if (!defined) return Refuse(n, "the op is not defined at opset " + std::to_string(opset));
  if (n.inputs.size() > most)
    return Refuse(n, std::to_string(n.inputs.size()) + " inputs at opset " + std::to_string(opset) + " (it takes " +
                         std::to_string(most) + ")");
  FM_RETURN_IF_ERROR(CheckOldOpsets(n, opset));
  return CheckValues(n);
}

}  // namespace framemill::engine
