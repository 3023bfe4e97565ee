// Every catalog model on the CPU's oneDNN kernels at each instruction set this CPU has, so
// that an AVX-512 machine checks the AVX2 path too: each level runs in a child process of its
// own, capped with dnnl::set_max_cpu_isa (what ONEDNN_MAX_CPU_ISA does), with oneDNN's verbose
// log on. A level fails on any primitive oneDNN ran on a reference kernel (its verbose log
// names the primitive and its post-ops; the kernels' notes name the step), and on any output
// that is not the reference kernels' (engine/reference/) at the models' usual tolerance
// (model_outputs.h). Models in bf16 by default (YOLOv8) also run in bf16 where the level has
// it. It prints the steps the kernels split, per model (bench/README, "Every CPU").
// The input's seed is printed; FRAMEMILL_TEST_SEED replays it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/dnnl/dnnl_kernels.h"
#include "engine/engine.h"
#include "engine/reference/cpu_kernels.h"
#include "models/catalog.h"
#include "tests/engine/model_outputs.h"
#include "tests/support/model_test_support.h"

namespace framemill::engine {
namespace {

// The reference kernels take a few seconds on the 640x640 detectors and about a minute on
// isnet's 1024x1024: isnet's outputs are compared on the AVX2 level only.
constexpr int64_t kLargeInput = 3 * 640 * 640;

const char* NoteKindName(StepNote::Kind k) {
  return k == StepNote::Kind::kSplit ? "split" : k == StepNote::Kind::kReference ? "reference" : "none";
}

// The child: every installed catalog model at `isa`, each note and output error a line of
// `report`; oneDNN's verbose log on stdout (redirected by the parent). Exit 0 when it ran.
int RunLevel(dnnl::cpu_isa isa, bool compare_large, const std::string& report_path, uint32_t seed) {
  std::ofstream report(report_path);
  if (dnnl::set_max_cpu_isa(isa) != dnnl::status::success) {
    report << "ERROR oneDNN refused the ISA cap (it had made code in this process already)\n";
    return 3;
  }
  dnnl::set_verbose(1);
  report << "ISA " << CpuIsa() << "\n";
  std::mt19937 rng(seed);
  for (const models::ModelSpec& m : models::CatalogModels()) {
    const std::string graph = framemill::testing::ModelsDir() + "/" + m.name + "/model.fmg.json";
    if (!std::filesystem::exists(graph)) {
      report << "MISSING " << m.name << "\n";
      continue;
    }
    std::vector<bool> precisions{false};
    if (m.cpu_precision == "bf16" && CpuHasBf16()) precisions.push_back(true);
    for (bool bf16 : precisions) {
      const std::string tag = m.name + " " + (bf16 ? "bf16" : "fp32");
      std::printf("=== %s\n", tag.c_str());
      std::fflush(stdout);
      auto dnnl = Engine::Load(graph, MakeDnnlKernels({.bf16 = bf16}));
      if (!dnnl.ok()) {
        report << "FAILED " << tag << "\t" << dnnl.status().ToString() << "\n";
        continue;
      }
      auto plan = (*dnnl)->PlanFor(1);
      const Tensor in = model_check::RandomInput((*plan)->inputs[0].shape, rng);
      auto got = (*dnnl)->Run(in);
      std::fflush(stdout);
      if (!got.ok()) {
        report << "FAILED " << tag << "\t" << got.status().ToString() << "\n";
        continue;
      }
      for (const auto& [step, note] : (*dnnl)->Notes())
        report << "NOTE " << tag << "\t" << NoteKindName(note.kind) << "\t" << step << "\t" << note.what << "\n";
      int64_t elems = 1;
      for (int64_t d : in.shape) elems *= d;
      if (bf16 || (elems > kLargeInput && !compare_large)) continue;
      auto ref = Engine::Load(graph, MakeCpuKernels());
      auto want = ref.ok() ? (*ref)->Run(in) : Result<std::map<std::string, Tensor>>(ref.status());
      if (!want.ok()) {
        report << "FAILED " << tag << " on the reference kernels\t" << want.status().ToString() << "\n";
        continue;
      }
      for (const model_check::OutputError& e : model_check::CompareOutputs(m.name, *want, *got))
        report << "DIFF " << tag << "\t" << e.output << "\t" << e.worst_of_range << "\t" << e.limit << "\n";
    }
  }
  report << "END\n";
  return 0;
}

uint32_t IsaSeedFor(const char* test) {
  uint32_t seed = std::random_device{}();
  if (const char* s = std::getenv("FRAMEMILL_TEST_SEED")) seed = static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
  std::printf("[seed] IsaLevelsTest.%s: FRAMEMILL_TEST_SEED=%u\n", test, seed);
  std::fflush(stdout);
  return seed;
}

std::vector<std::string> ReportLines(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(f, l);) out.push_back(l);
  return out;
}

std::vector<std::string> TabFields(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream s(line);
  for (std::string x; std::getline(s, x, '\t');) f.push_back(x);
  return f;
}

// Runs RunLevel in a child and checks what it wrote. Nothing here may ask oneDNN anything
// before the fork: its first answer about the ISA fixes the cap for the process and its
// children.
void CheckLevel(dnnl::cpu_isa isa, const char* test, bool compare_large) {
  if (InferenceStarted()) GTEST_SKIP() << "this process ran a primitive before the test (ctest runs each test alone)";
  if (framemill::testing::ModelsRequired() == false &&
      !std::filesystem::exists(framemill::testing::ModelsDir() + "/yolov8n/model.fmg.json"))
    GTEST_SKIP() << "no converted models in " << framemill::testing::ModelsDir();
  const uint32_t seed = IsaSeedFor(test);
  const std::string dir = ::testing::TempDir() + "/isa_" + test + "_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string log = dir + "/onednn_verbose.log", report = dir + "/report.txt";
  std::fflush(stdout);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, 1) < 0) _exit(4);
    _exit(RunLevel(isa, compare_large, report, seed));
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child at this ISA level died (status " << status << "); its log: " << log;
  const std::vector<std::string> lines = ReportLines(report);
  ASSERT_FALSE(lines.empty());
  ASSERT_EQ(lines.back(), "END") << "the report ends early: " << report;
  std::printf("oneDNN ran at %s\n", lines[0].c_str() + 4);
  // oneDNN's own word: no primitive executed on a reference kernel.
  std::string model = "?";
  int execs = 0;
  for (const std::string& l : ReportLines(log)) {
    if (l.rfind("=== ", 0) == 0) model = l.substr(4);
    if (l.rfind("onednn_verbose,exec,", 0) != 0) continue;
    ++execs;
    const std::vector<std::string> f = [&] {
      std::vector<std::string> v;
      std::stringstream s(l);
      for (std::string x; std::getline(s, x, ',');) v.push_back(x);
      return v;
    }();
    if (f.size() > 4 && f[4].rfind("ref", 0) == 0) ADD_FAILURE() << model << ": oneDNN ran a reference kernel: " << l;
  }
  EXPECT_GT(execs, 1000) << "oneDNN's verbose log holds too few executions: " << log;
  std::map<std::string, int> split;
  for (const std::string& l : lines) {
    const std::vector<std::string> f = TabFields(l.substr(l.find(' ') + 1));
    if (l.rfind("MISSING ", 0) == 0) {
      if (framemill::testing::ModelsRequired()) ADD_FAILURE() << "model not installed: " << l.substr(8);
      else std::printf("  (not installed: %s)\n", l.c_str() + 8);
    } else if (l.rfind("FAILED ", 0) == 0) {
      ADD_FAILURE() << l;
    } else if (l.rfind("NOTE ", 0) == 0 && f.size() >= 4) {
      if (f[1] == "reference") ADD_FAILURE() << f[0] << ": step " << f[2] << " on a reference kernel: " << f[3];
      std::printf("  %-22s %s: %s\n", f[0].c_str(), f[2].c_str(), f[3].c_str());
      ++split[f[0]];
    } else if (l.rfind("DIFF ", 0) == 0 && f.size() >= 4) {
      const double worst = std::stod(f[2]), limit = std::stod(f[3]);
      EXPECT_LE(worst, limit) << f[0] << " output " << f[1] << " against the reference kernels";
      std::printf("  %-22s %-26s worst error %.2e of the range (limit %.0e)\n", f[0].c_str(), f[1].c_str(), worst,
                  limit);
    }
  }
  for (const auto& [m, n] : split) std::printf("  %s: %d step(s) split\n", m.c_str(), n);
}

// Whether this CPU has AVX-512 as oneDNN's avx512_core needs it (F, BW, VL, DQ), asked of the
// CPU itself: asking oneDNN would fix its ISA before the child caps it.
bool CpuHasAvx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

TEST(IsaLevelsTest, EveryModelAtAvx2RunsOnJitKernelsAndAgreesWithTheReference) {
  CheckLevel(dnnl::cpu_isa::avx2, "EveryModelAtAvx2RunsOnJitKernelsAndAgreesWithTheReference", true);
}

TEST(IsaLevelsTest, EveryModelAtAvx512RunsOnJitKernelsAndAgreesWithTheReference) {
  if (!CpuHasAvx512()) GTEST_SKIP() << "this CPU has no AVX-512";
  CheckLevel(dnnl::cpu_isa::avx512_core, "EveryModelAtAvx512RunsOnJitKernelsAndAgreesWithTheReference", false);
}

// The CPU's own level where it computes bf16 (AVX512-BF16, AMX): YOLOv8's default there.
TEST(IsaLevelsTest, EveryModelAtTheCpusOwnIsaRunsOnJitKernels) {
  if (!CpuHasAvx512() || !__builtin_cpu_supports("avx512bf16"))
    GTEST_SKIP() << "this CPU has no AVX512-BF16: its own level is one of the two above";
  CheckLevel(dnnl::cpu_isa::all, "EveryModelAtTheCpusOwnIsaRunsOnJitKernels", false);
}

}  // namespace
}  // namespace framemill::engine
