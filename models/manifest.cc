#include "models/manifest.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace framemill::models {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// Reads typed fields, keeping the first problem as a message that names the key, so
// that a hand-edited or half-written manifest says what is wrong with it.
class FieldReader {
 public:
  explicit FieldReader(std::string file) : file_(std::move(file)) {}

  const json* Find(const json& obj, const std::string& key, const std::string& path,
                   bool required) {
    if (!obj.is_object()) return Fail(path.empty() ? "top level" : path, "is not an object");
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
      if (required) Fail(Join(path, key), "is missing");
      return nullptr;
    }
    return &*it;
  }

  // The value at `key` as a T where `is_t` says it is one, else `def` (and a failure
  // naming what it should be, where the key holds something else).
  template <class T>
  T Typed(const json& obj, const std::string& key, const std::string& path, bool required, T def,
          bool (json::*is_t)() const noexcept, const char* not_t) {
    const json* v = Find(obj, key, path, required);
    if (v == nullptr) return def;
    if (!(v->*is_t)()) return Fail(Join(path, key), not_t), def;
    return v->get<T>();
  }
  std::string Str(const json& obj, const std::string& key, const std::string& path,
                  bool required, std::string def = "") {
    return Typed(obj, key, path, required, def, &json::is_string, "is not a string");
  }
  double Num(const json& obj, const std::string& key, const std::string& path, bool required,
             double def = 0) {
    return Typed(obj, key, path, required, def, &json::is_number, "is not a number");
  }
  int64_t Int(const json& obj, const std::string& key, const std::string& path, bool required,
              int64_t def = 0) {
    return Typed(obj, key, path, required, def, &json::is_number_integer, "is not an integer");
  }
  bool Bool(const json& obj, const std::string& key, const std::string& path, bool def) {
    return Typed(obj, key, path, false, def, &json::is_boolean, "is not true or false");
  }

  std::vector<int64_t> Shape(const json& obj, const std::string& key, const std::string& path,
                             bool required) {
    std::vector<int64_t> out;
    const json* v = Find(obj, key, path, required);
    if (v == nullptr) return out;
    if (!v->is_array()) return Fail(Join(path, key), "is not an array"), out;
    for (const json& d : *v) {
      if (!d.is_number_integer() || d.get<int64_t>() < -1 || d.get<int64_t>() == 0)
        return Fail(Join(path, key), "holds " + d.dump() + ", not a dimension (-1 or > 0)"), out;
      out.push_back(d.get<int64_t>());
    }
    return out;
  }

  std::vector<std::string> Strings(const json& obj, const std::string& key,
                                   const std::string& path) {
    std::vector<std::string> out;
    const json* v = Find(obj, key, path, false);
    if (v == nullptr) return out;
    if (!v->is_array()) return Fail(Join(path, key), "is not an array"), out;
    for (const json& s : *v) {
      if (!s.is_string()) return Fail(Join(path, key), "holds a non-string"), out;
      out.push_back(s.get<std::string>());
    }
    return out;
  }

  // Three per-channel values (mean or std).
  void Channels(const json& obj, const std::string& key, const std::string& path, float* out) {
    const json* v = Find(obj, key, path, false);
    if (v == nullptr) return;
    if (!v->is_array() || v->size() != 3) return (void)Fail(Join(path, key), "is not 3 numbers");
    for (int c = 0; c < 3; ++c) {
      if (!(*v)[c].is_number()) return (void)Fail(Join(path, key), "is not 3 numbers");
      out[c] = (*v)[c].get<float>();
    }
  }

  std::nullptr_t Fail(const std::string& where, const std::string& what) {
    if (error_.empty()) error_ = "\"" + where + "\" " + what;
    return nullptr;
  }

  Status status() const {
    if (error_.empty()) return Status::OK();
    return Status::Corruption(file_ + ": " + error_);
  }

 private:
  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  std::string file_;
  std::string error_;
};

// "content_probe": {"features": output, "l2_normalise", "weights": [...], "bias",
// "positive", "threshold"}.
void ReadProbe(const json& j, FieldReader* r, LinearProbe* p) {
  const std::string path = "content_probe";
  p->output = r->Str(j, "features", path, true);
  p->l2_normalise = r->Bool(j, "l2_normalise", path, true);
  p->bias = static_cast<float>(r->Num(j, "bias", path, true));
  p->positive = r->Str(j, "positive", path, true);
  p->threshold = static_cast<float>(r->Num(j, "threshold", path, false, 0.5));
  const json* w = r->Find(j, "weights", path, true);
  if (w == nullptr) return;
  if (!w->is_array() || w->empty()) return (void)r->Fail(path + ".weights", "is not a non-empty array");
  for (const json& v : *w) {
    if (!v.is_number()) return (void)r->Fail(path + ".weights", "holds a non-number");
    p->weights.push_back(v.get<float>());
  }
}

// A file the manifest names, relative to the model's directory.
std::string Resolve(const fs::path& dir, const std::string& name) {
  fs::path p(name);
  return (p.is_absolute() ? p : dir / p).lexically_normal().string();
}

// The manifest file's JSON.
Result<json> ReadJsonFile(const fs::path& dir, const std::string& file) {
  std::error_code ec;
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    if (!fs::exists(file, ec)) return Status::NotFound("no manifest.json in " + dir.string());
    return Status::IOError("cannot read " + file);
  }
  std::stringstream buf;
  buf << in.rdbuf();
  try {
    return json::parse(buf.str());
  } catch (const json::parse_error& e) {
    return Status::Corruption(file + ": not valid JSON (" + e.what() + ")");
  }
}

void ReadPreprocess(const json& pre, FieldReader* r, gpu::PreprocessSpec* p) {
  p->width = static_cast<int>(r->Int(pre, "width", "input.preprocess", true));
  p->height = static_cast<int>(r->Int(pre, "height", "input.preprocess", true));
  p->to_rgb = r->Bool(pre, "to_rgb", "input.preprocess", p->to_rgb);
  p->scale = static_cast<float>(r->Num(pre, "scale", "input.preprocess", false, p->scale));
  r->Channels(pre, "mean", "input.preprocess", p->mean);
  r->Channels(pre, "std", "input.preprocess", p->std);
  if (r->status().ok() && (p->width <= 0 || p->height <= 0))
    r->Fail("input.preprocess", "has a size that is not positive");
}

void ReadInput(const json& input, FieldReader* r, ModelManifest* m) {
  m->input_name = r->Str(input, "name", "input", true);
  m->input_shape = r->Shape(input, "shape", "input", true);
  if (r->status().ok() && m->input_shape.size() != 4)
    r->Fail("input.shape", "has " + std::to_string(m->input_shape.size()) +
                               " dimensions, not 4 (NCHW)");
  m->batchable = r->Bool(input, "batchable", "input", true);
  m->tfjs_input_name = r->Str(input, "tfjs_name", "input", false);
  m->tfjs_input_layout = r->Str(input, "tfjs_layout", "input", false);
  m->tfjs_input_dtype = r->Str(input, "tfjs_dtype", "input", false);
  if (const json* pre = r->Find(input, "preprocess", "input", true)) {
    ReadPreprocess(*pre, r, &m->preprocess);
    m->letterbox_pad = static_cast<int>(r->Int(*pre, "letterbox", "input.preprocess", false, -1));
    if (r->status().ok() && m->letterbox_pad > 255)
      r->Fail("input.preprocess.letterbox", "is not a grey level from 0 to 255");
  }
}

void ReadOutputs(const json& outs, FieldReader* r, ModelManifest* m) {
  if (!outs.is_array() || outs.empty()) return (void)r->Fail("outputs", "is not a non-empty array");
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string path = "outputs[" + std::to_string(i) + "]";
    ModelOutputSpec o;
    o.name = r->Str(outs[i], "name", path, true);
    o.shape = r->Shape(outs[i], "shape", path, false);
    o.layout = r->Str(outs[i], "layout", path, false);
    o.tfjs_node = r->Str(outs[i], "tfjs_node", path, false);
    m->outputs.push_back(std::move(o));
  }
}

// The files the manifest names, resolved in `dir`, each there.
Status ResolveFiles(const fs::path& dir, const std::string& onnx, const std::string& graph,
                    ModelManifest* m) {
  std::error_code ec;
  m->onnx_file = Resolve(dir, onnx);
  if (!graph.empty()) m->graph_file = Resolve(dir, graph);
  std::vector<std::string> needed = {m->onnx_file};
  if (!m->graph_file.empty()) {
    needed.push_back(m->graph_file);
    // The graph's weights sit next to it: model.fmg.json -> model.fmg.bin.
    fs::path bin(m->graph_file);
    if (bin.extension() == ".json") needed.push_back(bin.replace_extension(".bin").string());
  }
  for (const std::string& f : needed)
    if (!fs::is_regular_file(f, ec))
      return Status::NotFound("model '" + m->name + "' in " + m->dir + " is incomplete: " + f +
                              ", named by its manifest.json, does not exist");
  return Status::OK();
}

}  // namespace

Result<ModelManifest> LoadManifest(const std::string& dir_in) {
  std::error_code ec;
  fs::path dir = fs::absolute(dir_in, ec).lexically_normal();
  if (ec) dir = fs::path(dir_in);
  const std::string file = (dir / "manifest.json").string();
  auto parsed = ReadJsonFile(dir, file);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;

  FieldReader r(file);
  ModelManifest m;
  m.format_version = static_cast<int>(r.Int(j, "format_version", "", true));
  FM_RETURN_IF_ERROR(r.status());
  if (m.format_version != 1)
    return Status::Unsupported(file + ": format_version " + std::to_string(m.format_version) +
                               " is not readable by this build (it reads 1); re-convert with "
                               "`framemill models fetch --force`");
  m.name = r.Str(j, "name", "", true);
  m.task = r.Str(j, "task", "", false);
  m.operation = r.Str(j, "operation", "", false);
  if (const json* src = r.Find(j, "source", "", false)) {
    m.package = r.Str(*src, "package", "source", false);
    m.package_version = r.Str(*src, "version", "source", false);
  }
  if (const json* input = r.Find(j, "input", "", true)) ReadInput(*input, &r, &m);
  if (const json* outs = r.Find(j, "outputs", "", true)) ReadOutputs(*outs, &r, &m);
  m.postprocess = r.Str(j, "postprocess", "", false, "none");
  m.reference_outputs = r.Strings(j, "reference_outputs", "");
  if (const json* probe = r.Find(j, "content_probe", "", false)) ReadProbe(*probe, &r, &m.content_probe);
  const std::string onnx = r.Str(j, "onnx", "", true);
  const std::string graph = r.Str(j, "graph", "", false);
  FM_RETURN_IF_ERROR(r.status());
  m.dir = dir.string();
  m.manifest_file = file;
  FM_RETURN_IF_ERROR(ResolveFiles(dir, onnx, graph, &m));
  return m;
}

void RoundIfIntegerInput(const ModelManifest& m, gpu::Tensor* t) {
  // The original graph takes int32 pixels (MoveNet): the resized values are rounded to
  // integers so that both implementations see the same input.
  if (m.tfjs_input_dtype != "int32" || t->type != gpu::TensorType::kFloat32) return;
  float* v = reinterpret_cast<float*>(t->data.data());
  for (size_t i = 0, n = t->data.size() / sizeof(float); i < n; ++i) v[i] = std::nearbyint(v[i]);
}

}  // namespace framemill::models
