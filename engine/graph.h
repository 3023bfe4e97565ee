// The fmg graph form (docs/MODELS.md "Our graph form"): model.fmg.json + model.fmg.bin,
// the ONNX nodes of model.onnx in topological order, with the ai.onnx opset they follow.
// Loading checks the structure (every input defined before use, initializer bytes inside
// the .bin, known ops, an opset the engine implements) so that the planner only meets
// well-formed graphs.
// Thread-safety: a loaded Graph is an immutable value.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace framemill::engine {

// A constant known on the host: an initializer or a Constant node's value. Floats are
// kept as float, integer dtypes (int64/int32/bool) as int64.
struct HostTensor {
  bool is_int = false;
  std::vector<int64_t> shape;
  std::vector<float> f;
  std::vector<int64_t> i;
  int64_t size() const;  // element count (product of shape; 1 for a scalar)
  double At(int64_t k) const { return is_int ? static_cast<double>(i[k]) : f[k]; }
};

struct Node {
  std::string op, name;
  std::vector<std::string> inputs;   // "" = an omitted optional input
  std::vector<std::string> outputs;
  nlohmann::json attrs = nlohmann::json::object();

  int64_t AttrInt(std::string_view key, int64_t dflt) const;
  float AttrFloat(std::string_view key, float dflt) const;
  std::string AttrString(std::string_view key, std::string_view dflt) const;
  std::vector<int64_t> AttrInts(std::string_view key) const;  // empty when absent
  std::vector<float> AttrFloats(std::string_view key) const;
  bool HasAttr(std::string_view key) const { return attrs.contains(std::string(key)); }
};

struct ValueDecl {
  std::string name;
  std::vector<int64_t> shape;  // -1 = the batch dimension (or unknown)
  std::string dtype = "float32";  // ONNX's element type, as numpy names it: float32, int64, bool...
};

struct Graph {
  std::vector<ValueDecl> inputs;
  std::vector<std::string> outputs;
  std::map<std::string, std::string> output_dtypes;  // as ValueDecl::dtype; float32 where absent
  std::map<std::string, HostTensor> initializers;
  std::vector<Node> nodes;
  int64_t opset = 0;  // the ai.onnx opset version its nodes follow (engine/opset.h)
};

// The ONNX ops the engine runs (lowered by plan.cc).
bool IsSupportedOp(std::string_view op);

// Parses an fmg graph from its json text and the bytes of its .bin. Errors:
// Corruption (malformed json, bytes outside the bin, inconsistent shapes),
// Unsupported (an op the engine does not run, naming the op and the node),
// InvalidArgument (a value used before it is defined, missing inputs/outputs).
Result<Graph> ParseGraph(std::string_view json_text, std::string_view bin);
// Reads `json_path` and the .bin beside it (".json" replaced by ".bin"); NotFound/IOError
// when a file is missing or unreadable.
Result<Graph> LoadGraph(const std::string& json_path);

}  // namespace framemill::engine
