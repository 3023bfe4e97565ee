#include "engine/graph.h"

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/opset.h"

namespace framemill::engine {

namespace {

const std::set<std::string, std::less<>>& SupportedOps() {
  static const std::set<std::string, std::less<>> kOps = {
      "Conv", "ConvTranspose", "Relu", "Clip", "Sigmoid", "LeakyRelu", "Tanh", "HardSigmoid",
      "HardSwish", "Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "PRelu", "Sqrt", "Abs", "Neg",
      "Exp", "Log", "Reciprocal", "Floor", "Ceil", "Erf", "MaxPool", "AveragePool",
      "GlobalAveragePool", "GlobalMaxPool", "Pad", "Resize", "Reshape", "Transpose",
      "Concat", "Split", "Squeeze", "Unsqueeze", "Flatten", "MatMul", "Gemm", "ReduceMean",
      "ReduceSum", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL2", "Softmax",
      "LogSoftmax", "Constant", "Identity", "Dropout", "Shape", "Gather", "Cast", "ArgMax",
      "Slice", "BatchNormalization"};
  return kOps;
}

Result<int64_t> DtypeSize(const std::string& dtype) {
  if (dtype == "float32" || dtype == "int32") return int64_t{4};
  if (dtype == "int64") return int64_t{8};
  if (dtype == "bool" || dtype == "uint8" || dtype == "int8") return int64_t{1};
  return Status::Unsupported("fmg: dtype " + dtype);
}

// Decodes `count` little-endian elements of `dtype` from `src`.
Result<HostTensor> Decode(const std::string& dtype, std::vector<int64_t> shape, const char* src,
                          int64_t count) {
  HostTensor t;
  t.shape = std::move(shape);
  if (dtype == "float32") {
    t.f.resize(count);
    std::memcpy(t.f.data(), src, count * 4);
  } else {
    t.is_int = true;
    t.i.resize(count);
    for (int64_t k = 0; k < count; ++k) {
      if (dtype == "int64") {
        std::memcpy(&t.i[k], src + 8 * k, 8);
      } else if (dtype == "int32") {
        int32_t v;
        std::memcpy(&v, src + 4 * k, 4);
        t.i[k] = v;
      } else if (dtype == "int8") {
        t.i[k] = static_cast<int8_t>(src[k]);
      } else {
        t.i[k] = static_cast<uint8_t>(src[k]);
      }
    }
  }
  return t;
}

Result<int64_t> ShapeCount(const nlohmann::json& shape, std::vector<int64_t>* out) {
  if (!shape.is_array()) return Status::Corruption("fmg: shape is not an array");
  int64_t n = 1;
  for (const auto& d : shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return Status::Corruption("fmg: bad dimension in shape " + shape.dump());
    out->push_back(d.get<int64_t>());
    n *= out->back();
  }
  return n;
}

}  // namespace

int64_t HostTensor::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Node::AttrInt(std::string_view key, int64_t dflt) const {
  auto it = attrs.find(std::string(key));
  if (it == attrs.end() || !it->is_number()) return dflt;
  return it->get<int64_t>();
}
float Node::AttrFloat(std::string_view key, float dflt) const {
  auto it = attrs.find(std::string(key));
  if (it == attrs.end() || !it->is_number()) return dflt;
  return it->get<float>();
}
std::string Node::AttrString(std::string_view key, std::string_view dflt) const {
  auto it = attrs.find(std::string(key));
  if (it == attrs.end() || !it->is_string()) return std::string(dflt);
  return it->get<std::string>();
}
namespace {
// A list attribute's numbers (one number counts as a list of one; empty when absent).
template <class T>
std::vector<T> AttrList(const nlohmann::json& attrs, std::string_view key) {
  auto it = attrs.find(std::string(key));
  std::vector<T> v;
  if (it == attrs.end()) return v;
  if (it->is_number()) return {it->get<T>()};
  if (!it->is_array()) return v;
  for (const auto& e : *it)
    if (e.is_number()) v.push_back(e.get<T>());
  return v;
}
}  // namespace
std::vector<int64_t> Node::AttrInts(std::string_view key) const { return AttrList<int64_t>(attrs, key); }
std::vector<float> Node::AttrFloats(std::string_view key) const { return AttrList<float>(attrs, key); }

bool IsSupportedOp(std::string_view op) { return SupportedOps().count(op) > 0; }

namespace {

// One initializer: its bytes in the .bin, decoded.
Status ParseInitializer(const nlohmann::json& init, std::string_view bin, Graph* g) {
  std::string name = init.at("name").get<std::string>();
  std::string dtype = init.at("dtype").get<std::string>();
  auto esize = DtypeSize(dtype);
  if (!esize.ok()) return Status::Unsupported("fmg: initializer " + name + ": dtype " + dtype);
  std::vector<int64_t> shape;
  auto count = ShapeCount(init.at("shape"), &shape);
  if (!count.ok()) return Status::Corruption("fmg: initializer " + name + ": " + count.status().message());
  int64_t offset = init.at("offset").get<int64_t>();
  int64_t bytes = init.at("bytes").get<int64_t>();
  if (bytes != *count * *esize)
    return Status::Corruption("fmg: initializer " + name + ": " + std::to_string(bytes) +
                              " bytes for shape " + init.at("shape").dump() + " " + dtype);
  if (offset < 0 || offset + bytes > static_cast<int64_t>(bin.size()))
    return Status::Corruption("fmg: initializer " + name + " lies outside the .bin (" +
                              std::to_string(offset) + "+" + std::to_string(bytes) + " > " +
                              std::to_string(bin.size()) + ")");
  auto t = Decode(dtype, std::move(shape), bin.data() + offset, *count);
  if (!t.ok()) return t.status();
  g->initializers[name] = std::move(t).value();
  return Status::OK();
}

// One node, whose inputs must be defined before it (topological order).
Status ParseNode(const nlohmann::json& jn, std::set<std::string>* defined, Graph* g) {
  Node n;
  n.op = jn.at("op").get<std::string>();
  n.name = jn.value("name", "");
  for (const auto& x : jn.at("inputs")) n.inputs.push_back(x.get<std::string>());
  for (const auto& x : jn.at("outputs")) n.outputs.push_back(x.get<std::string>());
  if (jn.contains("attrs")) n.attrs = jn["attrs"];
  if (!n.attrs.is_object()) return Status::Corruption("fmg: node " + n.name + ": attrs");
  if (!IsSupportedOp(n.op))
    return Status::Unsupported("fmg: op " + n.op + " (node '" + n.name + "') is not supported");
  for (const auto& in : n.inputs)
    if (!in.empty() && !defined->count(in))
      return Status::InvalidArgument("fmg: node '" + n.name + "' (" + n.op + ") uses '" + in +
                                     "' before it is defined");
  if (n.outputs.empty())
    return Status::InvalidArgument("fmg: node '" + n.name + "' has no outputs");
  for (const auto& out : n.outputs) defined->insert(out);
  g->nodes.push_back(std::move(n));
  return Status::OK();
}

// The graph's parts; a missing key throws (nlohmann::json::exception).
Status ParseParts(const nlohmann::json& j, std::string_view bin, Graph* g) {
  std::set<std::string> defined;
  for (const auto& in : j["inputs"]) {
    ValueDecl d;
    d.name = in.at("name").get<std::string>();
    for (const auto& x : in.at("shape")) d.shape.push_back(x.get<int64_t>());
    d.dtype = in.value("dtype", "float32");
    defined.insert(d.name);
    g->inputs.push_back(std::move(d));
  }
  for (const auto& out : j["outputs"]) {
    g->outputs.push_back(out.at("name").get<std::string>());
    if (out.contains("dtype")) g->output_dtypes[g->outputs.back()] = out.at("dtype").get<std::string>();
  }
  for (const auto& init : j["initializers"]) {
    FM_RETURN_IF_ERROR(ParseInitializer(init, bin, g));
    defined.insert(init.at("name").get<std::string>());
  }
  for (const auto& jn : j["nodes"]) FM_RETURN_IF_ERROR(ParseNode(jn, &defined, g));
  if (g->outputs.empty()) return Status::InvalidArgument("fmg: a graph needs outputs");
  if (g->inputs.empty()) return Status::Unsupported("fmg: the graph has no inputs (the engine plans from one)");
  for (const auto& out : g->outputs)
    if (!defined.count(out)) return Status::InvalidArgument("fmg: output '" + out + "' is never defined");
  return Status::OK();
}

}  // namespace

Result<Graph> ParseGraph(std::string_view json_text, std::string_view bin) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Corruption("fmg: malformed json");
  if (j.value("format", "") != "framemill-graph")
    return Status::Corruption("fmg: format is not framemill-graph");
  if (j.value("version", 0) == 1)
    return Status::Unsupported("fmg: a version 1 graph, written before the engine followed ONNX opsets: "
                               "`framemill models fetch` converts it again");
  if (j.value("version", 0) != 2)
    return Status::Unsupported("fmg: version " + j.value("version", nlohmann::json()).dump());
  if (!j.contains("opset") || !j["opset"].is_number_integer())
    return Status::Corruption("fmg: no ai.onnx opset (\"opset\")");
  for (const char* key : {"inputs", "outputs", "initializers", "nodes"})
    if (!j.contains(key) || !j[key].is_array())
      return Status::Corruption(std::string("fmg: missing array '") + key + "'");
  Graph g;
  g.opset = j["opset"].get<int64_t>();
  FM_RETURN_IF_ERROR(CheckOpset(g.opset));
  try {
    FM_RETURN_IF_ERROR(ParseParts(j, bin, &g));
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(std::string("fmg: ") + e.what());
  }
  return g;
}

namespace {
Result<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::NotFound("fmg: cannot open " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return Status::IOError("fmg: cannot read " + path);
  return ss.str();
}
}  // namespace

Result<Graph> LoadGraph(const std::string& json_path) {
  std::string bin_path = json_path;
  if (bin_path.size() >= 5 && bin_path.compare(bin_path.size() - 5, 5, ".json") == 0)
    bin_path.replace(bin_path.size() - 5, 5, ".bin");
  else
    bin_path += ".bin";
  auto text = ReadFile(json_path);
  if (!text.ok()) return text.status();
  auto bin = ReadFile(bin_path);
  if (!bin.ok()) return bin.status();
  return ParseGraph(*text, *bin);
}

}  // namespace framemill::engine
