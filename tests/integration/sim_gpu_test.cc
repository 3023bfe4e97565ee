// The GPU layer end to end on the simulated device: a VRAM budget that fits only
// small batches (and not some single items) still finishes every item, with results
// identical to a CPU-only run and every out-of-memory step counted.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

std::map<std::string, nlohmann::json> Export(const std::map<std::string, std::string>& env,
                                             const std::string& cwd) {
  auto r = RunProcess({FRAMEMILL_BIN, "export", "--format", "jsonl"}, env, cwd);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, nlohmann::json> out;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    out[j["item"].get<std::string>()] = j;
  }
  return out;
}

TEST(SimGpuTest, TinyVramFinishesEveryItemWithCpuIdenticalResultsAndCountsFallbacks) {
  TempDir dir;
  // Photos up to 640 px: working copies of up to 512 px, 0.2 to 0.8 MB each.
  MakeRealImages(dir / "media", 40, 640);
  // LIGHTING is the operation with a simulated-device implementation.
  std::map<std::string, std::string> cpu_env = {{"FRAMEMILL_DB", dir / "cpu.db"},
                                                {"GPU_BACKEND", "cpu"},
                                                {"FRAMEMILL_STAGES", "lighting"}};
  // 1 MiB of "VRAM" at twice each item's bytes: small photos fit alone or in pairs,
  // large ones not even alone.
  std::map<std::string, std::string> sim_env = {{"FRAMEMILL_DB", dir / "sim.db"},
                                                {"GPU_BACKEND", "sim"},
                                                {"FRAMEMILL_SIM_VRAM_MB", "1"},
                                                {"FRAMEMILL_SIM_COST", "2"},
                                                {"FRAMEMILL_STAGES", "lighting"}};
  for (auto* env : {&cpu_env, &sim_env}) {
    ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", dir / "media"}, *env, dir.path()).exit_code, 0);
    auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, *env, dir.path());
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  auto cpu = Export(cpu_env, dir.path());
  auto sim = Export(sim_env, dir.path());
  ASSERT_EQ(cpu.size(), 40u);
  ASSERT_EQ(sim.size(), 40u);
  int on_sim = 0, on_cpu = 0;
  for (const auto& [item, c] : cpu) {
    ASSERT_TRUE(sim.count(item)) << item;
    const auto& s = sim[item];
    EXPECT_EQ(c["device"], "cpu");
    // The simulated device runs the CPU arithmetic: identical numbers, only the device differs.
    EXPECT_EQ(s["result"], c["result"]) << item;
    (s["device"] == "sim:0" ? on_sim : on_cpu)++;
    EXPECT_TRUE(s["device"] == "sim:0" || s["device"] == "cpu") << s["device"];
  }
  EXPECT_GT(on_sim, 0) << "no item fitted on the device";
  EXPECT_GT(on_cpu, 0) << "no item fell back to the CPU";

  auto status = RunProcess({FRAMEMILL_BIN, "status", "--json"}, sim_env, dir.path());
  auto j = nlohmann::json::parse(status.out);
  EXPECT_GT(j["last_run"]["oom_events"].get<long long>(), 0);
  EXPECT_EQ(j["last_run"]["cpu_fallbacks"].get<long long>(), on_cpu);
  EXPECT_EQ(QueryInt(dir / "sim.db", "SELECT sum(cpu_fallbacks) FROM workers"), on_cpu);
  EXPECT_EQ(QueryInt(dir / "cpu.db", "SELECT sum(oom_events) FROM workers"), 0);
}

TEST(SimGpuTest, GpuCommandShowsDevicesAndEveryOperationsDecision) {
  TempDir dir;
  auto sim = RunProcess({FRAMEMILL_BIN, "gpu", "--json"},
                        {{"GPU_BACKEND", "sim"}, {"FRAMEMILL_SIM_VRAM_MB", "2048"},
                         {"POSE_GPU", "true"}}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  auto j = nlohmann::json::parse(sim.out);
  EXPECT_EQ(j["backend"], "sim");
  ASSERT_EQ(j["devices"].size(), 1u);
  EXPECT_EQ(j["devices"][0]["total_bytes"], 2048LL << 20);
  EXPECT_EQ(j["operations"]["LIGHTING"]["device"], "sim:0");
  EXPECT_EQ(j["operations"]["POSE"]["device"], "cpu");
  EXPECT_EQ(j["operations"].size(), 11u);
  ASSERT_EQ(j["warnings"].size(), 1u);  // POSE_GPU=true, but pose has no GPU code yet
  EXPECT_NE(j["warnings"][0].get<std::string>().find("POSE_GPU=true"), std::string::npos);

  auto cpu = RunProcess({FRAMEMILL_BIN, "gpu"}, {{"GPU_BACKEND", "cpu"}}, dir.path());
  ASSERT_EQ(cpu.exit_code, 0);
  EXPECT_NE(cpu.out.find("LIGHTING         cpu      auto: GPU_BACKEND=cpu"), std::string::npos)
      << cpu.out;

  auto rocm = RunProcess({FRAMEMILL_BIN, "gpu"}, {{"GPU_BACKEND", "rocm"}}, dir.path());
  EXPECT_EQ(rocm.exit_code, 2);
  EXPECT_NE(rocm.err.find("only CUDA is supported"), std::string::npos);
}

}  // namespace
}  // namespace framemill::testing
