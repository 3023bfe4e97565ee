#include "cli/infer_graph.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <map>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/exit_code.h"
#include "base/json_text.h"
#include "engine/cuda/cuda_kernels_factory.h"
#include "engine/dnnl/dnnl_kernels.h"
#include "engine/engine.h"
#include "engine/onnx_import.h"

namespace framemill {
namespace {

constexpr int kGraphExitUsage = ToInt(ExitCode::kUsage);
constexpr int kGraphExitFailed = ToInt(ExitCode::kSomeFailed);

// DIR/input_K.pb for each of the graph's inputs.
Result<std::vector<engine::OnnxTensor>> ReadInputs(const std::string& dir, size_t count) {
  std::vector<engine::OnnxTensor> inputs;
  for (size_t k = 0; k < count; ++k) {
    const std::string path = dir + "/input_" + std::to_string(k) + ".pb";
    if (!std::filesystem::exists(path))
      return Status::InvalidArgument("--inputs: no " + path + " (the graph takes " + std::to_string(count) +
                                     " input(s): input_0.pb to input_" + std::to_string(count - 1) + ".pb)");
    auto t = engine::ReadOnnxTensor(path);
    if (!t.ok()) return Status::InvalidArgument("--inputs: " + t.status().message());
    inputs.push_back(std::move(t).value());
  }
  return inputs;
}

Result<std::unique_ptr<engine::Kernels>> MakeKernels(const GraphInferOptions& opts) {
  if (opts.device == "cpu") return engine::MakeDnnlKernels();
  auto k = engine::MakeCudaKernels(opts.device_id);
  if (!k.ok())
    return Status::InvalidArgument("--device gpu: no CUDA device " + std::to_string(opts.device_id) + ": " +
                                   k.status().message());
  return k;
}

// An output's values as its declared type has them: integers for the integer types.
nlohmann::json Values(const engine::Tensor& t, const std::string& dtype) {
  std::vector<float> v(t.data.size() / 4);
  std::memcpy(v.data(), t.data.data(), v.size() * 4);
  const bool integer = dtype != "float32" && dtype != "float16" && dtype != "float64";
  nlohmann::json data = nlohmann::json::array();
  for (float x : v) {
    if (integer) data.push_back(static_cast<int64_t>(std::llround(x)));
    else data.push_back(x);
  }
  return data;
}

void PrintText(const std::string& name, const engine::Tensor& t, const std::string& dtype, std::ostream& out) {
  std::vector<float> v(t.data.size() / 4);
  std::memcpy(v.data(), t.data.data(), v.size() * 4);
  out << name << " [";
  for (size_t d = 0; d < t.shape.size(); ++d) out << (d ? "x" : "") << t.shape[d];
  out << "] " << dtype << ":";
  for (size_t k = 0; k < std::min<size_t>(v.size(), 8); ++k) out << " " << v[k];
  if (v.size() > 8) out << " ... (" << v.size() << " values)";
  if (!v.empty()) {
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    out << "; min " << *lo << ", max " << *hi;
  }
  out << "\n";
}

// The engine's refusals (Unsupported) and bad inputs (InvalidArgument, Corruption, NotFound)
// are the user's to mend: exit 2; anything else is the run's own failure.
int ExitFor(const Status& s) {
  return s.code() == Status::Code::kUnsupported || s.IsInvalidArgument() || s.IsCorruption() || s.IsNotFound() ? kGraphExitUsage
                                                                                                 : kGraphExitFailed;
}

}  // namespace

int RunGraphInfer(const GraphInferOptions& opts, std::ostream& out, std::ostream& err) {
  auto fail = [&](const Status& s) {
    err << "infer: " << opts.model << ": " << s.message() << "\n";
    return ExitFor(s);
  };
  if (!engine::IsOnnxPath(opts.model)) {
    err << "infer: --inputs takes an ONNX graph (--model FILE.onnx), not '" << opts.model << "'\n";
    return kGraphExitUsage;
  }
  if (!std::filesystem::is_directory(opts.inputs_dir)) {
    err << "infer: --inputs: no directory " << opts.inputs_dir << "\n";
    return kGraphExitUsage;
  }
  auto graph = engine::LoadOnnxGraph(opts.model);
  if (!graph.ok()) return fail(graph.status());
  auto inputs = ReadInputs(opts.inputs_dir, graph->inputs.size());
  if (!inputs.ok()) return fail(inputs.status());
  auto bound = engine::BindInputs(&graph.value(), *inputs);
  if (!bound.ok()) return fail(bound.status());
  const std::map<std::string, std::string> dtypes = graph->output_dtypes;
  const std::vector<std::string> names = graph->outputs;
  const int64_t opset = graph->opset;
  auto kernels = MakeKernels(opts);
  if (!kernels.ok()) return fail(kernels.status());
  auto e = engine::Engine::FromGraph(std::move(graph).value(), std::move(kernels).value());
  if (!e.ok()) return fail(e.status());
  std::vector<const engine::Tensor*> run_inputs;
  for (const std::string& name : (*e)->InputNames()) run_inputs.push_back(&bound->at(name));
  const auto t0 = std::chrono::steady_clock::now();
  auto outs = (*e)->Run(run_inputs);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!outs.ok()) return fail(outs.status());
  const std::string device = (*e)->kernels().name();
  if (opts.json) {
    nlohmann::json o = nlohmann::json::object();
    for (const std::string& name : names) {
      const engine::Tensor& t = outs->at(name);
      auto dt = dtypes.find(name);
      const std::string dtype = dt == dtypes.end() ? "float32" : dt->second;
      o[name] = {{"shape", t.shape}, {"dtype", dtype}, {"data", Values(t, dtype)}};
    }
    nlohmann::json doc = {{"model", opts.model}, {"device", device}, {"opset", opset}, {"ms", ms},
                          {"results", nlohmann::json::array({{{"inputs", opts.inputs_dir}, {"outputs", o}}})}};
    out << JsonDump(doc) << "\n";
    return 0;
  }
  for (const std::string& name : names) {
    auto dt = dtypes.find(name);
    PrintText(name, outs->at(name), dt == dtypes.end() ? "float32" : dt->second, out);
  }
  out << opts.model << " (ai.onnx opset " << opset << ") on " << device << ": " << std::fixed << std::setprecision(1)
      << ms << " ms\n";
  return 0;
}

}  // namespace framemill
