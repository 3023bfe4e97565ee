#include "engine/onnx_import.h"

#include <algorithm>
#include <iterator>
#include <cctype>
#include <cstring>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include "engine/opset.h"
#include "engine/tensor.h"

namespace framemill::engine {

namespace {

constexpr size_t kAlign = 64;  // as fmg.py: each initializer at an offset aligned to 64 bytes

// A tensor's elements as bytes in an fmg dtype, little-endian (x86 and arm64 both are).
struct Elements {
  std::string dtype;
  std::string bytes;
};

template <typename T, typename Field>
std::string BytesOf(const Field& field) {
  std::string out(static_cast<size_t>(field.size()) * sizeof(T), '\0');
  for (int k = 0; k < field.size(); ++k) {
    const T v = static_cast<T>(field.Get(k));
    std::memcpy(out.data() + k * sizeof(T), &v, sizeof(T));
  }
  return out;
}

// raw_data of `from` (n elements of F) as n elements of float.
template <typename F>
std::string FloatsFromRaw(const std::string& raw, size_t n) {
  std::string out(n * 4, '\0');
  for (size_t k = 0; k < n; ++k) {
    F v;
    std::memcpy(&v, raw.data() + k * sizeof(F), sizeof(F));
    const float f = static_cast<float>(v);
    std::memcpy(out.data() + k * 4, &f, 4);
  }
  return out;
}

std::string HalvesToFloatBytes(const std::vector<uint16_t>& h) {
  std::string out(h.size() * 4, '\0');
  for (size_t k = 0; k < h.size(); ++k) {
    const float f = HalfToFloat(h[k]);
    std::memcpy(out.data() + k * 4, &f, 4);
  }
  return out;
}

// ONNX's element type `t` (TensorProto.DataType) as numpy names it; 0 (undefined) as float32.
std::string TypeName(int t) {
  static const char* const kNames[] = {"float32", "float32", "uint8",     "int8",       "uint16",  "int16",
                                       "int32",   "int64",   "str",       "bool",       "float16", "float64",
                                       "uint32",  "uint64",  "complex64", "complex128", "bfloat16"};
  return t >= 0 && t < static_cast<int>(std::size(kNames)) ? kNames[t] : "type " + std::to_string(t);
}

Result<Elements> ElementsOf(const onnx::TensorProto& t, int64_t count) {
  using T = onnx::TensorProto;
  if (t.data_location() == T::EXTERNAL)
    return Status::Unsupported("onnx: tensor '" + t.name() + "' keeps its data in an external file");
  const bool raw = t.has_raw_data();
  const std::string& r = t.raw_data();
  auto sized = [&](Elements e, size_t esize) -> Result<Elements> {
    if (e.bytes.size() != static_cast<size_t>(count) * esize)
      return Status::Corruption("onnx: tensor '" + t.name() + "' holds " + std::to_string(e.bytes.size()) +
                                " bytes for " + std::to_string(count) + " elements");
    return e;
  };
  switch (t.data_type()) {
    case T::FLOAT:
      return sized({"float32", raw ? r : BytesOf<float>(t.float_data())}, 4);
    case T::DOUBLE:
      if (raw && r.size() != static_cast<size_t>(count) * 8) break;
      return sized({"float32", raw ? FloatsFromRaw<double>(r, count) : BytesOf<float>(t.double_data())}, 4);
    case T::FLOAT16: {
      std::vector<uint16_t> h(static_cast<size_t>(count));
      if (raw) {
        if (r.size() != h.size() * 2) break;
        std::memcpy(h.data(), r.data(), r.size());
      } else {
        if (t.int32_data_size() != count) break;
        for (int64_t k = 0; k < count; ++k) h[k] = static_cast<uint16_t>(t.int32_data(k));
      }
      return sized({"float32", HalvesToFloatBytes(h)}, 4);
    }
    case T::INT64:
      return sized({"int64", raw ? r : BytesOf<int64_t>(t.int64_data())}, 8);
    case T::INT32:
      return sized({"int32", raw ? r : BytesOf<int32_t>(t.int32_data())}, 4);
    case T::INT8:
      return sized({"int8", raw ? r : BytesOf<int8_t>(t.int32_data())}, 1);
    case T::UINT8:
      return sized({"uint8", raw ? r : BytesOf<uint8_t>(t.int32_data())}, 1);
    case T::BOOL:
      return sized({"bool", raw ? r : BytesOf<uint8_t>(t.int32_data())}, 1);
    default:
      return Status::Unsupported("onnx: tensor '" + t.name() + "' is " + TypeName(t.data_type()) +
                                 ", which the engine does not take");
  }
  return Status::Corruption("onnx: tensor '" + t.name() + "' holds the wrong number of bytes");
}

Result<int64_t> CountOf(const onnx::TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && n > (int64_t{1} << 40) / d))
      return Status::Corruption("onnx: tensor '" + t.name() + "' has a bad shape");
    n *= d;
  }
  return n;
}

// A Constant node's value, as fmg.py writes it: {"dtype", "shape", "data"}.
Result<nlohmann::json> TensorJson(const onnx::TensorProto& t) {
  auto n = CountOf(t);
  if (!n.ok()) return n.status();
  auto e = ElementsOf(t, *n);
  if (!e.ok()) return e.status();
  nlohmann::json data = nlohmann::json::array();
  const char* b = e->bytes.data();
  for (int64_t k = 0; k < *n; ++k) {
    if (e->dtype == "float32") { float v; std::memcpy(&v, b + 4 * k, 4); data.push_back(v); }
    else if (e->dtype == "int64") { int64_t v; std::memcpy(&v, b + 8 * k, 8); data.push_back(v); }
    else if (e->dtype == "int32") { int32_t v; std::memcpy(&v, b + 4 * k, 4); data.push_back(v); }
    else if (e->dtype == "int8") { data.push_back(static_cast<int8_t>(b[k])); }
    else { data.push_back(static_cast<uint8_t>(b[k])); }
  }
  return nlohmann::json{{"dtype", e->dtype == "float32" ? "float32" : "int64"},
                        {"shape", std::vector<int64_t>(t.dims().begin(), t.dims().end())},
                        {"data", std::move(data)}};
}

Result<nlohmann::json> AttrJson(const onnx::AttributeProto& a, const std::string& node) {
  using A = onnx::AttributeProto;
  switch (a.type()) {
    case A::FLOAT: return nlohmann::json(a.f());
    case A::INT: return nlohmann::json(a.i());
    case A::STRING: return nlohmann::json(a.s());
    case A::FLOATS: return nlohmann::json(std::vector<float>(a.floats().begin(), a.floats().end()));
    case A::INTS: return nlohmann::json(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case A::STRINGS: return nlohmann::json(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case A::TENSOR: return TensorJson(a.t());
    default:
      return Status::Unsupported("onnx: node '" + node + "' attribute '" + a.name() + "' is of type " +
                                 std::to_string(a.type()) + " (a subgraph or sparse tensor)");
  }
}

// A graph input's or output's element type as numpy names it (fmg.py's _dtype_of).
std::string DtypeOf(const onnx::ValueInfoProto& v) { return TypeName(v.type().tensor_type().elem_type()); }

std::vector<int64_t> ShapeOf(const onnx::ValueInfoProto& v) {
  std::vector<int64_t> dims;
  for (const auto& d : v.type().tensor_type().shape().dim())
    dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  return dims;
}

// The ai.onnx opset version `model` imports (0 when none).
int64_t OnnxOpset(const onnx::ModelProto& model) {
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 0;
}

// The fmg document and its .bin for `g`: what fmg.py's dump() writes.
Status ToFmg(const onnx::GraphProto& g, int64_t opset, nlohmann::json* doc, std::string* bin) {
  nlohmann::json inits = nlohmann::json::array();
  std::set<std::string> init_names;
  for (const auto& t : g.initializer()) {
    auto n = CountOf(t);
    if (!n.ok()) return n.status();
    auto e = ElementsOf(t, *n);
    if (!e.ok()) return e.status();
    bin->resize((bin->size() + kAlign - 1) / kAlign * kAlign, '\0');
    inits.push_back({{"name", t.name()}, {"dtype", e->dtype},
                     {"shape", std::vector<int64_t>(t.dims().begin(), t.dims().end())},
                     {"offset", bin->size()}, {"bytes", e->bytes.size()}});
    *bin += e->bytes;
    init_names.insert(t.name());
  }
  if (g.sparse_initializer_size() > 0) return Status::Unsupported("onnx: sparse initializers");
  nlohmann::json inputs = nlohmann::json::array(), outputs = nlohmann::json::array(),
                 nodes = nlohmann::json::array();
  auto tensor = [](const onnx::ValueInfoProto& v, const char* what) -> Status {
    if (v.type().has_tensor_type()) return Status::OK();
    return Status::Unsupported(std::string("onnx: ") + what + " '" + v.name() +
                               "' is not a tensor (a sequence, map or optional)");
  };
  for (const auto& i : g.input()) {
    if (init_names.count(i.name())) continue;
    FM_RETURN_IF_ERROR(tensor(i, "input"));
    inputs.push_back({{"name", i.name()}, {"shape", ShapeOf(i)}, {"dtype", DtypeOf(i)}});
  }
  for (const auto& o : g.output()) {
    FM_RETURN_IF_ERROR(tensor(o, "output"));
    outputs.push_back({{"name", o.name()}, {"dtype", DtypeOf(o)}});
  }
  for (const auto& n : g.node()) {
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      return Status::Unsupported("onnx: node '" + n.name() + "' is of domain " + n.domain());
    nlohmann::json attrs = nlohmann::json::object();
    for (const auto& a : n.attribute()) {
      auto j = AttrJson(a, n.name());
      if (!j.ok()) return j.status();
      attrs[a.name()] = std::move(*j);
    }
    nodes.push_back({{"op", n.op_type()}, {"name", n.name()},
                     {"inputs", std::vector<std::string>(n.input().begin(), n.input().end())},
                     {"outputs", std::vector<std::string>(n.output().begin(), n.output().end())},
                     {"attrs", std::move(attrs)}});
  }
  *doc = {{"format", "framemill-graph"}, {"version", 2}, {"opset", opset}, {"inputs", std::move(inputs)},
          {"outputs", std::move(outputs)}, {"initializers", std::move(inits)}, {"nodes", std::move(nodes)}};
  return Status::OK();
}

}  // namespace

bool IsOnnxPath(const std::string& path) {
  if (path.size() < 5) return false;
  std::string ext = path.substr(path.size() - 5);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".onnx";
}

Result<Graph> LoadOnnxGraph(const std::string& onnx_path) {
  std::ifstream f(onnx_path, std::ios::binary);
  if (!f) return Status::NotFound("onnx: cannot open " + onnx_path);
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&f)) {
    if (f.bad()) return Status::IOError("onnx: cannot read " + onnx_path);
    return Status::Corruption("onnx: " + onnx_path + " is not an ONNX model");
  }
  if (!model.has_graph() || model.graph().node_size() == 0)
    return Status::Corruption("onnx: " + onnx_path + " holds no graph");
  const int64_t opset = OnnxOpset(model);
  if (opset == 0) return Status::Unsupported("onnx: " + onnx_path + " imports no ai.onnx opset");
  nlohmann::json doc;
  std::string bin;
  FM_RETURN_IF_ERROR(ToFmg(model.graph(), opset, &doc, &bin));
  return ParseGraph(doc.dump(), bin);  // its errors name the op or value, as for an fmg
}

Result<OnnxTensor> ReadOnnxTensor(const std::string& pb_path) {
  std::ifstream f(pb_path, std::ios::binary);
  if (!f) return Status::NotFound("onnx: cannot open " + pb_path);
  onnx::TensorProto t;
  if (!t.ParseFromIstream(&f)) {
    if (f.bad()) return Status::IOError("onnx: cannot read " + pb_path);
    return Status::Corruption("onnx: " + pb_path + " is not an ONNX TensorProto");
  }
  OnnxTensor out;
  out.name = t.name();
  out.dtype = TypeName(t.data_type());
  auto n = CountOf(t);
  if (!n.ok()) return n.status();
  auto e = ElementsOf(t, *n);
  if (!e.ok()) return e.status();
  out.value.shape.assign(t.dims().begin(), t.dims().end());
  out.value.is_int = e->dtype != "float32";  // also when it holds no element
  const char* b = e->bytes.data();
  for (int64_t k = 0; k < *n; ++k) {
    if (e->dtype == "float32") { float v; std::memcpy(&v, b + 4 * k, 4); out.value.f.push_back(v); continue; }
    if (e->dtype == "int64") { int64_t v; std::memcpy(&v, b + 8 * k, 8); out.value.i.push_back(v); }
    else if (e->dtype == "int32") { int32_t v; std::memcpy(&v, b + 4 * k, 4); out.value.i.push_back(v); }
    else if (e->dtype == "int8") out.value.i.push_back(static_cast<int8_t>(b[k]));
    else out.value.i.push_back(static_cast<uint8_t>(b[k]));
  }
  return out;
}

namespace {
// Whether every use of value `name` is an input the engine takes only as a constant.
bool FeedsOnlyConstantInputs(const Graph& g, const std::string& name) {
  bool used = false;
  for (const Node& n : g.nodes)
    for (size_t k = 0; k < n.inputs.size(); ++k)
      if (n.inputs[k] == name) {
        if (!TakesOnlyConstant(n, k)) return false;
        used = true;
      }
  return used;
}
}  // namespace

Result<std::map<std::string, Tensor>> BindInputs(Graph* graph, const std::vector<OnnxTensor>& inputs) {
  if (inputs.size() != graph->inputs.size())
    return Status::InvalidArgument("the graph takes " + std::to_string(graph->inputs.size()) + " input(s), " +
                                   std::to_string(inputs.size()) + " given");
  std::map<std::string, Tensor> floats;
  std::vector<ValueDecl> kept;
  for (size_t k = 0; k < inputs.size(); ++k) {
    ValueDecl decl = graph->inputs[k];
    const OnnxTensor& in = inputs[k];
    if (in.dtype != decl.dtype)
      return Status::InvalidArgument("input " + std::to_string(k) + " ('" + decl.name + "') is " + decl.dtype +
                                     ", the data given is " + in.dtype);
    if (decl.shape.size() != in.value.shape.size())
      return Status::InvalidArgument("input '" + decl.name + "' has rank " + std::to_string(decl.shape.size()) +
                                     ", the data given " + std::to_string(in.value.shape.size()));
    for (size_t d = 0; d < decl.shape.size(); ++d)
      if (decl.shape[d] >= 0 && decl.shape[d] != in.value.shape[d])
        return Status::InvalidArgument("input '" + decl.name + "' dimension " + std::to_string(d) + " is " +
                                       std::to_string(decl.shape[d]) + ", the data's " +
                                       std::to_string(in.value.shape[d]));
    if (in.dtype != "float32" && !in.value.is_int)
      return Status::Unsupported("input '" + decl.name + "' is " + in.dtype + ": the engine computes in float32");
    if (in.value.is_int || FeedsOnlyConstantInputs(*graph, decl.name)) {  // constants of the graph
      graph->initializers[decl.name] = in.value;
      continue;
    }
    for (int64_t d : in.value.shape)
      if (d == 0) return Status::Unsupported("input '" + decl.name + "' is empty (a dimension of 0)");
    decl.shape = in.value.shape;
    Tensor t;
    t.shape = in.value.shape;
    t.type = TensorType::kFloat32;
    t.data.resize(in.value.f.size() * 4);
    std::memcpy(t.data.data(), in.value.f.data(), t.data.size());
    floats[decl.name] = std::move(t);
    kept.push_back(std::move(decl));
  }
  if (kept.empty()) return Status::Unsupported("no float32 input: the graph is all constants (the engine plans from one)");
  graph->inputs = std::move(kept);
  return floats;
}

}  // namespace framemill::engine
