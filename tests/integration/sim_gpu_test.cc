// The GPU layer end to end on the simulated device: a VRAM budget that fits only
// small batches (and not some single items) still finishes every item, with results
// identical to a CPU-only run and every out-of-memory step counted.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <tuple>
#include <vector>
#include <algorithm>

#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

// The done jobs by item (of `stage` alone when given).
std::map<std::string, nlohmann::json> Export(const std::map<std::string, std::string>& env,
                                             const std::string& cwd, const std::string& stage = "") {
  std::vector<std::string> argv = {FRAMEMILL_BIN, "export", "--format", "jsonl"};
  if (!stage.empty()) argv.insert(argv.end(), {"--stage", stage});
  auto r = RunProcess(argv, env, cwd);
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
                                                {"GPU_BACKEND", "sim"}, {"GPU_PRECISION", "fp32"}, {"CPU_PRECISION", "fp32"},
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
                        {{"GPU_PRECISION", "fp32"}, {"CPU_PRECISION", "fp32"}, {"GPU_BACKEND", "sim"}, {"FRAMEMILL_SIM_VRAM_MB", "2048"},
                         {"INPAINTING_GPU", "true"}}, dir.path());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  auto j = nlohmann::json::parse(sim.out);
  EXPECT_EQ(j["backend"], "sim");
  ASSERT_EQ(j["devices"].size(), 1u);
  EXPECT_EQ(j["devices"][0]["total_bytes"], 2048LL << 20);
  EXPECT_EQ(j["operations"]["LIGHTING"]["device"], "sim:0");
  EXPECT_EQ(j["operations"]["POSE"]["device"], "sim:0");  // the inference engine
  EXPECT_EQ(j["operations"]["MOTION"]["device"], "sim:0");  // our dense flow
  EXPECT_EQ(j["operations"]["INPAINTING"]["device"], "sim:0");  // the patch search
  EXPECT_EQ(j["operations"].size(), 11u);
  EXPECT_TRUE(j["warnings"].empty()) << j["warnings"];

  auto cpu = RunProcess({FRAMEMILL_BIN, "gpu"}, {{"GPU_BACKEND", "cpu"}}, dir.path());
  ASSERT_EQ(cpu.exit_code, 0);
  EXPECT_NE(cpu.out.find("LIGHTING         cpu      auto: GPU_BACKEND=cpu"), std::string::npos)
      << cpu.out;

  auto rocm = RunProcess({FRAMEMILL_BIN, "gpu"}, {{"GPU_BACKEND", "rocm"}}, dir.path());
  EXPECT_EQ(rocm.exit_code, 2);
  EXPECT_NE(rocm.err.find("only CUDA is supported"), std::string::npos);
}



// categorize's two models (CenterNet and the content model) on the simulated device, through
// the ladder as CATEGORIZE_GPU takes them: the same photo-or-drawing answers and NSFW classes
// as on the CPU, and the same labels shown.
TEST(SimGpuTest, CategorizeOnTheEngineGivesTheCpusContentAndNsfw) {
  FM_REQUIRE_MODEL("centernet");
  FM_REQUIRE_MODEL("nsfw");
  TempDir dir;
  std::filesystem::create_directories(dir / "media");
  for (const char* name : {"messi5.jpg", "HappyFish.jpg", "fruits.jpg"})
    std::filesystem::copy_file(SampleData(name), dir / ("media/" + std::string(name)));
  auto run = [&](const std::string& db, const std::string& backend) {
    const std::map<std::string, std::string> e = {{"FRAMEMILL_DB", dir / db}, {"FRAMEMILL_OUT", dir / (db + "-out")},
                                                  {"FRAMEMILL_MODELS", ModelsDir()}, {"GPU_BACKEND", backend}, {"GPU_PRECISION", "fp32"}, {"CPU_PRECISION", "fp32"},
                                                  {"FRAMEMILL_SIM_VRAM_MB", "2048"}, {"FRAMEMILL_STAGES", "categorize"}};
    EXPECT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", dir / "media"}, e, dir.path()).exit_code, 0);
    auto r = RunProcess({FRAMEMILL_BIN, "run", "--workers", "1"}, e, dir.path(), 600);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Export(e, dir.path(), "categorize");
  };
  auto cpu = run("cpu.db", "cpu"), sim = run("sim.db", "sim");
  ASSERT_EQ(cpu.size(), 3u);
  ASSERT_EQ(sim.size(), 3u);
  for (const auto& [item, c] : cpu) {
    const auto& g = sim[item];
    EXPECT_EQ(c["device"], "cpu") << item;
    EXPECT_EQ(g["device"], "sim:0") << item;
    EXPECT_EQ(g["result"]["content"]["type"], c["result"]["content"]["type"]) << item;
    EXPECT_NEAR(g["result"]["content"]["p"].get<double>(), c["result"]["content"]["p"].get<double>(), 1e-3) << item;
    for (const char* k : {"drawing", "hentai", "neutral", "porn", "sexy", "unsafe"})
      EXPECT_NEAR(g["result"]["nsfw"][k].get<double>(), c["result"]["nsfw"][k].get<double>(), 1e-3) << item << " " << k;
    EXPECT_EQ(g["result"]["categories"].size(), c["result"]["categories"].size()) << item;
  }
}

// The neural stages on the simulated device: the models run on our inference engine
// (reference kernels behind the sim's VRAM budget) through the batch tuner and the
// out-of-memory ladder, exactly the path a CUDA device takes.
TEST(SimGpuTest, NeuralStagesRunOnTheEngineAndFallBackWhenTheModelDoesNotFit) {
  FM_REQUIRE_MODEL("movenet-lightning");
  FM_REQUIRE_MODEL("selfie");
  TempDir dir;
  MakeRealImages(dir / "media", 6, 640);
  auto env = [&](const std::string& db, const std::string& backend, const std::string& vram) {
    return std::map<std::string, std::string>{{"FRAMEMILL_DB", dir / db},
                                              {"FRAMEMILL_OUT", dir / (db + "-out")},
                                              {"FRAMEMILL_MODELS", ModelsDir()},
                                              {"GPU_BACKEND", backend}, {"GPU_PRECISION", "fp32"}, {"CPU_PRECISION", "fp32"},
                                              {"FRAMEMILL_SIM_VRAM_MB", vram},
                                              {"FRAMEMILL_STAGES", "pose,segment"}};
  };
  auto cpu_env = env("cpu.db", "cpu", "1");
  // Room for both models.
  auto roomy_env = env("roomy.db", "sim", "2048");
  // 12 MiB: selfie (0.5 MB of weights, 4 MiB of activations) fits; movenet's 9 MB of
  // weights load but its 13 MiB of activations do not, so pose falls back to the CPU.
  auto tight_env = env("tight.db", "sim", "12");
  for (auto* e : {&cpu_env, &roomy_env, &tight_env}) {
    ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", dir / "media"}, *e, dir.path()).exit_code, 0);
    auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "1"}, *e, dir.path(), 600);
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  auto key = [](const nlohmann::json& j) {
    return j["item"].get<std::string>() + "|" + j["stage"].get<std::string>();
  };
  auto rows = [&](const std::map<std::string, std::string>& e) {
    auto r = RunProcess({FRAMEMILL_BIN, "export", "--format", "jsonl"}, e, dir.path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, nlohmann::json> out;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line);
      out[key(j)] = j;
    }
    return out;
  };
  auto cpu = rows(cpu_env), roomy = rows(roomy_env), tight = rows(tight_env);
  ASSERT_EQ(cpu.size(), 12u);
  ASSERT_EQ(roomy.size(), 12u);
  ASSERT_EQ(tight.size(), 12u);
  double worst_px = 0;
  for (const auto& [k, c] : cpu) {
    EXPECT_EQ(c["device"], "cpu") << k;
    EXPECT_EQ(roomy[k]["device"], "sim:0") << k;
    const bool pose = c["stage"] == "pose";
    EXPECT_EQ(tight[k]["device"], pose ? "cpu" : "sim:0") << k;
    if (pose) {
      // cv::dnn on the CPU and the engine on the device agree to float rounding.
      const auto& a = c["result"]["keypoints"];
      const auto& b = roomy[k]["result"]["keypoints"];
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        if (a[i]["score"].get<double>() < 0.3) continue;
        worst_px = std::max({worst_px, std::fabs(a[i]["x"].get<double>() - b[i]["x"].get<double>()),
                             std::fabs(a[i]["y"].get<double>() - b[i]["y"].get<double>())});
      }
    } else {
      EXPECT_NEAR(c["result"]["coverage"].get<double>(), roomy[k]["result"]["coverage"].get<double>(), 0.002) << k;
    }
  }
  std::printf("pose keypoints (score >= 0.3), engine on sim vs cv::dnn: worst %.4f px\n", worst_px);
  EXPECT_LT(worst_px, 1.0);
  EXPECT_EQ(QueryInt(dir / "roomy.db", "SELECT sum(oom_events) FROM workers"), 0);
  EXPECT_GT(QueryInt(dir / "tight.db", "SELECT sum(oom_events) FROM workers"), 0);
  EXPECT_EQ(QueryInt(dir / "tight.db", "SELECT sum(cpu_fallbacks) FROM workers"), 6);
}

// Each track as the frames it holds, in order: what a curator filtering on tracks gets.
std::vector<std::vector<int64_t>> TrackFrames(const nlohmann::json& result) {
  std::vector<std::vector<int64_t>> tracks;
  for (const auto& t : result["tracks"]) {
    std::vector<int64_t> frames;
    for (const auto& s : t["frames"]) frames.push_back(s["frame"].get<int64_t>());
    tracks.push_back(std::move(frames));
  }
  std::sort(tracks.begin(), tracks.end());
  return tracks;
}

// Issue 40: the engine in fp16 (a CUDA device's default, and now the simulated device's)
// moves person scores by up to 0.05 against the CPU. Megamind.avi's people on the CPU, on
// the simulated device in fp16 and in fp32: the same tracks, sighting for sighting.
// (cc5d81d's tracker gave 6 tracks of 66 sightings on the CPU and 67 in fp16.)
// Its own suite: SimGpuTest also runs against the CPU-only build, and this one takes a minute.
// Each model's precision on a device, and why, in `gpu` and `config` alike: its own under auto
// (pose fp32, faceres fp16), GPU_PRECISION's when set, but fp32 for silero-vad always.
TEST(SimGpuTest, GpuAndConfigShowEachModelsPrecisionAndWhy) {
  for (const char* command : {"gpu", "config"}) {
    for (const char* setting : {"auto", "fp16"}) {
      auto r = RunProcess({FRAMEMILL_BIN, command, "--json"}, {{"GPU_BACKEND", "sim"}, {"GPU_PRECISION", setting}});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const nlohmann::json p = nlohmann::json::parse(r.out)["model_precision"];
      const bool forced = std::string(setting) == "fp16";
      EXPECT_EQ(p["movenet-multipose"]["precision"], forced ? "fp16" : "fp32") << command << " " << setting;
      EXPECT_EQ(p["faceres"]["precision"], "fp16") << command << " " << setting;
      EXPECT_EQ(p["silero-vad"]["precision"], "fp32") << command << " " << setting;
      EXPECT_FALSE(p["centernet"]["why"].get<std::string>().empty()) << command;
      if (forced) {
        EXPECT_EQ(p["faceres"]["why"], "GPU_PRECISION=fp16");
      }
    }
  }
}

// GPU_PRECISION auto (the default) runs pose in fp32 on a device (models/catalog.cc).
TEST(SimPoseTracksTest, MegamindsTracksAreTheSameOnTheCpuAndTheDeviceInFp16AndByDefault) {
  FM_REQUIRE_MODEL("movenet-multipose");
  TempDir dir;
  std::filesystem::create_directories(dir / "media");
  std::filesystem::copy_file(SampleData("Megamind.avi"), std::filesystem::path(dir / "media") / "Megamind.avi");
  std::map<std::string, std::vector<std::vector<int64_t>>> tracks;
  for (const auto& [name, backend, precision] : {std::tuple{"cpu", "cpu", "fp32"},
                                                 std::tuple{"fp16", "sim", "fp16"},
                                                 std::tuple{"default", "sim", "auto"}}) {
    const std::map<std::string, std::string> env = {
        {"FRAMEMILL_DB", dir / (std::string(name) + ".db")}, {"FRAMEMILL_OUT", dir / name},
        {"FRAMEMILL_MODELS", ModelsDir()}, {"FRAMEMILL_STAGES", "pose"},
        {"GPU_BACKEND", backend}, {"GPU_PRECISION", precision}};
    ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", dir / "media"}, env, dir.path()).exit_code, 0);
    auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "1"}, env, dir.path(), 600);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const auto rows = Export(env, dir.path(), "pose");
    ASSERT_EQ(rows.size(), 1u);
    const nlohmann::json& row = rows.begin()->second;
    EXPECT_EQ(row["device"], std::string(backend) == "cpu" ? "cpu" : "sim:0");
    tracks[name] = TrackFrames(row["result"]);
    size_t sightings = 0;
    for (const auto& t : tracks[name]) sightings += t.size();
    std::printf("[pose] Megamind.avi, %s: %zu tracks, %zu sightings\n", name, tracks[name].size(), sightings);
  }
  EXPECT_GE(tracks["cpu"].size(), 3u);
  EXPECT_EQ(tracks["fp16"], tracks["cpu"]);
  EXPECT_EQ(tracks["default"], tracks["cpu"]);
}

}  // namespace
}  // namespace framemill::testing
