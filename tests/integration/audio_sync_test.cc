// audio_sync through the binary with AUDIO_SYNC_GPU on the simulated device: the face
// detector and facemesh run on our engine there (their kernels' CPU twins behind a VRAM
// budget); with too little VRAM the ladder steps down to cv::dnn on the CPU and the job
// still ends done, with the same estimate.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

namespace fs = std::filesystem;

TEST(AudioSyncBinaryTest, OnADeviceFacesAndMouthsRunOnTheEngineAndTooLittleMemoryFallsBack) {
  for (const char* m : {"silero-vad", "blazeface", "facemesh"}) FM_REQUIRE_MODEL(m);
  TempDir dir;
  const std::string media = dir / "media";
  fs::create_directories(media);
  fs::copy_file(SampleData("Megamind.avi"), media + "/megamind.avi");
  nlohmann::json results[2];
  std::string devices[2];
  for (int tiny = 0; tiny < 2; ++tiny) {
    const std::string db = dir / ("fm" + std::to_string(tiny) + ".db");
    std::map<std::string, std::string> env = {{"FRAMEMILL_DB", db},
                                              {"FRAMEMILL_OUT", dir / "out"},
                                              {"FRAMEMILL_MODELS", ModelsDir()},
                                              {"FRAMEMILL_STAGES", "audio_sync"},
                                              {"GPU_BACKEND", "sim"}, {"GPU_PRECISION", "fp32"}, {"CPU_PRECISION", "fp32"},
                                              {"AUDIO_SYNC_GPU", "true"},
                                              // the engine's CPU twins are slow: 6 s will do
                                              {"FRAMEMILL_AUDIO_SYNC_MAX_SECONDS", "6"},
                                              {"FRAMEMILL_SIM_VRAM_MB", tiny ? "1" : "512"}};
    ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path()).exit_code, 0);
    auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "1"}, env, dir.path(), 600);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    auto rows = QueryRows(db, "SELECT device || '|' || result FROM results");
    ASSERT_EQ(rows.size(), 1u);
    devices[tiny] = rows[0].substr(0, rows[0].find('|'));
    results[tiny] = nlohmann::json::parse(rows[0].substr(rows[0].find('|') + 1));
  }
  EXPECT_EQ(devices[0], "sim:0");
  EXPECT_EQ(devices[1], "cpu");  // 1 MiB holds neither model's weights
  for (const auto& r : results) {
    EXPECT_EQ(r["signal"], "energy+mouth") << r.dump();
    EXPECT_NEAR(r["audio"]["seconds"].get<double>(), 6.0, 0.1);
    EXPECT_GT(r["face_fraction"].get<double>(), 0.9);
  }
  // The engine's fp32 twins and cv::dnn agree to float rounding: the same peak.
  EXPECT_NEAR(results[0]["offset_ms"].get<double>(), results[1]["offset_ms"].get<double>(), 5.0)
      << results[0].dump() << "\n" << results[1].dump();
}

}  // namespace
}  // namespace framemill::testing
