// The motion stage through the binary, on real clips joined at known frames with ffmpeg:
// the cuts found are the joins, a fade (ffmpeg's fade filter) is not a cut, ViSP's moving
// camera pans, and a still image is skipped with the reason.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/support/export_rows.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

namespace fs = std::filesystem;

const std::string kCockatoo = ImageioData("cockatoo.mp4");
const char* kFfmpeg = "/usr/bin/ffmpeg";  // Debian's (scripts/install-deps.sh)
const char* kVispCube = "/usr/share/visp-images-data/ViSP-images/video/cube.mpeg";

// `frames` frames of each input from `start`, at 25 fps and 640x360, joined in order
// (with `filters` after each part), encoded as MPEG-4 part 2.
void Join(const std::vector<std::string>& inputs, int start, int frames,
          const std::vector<std::string>& filters, const std::string& out) {
  std::vector<std::string> argv = {kFfmpeg, "-v", "error", "-y"};
  for (const auto& in : inputs) argv.insert(argv.end(), {"-i", in});
  std::string graph;
  for (size_t i = 0; i < inputs.size(); ++i) {
    graph += "[" + std::to_string(i) + ":v]fps=25,scale=640:360,setsar=1,trim=start_frame=" +
             std::to_string(start) + ":end_frame=" + std::to_string(start + frames) +
             ",setpts=PTS-STARTPTS" + (filters[i].empty() ? "" : "," + filters[i]) + "[v" +
             std::to_string(i) + "];";
  }
  for (size_t i = 0; i < inputs.size(); ++i) graph += "[v" + std::to_string(i) + "]";
  graph += "concat=n=" + std::to_string(inputs.size()) + ":v=1:a=0[out]";
  argv.insert(argv.end(), {"-filter_complex", graph, "-map", "[out]", "-c:v", "mpeg4", "-q:v", "3",
                           out});
  auto r = RunProcess(argv, {}, "/");
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

// The motion results by file name.
std::map<std::string, nlohmann::json> MotionResults(const std::string& dir,
                                                    const std::map<std::string, std::string>& env) {
  std::map<std::string, nlohmann::json> out;
  for (const auto& row : ExportRows(env, dir, "motion"))
    out[fs::path(row["item"].get<std::string>()).filename().string()] = row["result"];
  return out;
}

TEST(MotionStageTest, CutsAreTheJoinsOfRealClipsAndFadesAreNot) {
  ASSERT_TRUE(fs::exists(kFfmpeg)) << "ffmpeg is not installed (scripts/install-deps.sh installs it)";
  ASSERT_TRUE(fs::exists(kCockatoo)) << "python3-imageio is not installed (scripts/install-deps.sh)";
  TempDir dir;
  const std::string media = dir / "media";
  fs::create_directories(media);
  const std::string vtest = SampleData("vtest.avi"), mega = SampleData("Megamind.avi");
  // Three shots of 60 frames: cuts at 60 and 120.
  Join({vtest, kCockatoo, mega}, 0, 60, {"", "", ""}, media + "/joined.mp4");
  // One street scene faded out to black and back in: no cut.
  Join({vtest}, 100, 100, {"fade=t=out:s=30:n=10,fade=t=in:s=45:n=10"}, media + "/faded.mp4");
  // A fade out at the end of one shot and in at the start of the next: one new shot,
  // where the picture comes back (frame 50 or just after).
  Join({vtest, mega}, 0, 50, {"fade=t=out:s=40:n=10", "fade=t=in:s=0:n=10"}, media + "/fade_join.mp4");
  fs::copy_file(SampleData("messi5.jpg"), media + "/still.jpg");
  fs::copy_file(mega, media + "/Megamind.avi");  // as shipped: a black first frame, three cuts
  ASSERT_TRUE(fs::exists(kVispCube)) << "visp-images-data is not installed (scripts/install-deps.sh)";
  fs::copy_file(kVispCube, media + "/cube.mpeg");  // a camera moving over a cube, one shot

  const std::string db = dir / "fm.db";
  std::map<std::string, std::string> env = {{"FRAMEMILL_DB", db},
                                            {"FRAMEMILL_OUT", dir / "out"},
                                            {"FRAMEMILL_STAGES", "motion"}};
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path()).exit_code, 0);
  auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, dir.path(), 300);
  ASSERT_EQ(run.exit_code, 0) << run.err;

  auto results = MotionResults(dir.path(), env);
  ASSERT_EQ(results.size(), 5u);
  // Megamind's shots change at 98, 154 and 200 (checked frame by frame by eye); its black
  // first frame is a leader, not a shot.
  EXPECT_EQ(results["Megamind.avi"]["cuts"], nlohmann::json({98, 154, 200}))
      << results["Megamind.avi"].dump();
  EXPECT_EQ(results["Megamind.avi"]["fps"], 23.976);
  const auto& joined = results["joined.mp4"];
  EXPECT_EQ(joined["cuts"], nlohmann::json({60, 120})) << joined.dump();
  EXPECT_EQ(joined["fps"], 25.0);
  EXPECT_EQ(joined["frames_analysed"], 180);
  ASSERT_EQ(joined["shots"].size(), 3u);
  EXPECT_EQ(joined["shots"][0]["camera"]["label"], "static");  // vtest's fixed camera
  EXPECT_EQ(results["faded.mp4"]["cuts"], nlohmann::json::array()) << results["faded.mp4"].dump();
  const auto& fade_join = results["fade_join.mp4"]["cuts"];
  ASSERT_EQ(fade_join.size(), 1u) << fade_join.dump();
  EXPECT_GE(fade_join[0].get<int>(), 50);
  EXPECT_LE(fade_join[0].get<int>(), 52);
  // ViSP's moving camera: the content drifts left about a pixel a frame (measured -0.92).
  const auto& cube = results["cube.mpeg"];
  EXPECT_EQ(cube["cuts"], nlohmann::json::array()) << cube.dump();
  EXPECT_EQ(cube["camera"]["label"], "pan") << cube.dump();
  EXPECT_LT(cube["camera"]["dx"].get<double>(), -0.5);

  // The per-pair series is an artifact: a header and a line per analysed pair.
  const std::string series = joined["series"];
  ASSERT_TRUE(fs::exists(series)) << series;
  std::ifstream csv(series);
  int lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  EXPECT_EQ(lines, 1 + 179);

  auto still = QueryRows(db, "SELECT j.state || '|' || j.last_error FROM jobs j JOIN items i ON"
                             " i.id = j.item_id WHERE i.source LIKE '%still.jpg'");
  ASSERT_EQ(still.size(), 1u);
  EXPECT_EQ(still[0], "4|motion does not apply to image items");
}

// MOTION_GPU on the simulated device: the flow is our own (the kernels' CPU twin behind
// a VRAM budget); with too little VRAM the ladder steps down to the CPU twin and every job
// still ends done, with the same figures.
TEST(MotionStageTest, OnADeviceTheFlowIsOurOwnAndTooLittleMemoryFallsBackToItsCpuTwin) {
  ASSERT_TRUE(fs::exists(kFfmpeg)) << "ffmpeg is not installed (scripts/install-deps.sh installs it)";
  TempDir dir;
  const std::string media = dir / "media";
  fs::create_directories(media);
  Join({SampleData("vtest.avi")}, 0, 24, {""}, media + "/street.mp4");
  std::map<std::string, nlohmann::json> results[2];
  std::string devices[2];
  for (int tiny = 0; tiny < 2; ++tiny) {
    const std::string db = dir / ("fm" + std::to_string(tiny) + ".db");
    std::map<std::string, std::string> env = {{"FRAMEMILL_DB", db},
                                              {"FRAMEMILL_OUT", dir / "out"},
                                              {"FRAMEMILL_STAGES", "motion"},
                                              {"GPU_BACKEND", "sim"}, {"GPU_PRECISION", "fp32"}, {"CPU_PRECISION", "fp32"},
                                              {"MOTION_GPU", "true"},
                                              {"FRAMEMILL_SIM_VRAM_MB", tiny ? "1" : "256"}};
    ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path()).exit_code, 0);
    auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "1"}, env, dir.path(), 300);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    results[tiny] = MotionResults(dir.path(), env);
    auto device = QueryRows(db, "SELECT device FROM results");
    ASSERT_EQ(device.size(), 1u);
    devices[tiny] = device[0];
  }
  EXPECT_EQ(devices[0], "sim:0");
  EXPECT_EQ(devices[1], "cpu");  // 1 MiB holds no 320x180 pair: the ladder's last step
  for (const auto& r : results) {
    const auto& street = r.at("street.mp4");
    EXPECT_EQ(street["flow"], "lk-pyramid");
    EXPECT_EQ(street["camera"]["label"], "static") << street.dump();
    EXPECT_LT(std::abs(street["camera"]["dx"].get<double>()), 0.1);
    EXPECT_EQ(street["cuts"], nlohmann::json::array());
  }
  EXPECT_EQ(results[0].at("street.mp4")["camera"], results[1].at("street.mp4")["camera"]);
}

}  // namespace
}  // namespace framemill::testing
