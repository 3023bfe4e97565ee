// ONNX's own node conformance cases (Debian's python3-onnx 1.12: `python3 -m
// onnx.backend.test.cmd_tools generate-data`, made by tools/onnx/make_cases.sh into
// FRAMEMILL_ONNX_CASES, default .cache/onnx-cases) through the engine on the oneDNN kernels,
// as `framemill infer --model model.onnx --inputs test_data_set_0` runs them (BindInputs, then
// Engine::FromGraph). Each case either gives ONNX's expected outputs (|got - want| <= 1e-7 +
// 1e-3 |want|, ONNX's backend test tolerance; integer outputs exactly) or is refused with
// the reason (an op, opset, attribute value or type the engine does not implement). A wrong
// answer, or any other error, fails the test; so do fewer than 250 passes among the cases
// whose every op the engine lowers. Prints the counts per op and every refusal's reason
// (bench/README, "ONNX's conformance cases"); FRAMEMILL_CONFORMANCE_REPORT=FILE writes them
// as markdown.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "engine/dnnl/dnnl_kernels.h"
#include "engine/engine.h"
#include "engine/onnx_import.h"
#include "tests/support/model_test_support.h"

namespace framemill::engine {
namespace {

namespace fs = std::filesystem;

std::string CasesDir() {
  const char* e = std::getenv("FRAMEMILL_ONNX_CASES");
  return e != nullptr && *e != '\0' ? e : FRAMEMILL_SOURCE_DIR "/.cache/onnx-cases";
}

enum class Outcome { kPassed, kRefused, kWrong, kError };

struct CaseResult {
  std::string name;
  std::set<std::string> ops;
  bool in_scope = false;  // every op one the engine lowers
  Outcome outcome = Outcome::kError;
  std::string why;
};

std::set<std::string> OpsOf(const std::string& model_path) {
  std::set<std::string> ops;
  onnx::ModelProto m;
  std::ifstream f(model_path, std::ios::binary);
  if (m.ParseFromIstream(&f))
    for (const auto& n : m.graph().node()) ops.insert(n.op_type());
  return ops;
}

// The first output that differs from ONNX's, as a sentence; "" when all agree.
std::string Mismatch(const std::map<std::string, Tensor>& got, const Graph& g,
                     const std::vector<OnnxTensor>& want) {
  if (want.size() != g.outputs.size()) return "the case has " + std::to_string(want.size()) + " outputs";
  for (size_t k = 0; k < want.size(); ++k) {
    const std::string& name = g.outputs[k];
    auto it = got.find(name);
    if (it == got.end()) return "no output " + name;
    const HostTensor& w = want[k].value;
    std::vector<float> v(it->second.data.size() / 4);
    std::memcpy(v.data(), it->second.data.data(), v.size() * 4);
    if (it->second.shape != w.shape) {
      std::string a, b;
      for (auto d : it->second.shape) a += std::to_string(d) + " ";
      for (auto d : w.shape) b += std::to_string(d) + " ";
      return "output " + name + " shape [" + a + "] against [" + b + "]";
    }
    for (int64_t e = 0; e < w.size(); ++e) {
      const double want_v = w.At(e), got_v = v[e];
      const bool same = w.is_int ? got_v == want_v
                        : std::isnan(want_v) ? std::isnan(got_v)
                        : std::isinf(want_v) ? got_v == want_v
                                             : std::fabs(got_v - want_v) <= 1e-7 + 1e-3 * std::fabs(want_v);
      if (!same) {
        std::ostringstream s;
        s << "output " << name << "[" << e << "] = " << got_v << ", ONNX's " << want_v;
        return s.str();
      }
    }
  }
  return "";
}

CaseResult RunCase(const fs::path& dir) {
  CaseResult r;
  r.name = dir.filename().string();
  const std::string model = (dir / "model.onnx").string();
  r.ops = OpsOf(model);
  r.in_scope = !r.ops.empty();
  for (const std::string& op : r.ops) r.in_scope = r.in_scope && IsSupportedOp(op);
  auto classify = [&](const Status& s) {
    r.outcome = s.code() == Status::Code::kUnsupported ? Outcome::kRefused : Outcome::kError;
    r.why = s.message();
    return r;
  };
  auto graph = LoadOnnxGraph(model);
  if (!graph.ok()) return classify(graph.status());
  const fs::path data = dir / "test_data_set_0";
  std::vector<OnnxTensor> inputs, outputs;
  for (size_t k = 0;; ++k) {
    const fs::path p = data / ("input_" + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    auto t = ReadOnnxTensor(p.string());
    if (!t.ok()) return classify(t.status());
    inputs.push_back(std::move(t).value());
  }
  for (size_t k = 0;; ++k) {
    const fs::path p = data / ("output_" + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    auto t = ReadOnnxTensor(p.string());
    if (!t.ok()) return classify(t.status());
    outputs.push_back(std::move(t).value());
  }
  // The expected outputs' types: what the graph says they are, or refused as for an input.
  for (size_t k = 0; k < outputs.size() && k < graph->outputs.size(); ++k)
    if (outputs[k].dtype == "float64" || outputs[k].dtype == "float16")
      return classify(Status::Unsupported("output '" + graph->outputs[k] + "' is " + outputs[k].dtype +
                                          ": the engine computes in float32"));
  Graph g = std::move(graph).value();
  auto bound = BindInputs(&g, inputs);
  if (!bound.ok()) return classify(bound.status());
  const Graph kept = g;
  auto e = Engine::FromGraph(std::move(g), MakeDnnlKernels());
  if (!e.ok()) return classify(e.status());
  std::vector<const Tensor*> run;
  for (const std::string& name : (*e)->InputNames()) run.push_back(&bound->at(name));
  auto got = (*e)->Run(run);
  if (!got.ok()) return classify(got.status());
  r.why = Mismatch(*got, kept, outputs);
  r.outcome = r.why.empty() ? Outcome::kPassed : Outcome::kWrong;
  return r;
}

// The reason without the node's name: "node 'x' (Conv): weights ..." -> "Conv: weights ...".
std::string Reason(const std::string& why) {
  if (why.rfind("node '", 0) == 0) {
    const size_t open = why.find("' ("), close = why.find("): ", open);
    if (open != std::string::npos && close != std::string::npos)
      return why.substr(open + 3, close - open - 3) + ": " + why.substr(close + 3);
  }
  return why;
}

TEST(OnnxConformanceTest, EveryNodeCaseGivesOnnxsOutputsOrIsRefused) {
  const fs::path root = fs::path(CasesDir()) / "node";
  if (!fs::is_directory(root)) {
    if (framemill::testing::ModelsRequired()) FAIL() << "no ONNX cases in " << root << " (tools/onnx/make_cases.sh)";
    GTEST_SKIP() << "no ONNX cases in " << root << " (tools/onnx/make_cases.sh)";
  }
  std::vector<fs::path> dirs;
  for (const auto& d : fs::directory_iterator(root))
    if (fs::exists(d.path() / "model.onnx")) dirs.push_back(d.path());
  std::sort(dirs.begin(), dirs.end());
  ASSERT_GT(dirs.size(), 800u) << "ONNX 1.12 has 900-odd node cases: " << root << " is incomplete";
  std::vector<CaseResult> results;
  for (const fs::path& d : dirs) results.push_back(RunCase(d));

  struct Counts { int cases = 0, passed = 0, refused = 0, wrong = 0, error = 0; };
  std::map<std::string, Counts> per_op;
  std::map<std::string, std::vector<std::string>> reasons;  // reason -> cases
  Counts all, scope;
  for (const CaseResult& r : results) {
    for (Counts* c : {&all, r.in_scope ? &scope : nullptr}) {
      if (!c) continue;
      ++c->cases;
      ++(r.outcome == Outcome::kPassed ? c->passed : r.outcome == Outcome::kRefused ? c->refused
                                                    : r.outcome == Outcome::kWrong ? c->wrong : c->error);
    }
    if (!r.in_scope) continue;
    for (const std::string& op : r.ops) {
      Counts& c = per_op[op];
      ++c.cases;
      ++(r.outcome == Outcome::kPassed ? c.passed : r.outcome == Outcome::kRefused ? c.refused
                                                   : r.outcome == Outcome::kWrong ? c.wrong : c.error);
    }
    if (r.outcome == Outcome::kRefused) reasons[Reason(r.why)].push_back(r.name);
    if (r.outcome == Outcome::kWrong) ADD_FAILURE() << r.name << ": a wrong answer: " << r.why;
    if (r.outcome == Outcome::kError) ADD_FAILURE() << r.name << ": an error, not a refusal: " << r.why;
  }
  std::ostringstream md;
  md << "Every op the engine lowers: " << scope.cases << " cases; **" << scope.passed << " passed**, " << scope.refused
     << " refused, " << scope.wrong << " wrong, " << scope.error << " errors. All " << all.cases << " node cases: "
     << all.passed << " passed, " << all.refused << " refused (" << all.cases - scope.cases
     << " of them use an op the engine does not lower), " << all.wrong << " wrong, " << all.error << " errors.\n\n";
  md << "| op | cases | passed | refused | wrong |\n|---|---|---|---|---|\n";
  for (const auto& [op, c] : per_op)
    md << "| " << op << " | " << c.cases << " | " << c.passed << " | " << c.refused << " | " << c.wrong + c.error
       << " |\n";
  md << "\nEvery refusal's reason (cases whose every op the engine lowers):\n\n| reason | cases |\n|---|---|\n";
  for (const auto& [why, cases] : reasons) {
    std::string list;
    for (size_t k = 0; k < cases.size(); ++k) list += (k ? ", " : "") + cases[k];
    md << "| " << why << " | " << cases.size() << ": " << list << " |\n";
  }
  std::printf("%s", md.str().c_str());
  if (const char* out = std::getenv("FRAMEMILL_CONFORMANCE_REPORT")) std::ofstream(out) << md.str();
  EXPECT_GE(scope.passed, 250) << "fewer passes than the issue's goal among the cases of the engine's ops";
}

}  // namespace
}  // namespace framemill::engine
