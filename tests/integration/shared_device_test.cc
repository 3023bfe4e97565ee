// One simulated device shared by a run's four workers (issue 30), through the real binary:
// every stage over real photos and a clip with speech, every device operation on the
// device. The results are the CPU's (bench/compare_results.py), the device's peak is
// recorded and within its total, and out-of-memory stays the exception; on a device too
// small for some models the ladder steps down to the CPU and the results are still the CPU's.
#include <gtest/gtest.h>

#include <cstdio>

#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "gpu/device_ledger.h"
#include "gpu/policy.h"
#include "tests/support/model_test_support.h"
#include "tests/support/pg_server.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A device of a run's status as one line: its id, total memory and workers.
std::string Seat(const json& d) {
  return d["id"].get<std::string>() + ", " + std::to_string(d["total_mb"].get<int64_t>()) +
         " MiB, " + std::to_string(d["workers"].get<int>()) + " workers";
}

class SharedDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* m : {"centernet", "nsfw", "blazeface", "faceres", "movenet-multipose", "selfie"})
      FM_REQUIRE_MODEL(m);
    fs::create_directories(media);
    for (const char* name : {"messi5.jpg", "HappyFish.jpg", "fruits.jpg"})
      fs::copy_file(SampleData(name), media + "/" + name);
    // A second of Megamind.avi: a face speaking, with its audio.
    auto cut = RunProcess({"/usr/bin/ffmpeg", "-v", "error", "-y", "-i", SampleData("Megamind.avi"),
                           "-t", "1", "-c:v", "mpeg4", "-q:v", "3", "-c:a", "copy", media + "/clip.avi"});
    ASSERT_EQ(cut.exit_code, 0) << cut.err;
  }
  // inpaint.method is named: `auto` is the harmonic fill in a run with a device and Telea's
  // without one, by design; named, both runs fill with `pyramid` (the device's kernels, or
  // its CPU twin: the same pixels).
  std::map<std::string, std::string> Env(const std::string& name, const std::string& backend,
                                         const std::string& vram_mb) {
    return {{"FRAMEMILL_DB", dir / (name + ".db")}, {"FRAMEMILL_OUT", dir / (name + "-out")},
            {"FRAMEMILL_MODELS", ModelsDir()},     {"GPU_BACKEND", backend}, {"GPU_PRECISION", "fp32"}, {"CPU_PRECISION", "fp32"},
            {"FRAMEMILL_SIM_VRAM_MB", vram_mb},    {"FRAMEMILL_STAGES", "all"},
            {"FRAMEMILL_INPAINT_METHOD", "pyramid"}};
  }
  // Enqueues, runs with 4 workers to the end, exports; returns status --json's last run.
  json RunAll(const std::map<std::string, std::string>& env, const std::string& name) {
    EXPECT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env).exit_code, 0);
    auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "4"}, env, "", 600);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    auto x = RunProcess({FRAMEMILL_BIN, "export", "--format", "jsonl", "-o", dir / (name + ".jsonl")}, env);
    EXPECT_EQ(x.exit_code, 0) << x.err;
    auto status = RunProcess({FRAMEMILL_BIN, "status", "--json"}, env);
    return json::parse(status.out)["last_run"];
  }
  // bench/compare_results.py: the same jobs, structure and strings; numbers within 1e-4.
  void ExpectTheCpusResults(const std::string& name) {
    auto cmp = RunProcess({"/usr/bin/python3", std::string(FRAMEMILL_SOURCE_DIR) + "/bench/compare_results.py",
                           dir / "cpu.jsonl", dir / (name + ".jsonl")});
    EXPECT_EQ(cmp.exit_code, 0) << cmp.out << cmp.err;
    std::printf("%s against the CPU:\n%s", name.c_str(), cmp.out.c_str());
  }

  TempDir dir;
  std::string media = dir / "media";
};

TEST_F(SharedDeviceTest, FourWorkersOnOneSimulatedDeviceGiveTheCpusResults) {
  json cpu = RunAll(Env("cpu", "cpu", "8192"), "cpu");
  EXPECT_TRUE(cpu["devices"].empty()) << cpu;
  EXPECT_GT(cpu["jobs_done"].get<int>(), 20);

  json sim = RunAll(Env("sim", "sim", "8192"), "sim");
  ExpectTheCpusResults("sim");
  EXPECT_EQ(sim["jobs_done"], cpu["jobs_done"]);
  ASSERT_EQ(sim["devices"].size(), 1u) << sim;
  const json& d = sim["devices"][0];
  EXPECT_EQ(Seat(d), "sim:0, 8192 MiB, 4 workers");
  EXPECT_GT(d["peak_planned_mb"].get<int64_t>(), 0);
  EXPECT_LE(d["peak_planned_mb"].get<int64_t>(), d["total_mb"].get<int64_t>());
  // The device had a batch in flight for part of the run: its busy share (the union of its
  // workers' batches, over the run's wall time) is in (0, 1].
  EXPECT_GT(d["busy_share"].get<double>(), 0) << d;
  EXPECT_LE(d["busy_share"].get<double>(), 1) << d;
  // Where a job's time went: the median faces job's split sums to its time, and on the
  // device most of it is the device's; on the CPU none is.
  for (const char* name : {"sim", "cpu"}) {
    auto status = RunProcess({FRAMEMILL_BIN, "status", "--json"}, Env(name, name, "8192"));
    const json faces = json::parse(status.out)["stages"]["faces"];
    const json& split = faces["time_split_ms"]["image"];
    EXPECT_EQ(split["decode"].get<int64_t>() + split["host"].get<int64_t>() + split["device"].get<int64_t>() +
                  split["wait"].get<int64_t>(),
              faces["ms_per_item"]["image"].get<int64_t>()) << name << ": " << faces;
    if (std::string(name) == "sim") EXPECT_GT(split["device"].get<int64_t>(), split["host"].get<int64_t>()) << faces;
    else EXPECT_EQ(split["device"].get<int64_t>(), 0) << faces;
  }
  // Each planned within a quarter of 8 GiB: out-of-memory at most once per operation (a
  // first guess of an item's bytes proven wrong), here none.
  EXPECT_LE(d["oom_events"].get<int>(), 11) << d;
  EXPECT_EQ(d["cpu_fallbacks"], 0) << d;

  // 24 MiB: CenterNet's weights and plan (34 MiB) never fit, nor do the four workers'
  // models together: the ladder sends what does not fit to the CPU. (What stays on the device
  // depends on which engines the workers happen to hold first, so it is not checked.)
  json tight = RunAll(Env("tight", "sim", "24"), "tight");
  ExpectTheCpusResults("tight");
  EXPECT_EQ(tight["jobs_done"], cpu["jobs_done"]);
  ASSERT_EQ(tight["devices"].size(), 1u) << tight;
  const json& t = tight["devices"][0];
  EXPECT_EQ(t["total_mb"], 24);
  EXPECT_LE(t["peak_planned_mb"].get<int64_t>(), 24);
  EXPECT_GT(t["oom_events"].get<int>(), 0) << t;
  EXPECT_GT(t["cpu_fallbacks"].get<int>(), 0) << t;

  // The report's runs table names the device with its busy share, peak, OOM events and
  // fallbacks.
  auto report = RunProcess({FRAMEMILL_BIN, "report", "-o", dir / "report"}, Env("tight", "sim", "24"));
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const std::string index = ReadFile(dir / "report/index.html");
  char busy[16];
  std::snprintf(busy, sizeof busy, "%.0f", 100 * t["busy_share"].get<double>());
  EXPECT_NE(index.find(std::string("sim:0: 4 workers, busy ") + busy + "%, peak " +
                       std::to_string(t["peak_planned_mb"].get<int64_t>()) + " of 24 MiB, " +
                       std::to_string(t["oom_events"].get<int>()) + " OOM"),
            std::string::npos);
}

// The workers on a device are tuned as the run goes: one place at the start, and the run's
// other worker, on the CPU, joins the device once it has judged it underused over a window
// (join_below_busy above 1: whenever work waits; a window of 200 ms) while work waits.
TEST_F(SharedDeviceTest, AWorkerOnTheCpuJoinsAnUnderusedDeviceWhileWorkWaits) {
  auto env = Env("join", "sim", "8192");
  env["FRAMEMILL_GPU_WORKERS_PER_DEVICE"] = "1";
  env["FRAMEMILL_GPU_MAX_WORKERS_PER_DEVICE"] = "2";
  env["FRAMEMILL_GPU_JOIN_BELOW_BUSY"] = "2";
  env["FRAMEMILL_BATCH"] = "1";
  env["FRAMEMILL_STAGES"] = "lighting,faces";
  env["FRAMEMILL_DEVICE_LEDGER_DIR"] = dir.path();
  WriteFile(dir / "join.yaml", "gpu:\n  join_window_ms: 200\n");
  env["FRAMEMILL_CONFIG"] = dir / "join.yaml";
  // Enough photos that work still waits after the CPU worker's first windows.
  for (const char* name : {"baboon.jpg", "building.jpg", "home.jpg", "blox.jpg", "orange.jpg",
                           "apple.jpg", "board.jpg", "butterfly.jpg", "aero1.jpg", "left01.jpg"})
    fs::copy_file(SampleData(name), media + "/" + name);
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env).exit_code, 0);
  auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, "", 600);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("this worker joins it"), std::string::npos) << run.err;
  auto status = RunProcess({FRAMEMILL_BIN, "status", "--json"}, env);
  const json devices = json::parse(status.out)["last_run"]["devices"];
  ASSERT_EQ(devices.size(), 1u) << devices;
  EXPECT_EQ(devices[0]["workers"], 2) << devices;
}

// Workers past gpu.workers_per_device run every operation on the CPU, and never open the
// device: this test holds the device's one place, so both workers of the run are past it.
TEST_F(SharedDeviceTest, WorkersPastTheDevicesPlacesRunOnTheCpu) {
  auto holder = gpu::DeviceLedger::Join(dir.path(), "sim:0", 8192LL << 20, 1);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  auto env = Env("full", "sim", "8192");
  env["FRAMEMILL_GPU_WORKERS_PER_DEVICE"] = "1";
  env["FRAMEMILL_DEVICE_LEDGER_DIR"] = dir.path();
  env["FRAMEMILL_STAGES"] = "lighting";
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env).exit_code, 0);
  auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, "", 300);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto status = json::parse(RunProcess({FRAMEMILL_BIN, "status", "--json"}, env).out);
  EXPECT_TRUE(status["last_run"]["devices"].empty()) << status["last_run"];
  EXPECT_EQ(status["last_run"]["jobs_done"], 4);
  EXPECT_EQ(QueryInt(dir / "full.db", "SELECT count(*) FROM results WHERE device = 'cpu'"), 4);
}

// The run's devices from a PostgreSQL store: what the workers record there is what status
// shows. On 1 MiB at twice each photo's bytes no photo fits, so every one is an
// out-of-memory event and a CPU fallback, counted on sim:0.
TEST_F(SharedDeviceTest, TheRunsDevicesComeFromPostgreSqlToo) {
  std::string why;
  PgServer* pg = PgServer::Shared(&why);
  ASSERT_NE(pg, nullptr) << why;
  auto env = Env("pg", "sim", "1");
  env["FRAMEMILL_DB"] = pg->CreateDatabase();
  env["FRAMEMILL_SIM_COST"] = "2";
  env["FRAMEMILL_STAGES"] = "lighting";
  for (const char* name : {"messi5.jpg", "HappyFish.jpg", "fruits.jpg"}) fs::remove(media + "/" + name);
  MakeRealImages(media, 6, 640);
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env).exit_code, 0);
  auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, "", 300);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto last = json::parse(RunProcess({FRAMEMILL_BIN, "status", "--json"}, env).out)["last_run"];
  ASSERT_EQ(last["devices"].size(), 1u) << last;
  const json& d = last["devices"][0];
  EXPECT_EQ(Seat(d), "sim:0, 1 MiB, 2 workers");
  EXPECT_LE(d["peak_planned_mb"].get<int64_t>(), 1);
  EXPECT_EQ(d["cpu_fallbacks"], last["cpu_fallbacks"]);
  EXPECT_EQ(d["oom_events"], last["oom_events"]);
  EXPECT_GE(d["cpu_fallbacks"].get<int>(), 6) << "the photos, and the clip's frames";
}

// `framemill gpu` shows who shares the device now: here this test process, holding 3 MiB.
TEST_F(SharedDeviceTest, GpuCommandShowsTheWorkersOnTheDeviceAndTheirShares) {
  auto ledger = gpu::DeviceLedger::Join(dir.path(), "sim:0", 2048LL << 20, 4);
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  ASSERT_TRUE((*ledger)->Reserve(3 << 20, "a test's batch").ok());
  std::map<std::string, std::string> env = {{"GPU_PRECISION", "fp32"}, {"CPU_PRECISION", "fp32"}, {"GPU_BACKEND", "sim"}, {"FRAMEMILL_SIM_VRAM_MB", "2048"},
                                            {"FRAMEMILL_DEVICE_LEDGER_DIR", dir.path()}};
  auto j = json::parse(RunProcess({FRAMEMILL_BIN, "gpu", "--json"}, env).out);
  const json& sharing = j["devices"][0]["sharing"];
  EXPECT_EQ(sharing["workers_per_device"], gpu::GpuOptions{}.workers_per_device);
  ASSERT_EQ(sharing["workers"].size(), 1u) << sharing;
  EXPECT_EQ(sharing["workers"][0]["pid"], getpid());
  EXPECT_EQ(sharing["workers"][0]["planned_mb"], 3);
  EXPECT_EQ(sharing["share_mb"], 2048);
  auto text = RunProcess({FRAMEMILL_BIN, "gpu"}, env);
  EXPECT_NE(text.out.find("shared by 1 worker process(es) (at most " +
                          std::to_string(gpu::GpuOptions{}.workers_per_device) + "), 2048 MiB each"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("pid " + std::to_string(getpid()) + ": 3 MiB planned"), std::string::npos);
  ledger->reset();
  auto none = RunProcess({FRAMEMILL_BIN, "gpu"}, env);
  EXPECT_NE(none.out.find("shared: no worker on it now"), std::string::npos) << none.out;
}

}  // namespace
}  // namespace framemill::testing
