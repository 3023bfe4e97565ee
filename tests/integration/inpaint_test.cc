// The inpaint stage through the binary: it waits for segment and removes the person
// segment found (the real selfie model); a segment job retried after failing brings its
// inpaint job back; on the simulated device the exemplar fill's patch search runs there,
// and with too little VRAM the ladder steps down to the CPU with the same picture.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "analysis/inpaint_fill.h"
#include "tests/support/export_rows.h"
#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

namespace fs = std::filesystem;

std::map<std::string, nlohmann::json> ByFile(const std::vector<nlohmann::json>& rows) {
  std::map<std::string, nlohmann::json> out;
  for (const auto& r : rows) out[fs::path(r["item"].get<std::string>()).filename().string()] = r["result"];
  return out;
}

TEST(InpaintBinaryTest, WaitsForSegmentAndFillsOnlyNearWhatItFound) {
  FM_REQUIRE_MODEL("selfie");
  TempDir dir;
  const std::string media = dir / "media";
  fs::create_directories(media);
  for (const char* f : {"messi5.jpg", "basketball1.png", "vtest.avi"}) fs::copy_file(SampleData(f), media + "/" + f);
  std::map<std::string, std::string> env = {{"FRAMEMILL_DB", dir / "fm.db"},
                                            {"FRAMEMILL_OUT", dir / "out"},
                                            {"FRAMEMILL_MODELS", ModelsDir()},
                                            {"FRAMEMILL_STAGES", "inpaint"}};
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path()).exit_code, 0);
  // segment came with inpaint (its dependency); inpaint waits on it.
  EXPECT_EQ(QueryInt(dir / "fm.db", "SELECT count(*) FROM jobs WHERE stage = 'segment'"), 3);
  EXPECT_EQ(QueryInt(dir / "fm.db", "SELECT count(*) FROM jobs WHERE stage = 'inpaint' AND state = 5"), 2);
  auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, dir.path(), 600);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(QueryInt(dir / "fm.db",
                     "SELECT count(*) FROM jobs i JOIN jobs s ON s.item_id = i.item_id"
                     " WHERE i.stage = 'inpaint' AND s.stage = 'segment' AND i.state = 2"
                     " AND i.started_at >= s.finished_at"),
            2);
  EXPECT_EQ(QueryInt(dir / "fm.db", "SELECT count(*) FROM jobs WHERE stage = 'inpaint' AND state = 4"
                                    " AND last_error LIKE '%does not apply to video%'"),
            1);
  const auto segment = ByFile(ExportRows(env, dir.path(), "segment"));
  const auto inpaint = ByFile(ExportRows(env, dir.path(), "inpaint"));
  ASSERT_EQ(inpaint.size(), 2u);
  for (const auto& [file, r] : inpaint) {
    SCOPED_TRACE(file);
    EXPECT_EQ(r["mask_source"], "segment");
    EXPECT_EQ(r["mask"], segment.at(file)["mask"]);
    const cv::Mat source = cv::imread(media + "/" + file), filled = cv::imread(r["image"].get<std::string>());
    const cv::Mat seg = cv::imread(r["mask"].get<std::string>(), cv::IMREAD_GRAYSCALE);
    ASSERT_EQ(filled.size(), source.size());
    // The hole is the person grown by 1% of the diagonal: larger than segment's mask...
    EXPECT_GT(r["mask_coverage"].get<double>(), segment.at(file)["coverage"].get<double>());
    // ...and every changed pixel lies within that margin of it.
    const int grow = int(std::lround(0.01 * std::hypot(source.cols, source.rows))) + 1;
    cv::Mat near;
    cv::dilate(seg, near, cv::getStructuringElement(cv::MORPH_ELLIPSE, cv::Size(2 * grow + 1, 2 * grow + 1)));
    cv::Mat diff, changed;
    cv::absdiff(filled, source, diff);
    cv::cvtColor(diff, diff, cv::COLOR_BGR2GRAY);
    changed = diff > 0;
    changed.setTo(0, near);
    EXPECT_EQ(cv::countNonZero(changed), 0);
    EXPECT_GT(cv::countNonZero(diff), 0);
  }
}

TEST(InpaintBinaryTest, ARetriedSegmentBringsItsInpaintBack) {
  FM_REQUIRE_MODEL("selfie");
  TempDir dir;
  const std::string media = dir / "media";
  fs::create_directories(media);
  fs::copy_file(SampleData("messi5.jpg"), media + "/messi5.jpg");
  // A damaged model: installed as far as `run`'s checks see (its manifest), failing when
  // segment loads it.
  fs::create_directories(dir / "damaged/selfie");
  fs::copy_file(ModelsDir() + "/selfie/manifest.json", dir / "damaged/selfie/manifest.json");
  for (const auto& e : fs::directory_iterator(ModelsDir() + "/selfie"))
    if (e.path().filename() != "manifest.json") WriteFile(dir / ("damaged/selfie/" + e.path().filename().string()), "damaged");
  std::map<std::string, std::string> env = {{"FRAMEMILL_DB", dir / "fm.db"},
                                            {"FRAMEMILL_OUT", dir / "out"},
                                            {"FRAMEMILL_MODELS", dir / "damaged"},
                                            {"FRAMEMILL_STAGES", "inpaint"}};
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path()).exit_code, 0);
  RunProcess({FRAMEMILL_BIN, "run", "--workers", "1"}, env, dir.path(), 300);
  ASSERT_EQ(QueryInt(dir / "fm.db", "SELECT count(*) FROM jobs WHERE stage = 'segment' AND state = 3"), 1);
  ASSERT_EQ(QueryInt(dir / "fm.db", "SELECT count(*) FROM jobs WHERE stage = 'inpaint' AND state = 3"
                                    " AND error_class = 'dependency_failed'"),
            1);
  env["FRAMEMILL_MODELS"] = ModelsDir();
  auto retry = RunProcess({FRAMEMILL_BIN, "retry", "--failed", "--stage", "segment"}, env, dir.path());
  ASSERT_EQ(retry.exit_code, 0) << retry.err;
  EXPECT_EQ(QueryInt(dir / "fm.db", "SELECT count(*) FROM jobs WHERE stage = 'inpaint' AND state = 5"), 1);
  auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "1"}, env, dir.path(), 300);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(QueryInt(dir / "fm.db", "SELECT count(*) FROM jobs WHERE state = 2"), 2);
}

// One inpaint job on building.jpg with an elliptical mask, on the simulated device with
// `vram_mb` of memory and inpaint.method `method`: its device, method and filled image, and
// the items that fell back to the CPU.
struct DeviceFill {
  std::string device, method;
  cv::Mat filled;
  int64_t cpu_fallbacks = 0;
};
DeviceFill FillOnSim(const TempDir& dir, const std::string& method, const std::string& vram_mb) {
  DeviceFill out;
  const std::string media = dir / "media";
  if (!fs::exists(media + "/building.jpg")) {
    fs::create_directories(media);
    fs::copy_file(SampleData("building.jpg"), media + "/building.jpg");
    const cv::Mat photo = cv::imread(media + "/building.jpg");
    cv::Mat hole = cv::Mat::zeros(photo.size(), CV_8U);
    cv::ellipse(hole, cv::Point(photo.cols / 2, photo.rows / 2), cv::Size(photo.cols / 8, photo.rows / 8), 0, 0,
                360, 255, cv::FILLED);
    EXPECT_TRUE(cv::imwrite(dir / "hole.png", hole));
  }
  const std::string db = dir / (method + vram_mb + ".db");
  std::map<std::string, std::string> env = {{"FRAMEMILL_DB", db},
                                            {"FRAMEMILL_OUT", dir / "out"},
                                            {"FRAMEMILL_STAGES", "inpaint"},
                                            {"FRAMEMILL_INPAINT_MASKS", dir / "hole.png"},
                                            {"FRAMEMILL_INPAINT_METHOD", method},
                                            {"GPU_BACKEND", "sim"}, {"GPU_PRECISION", "fp32"}, {"CPU_PRECISION", "fp32"},
                                            {"INPAINTING_GPU", "true"},
                                            {"FRAMEMILL_SIM_VRAM_MB", vram_mb}};
  EXPECT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path()).exit_code, 0);
  // User masks: no segment job, so no model is needed.
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs"), 1);
  auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "1"}, env, dir.path(), 300);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  auto rows = QueryRows(db, "SELECT device || '|' || result FROM results");
  if (rows.size() != 1u) {
    ADD_FAILURE() << rows.size() << " results";
    return out;
  }
  out.device = rows[0].substr(0, rows[0].find('|'));
  const auto r = nlohmann::json::parse(rows[0].substr(rows[0].find('|') + 1));
  out.method = r["method"];
  out.filled = cv::imread(r["image"].get<std::string>());
  out.cpu_fallbacks = QueryInt(db, "SELECT sum(cpu_fallbacks) FROM workers");
  return out;
}

// With room, `method` runs on the simulated device; with 1 MiB the device cannot hold the job's
// largest step, which falls back to the CPU twin and fills exactly the same pixels.
void ExpectOnTheDeviceAndTheSameOnItsTwin(const std::string& method, const std::string& recorded) {
  TempDir dir;
  const DeviceFill roomy = FillOnSim(dir, method, "256"), tiny = FillOnSim(dir, method, "1");
  EXPECT_EQ(roomy.method, recorded);
  EXPECT_EQ(tiny.method, recorded);
  EXPECT_EQ(roomy.device, "sim:0");
  EXPECT_EQ(tiny.device, "cpu");
  EXPECT_GT(tiny.cpu_fallbacks, 0);
  ASSERT_FALSE(roomy.filled.empty());
  EXPECT_EQ(cv::norm(roomy.filled, tiny.filled, cv::NORM_INF), 0);
}

TEST(InpaintBinaryTest, OnADeviceThePatchSearchRunsThereAndTooLittleMemoryFallsBack) {
  ExpectOnTheDeviceAndTheSameOnItsTwin("exemplar", "exemplar");
}

// inpaint.method auto on a device is the harmonic fill (gpu/ops.h HoleFill).
TEST(InpaintBinaryTest, OnADeviceAutoIsTheHarmonicFillAndTooLittleMemoryFallsBackToItsTwin) {
  ExpectOnTheDeviceAndTheSameOnItsTwin("auto", "pyramid");
}

// A run with INPAINTING on a device whose seats are fewer than its workers: the worker on the
// device and the one on the CPU both fill with `pyramid`, and every filled picture is the
// CPU twin's, so which worker took a job does not show in its result.
TEST(InpaintBinaryTest, EveryWorkerOfADeviceRunFillsAlikeSeatedOnTheDeviceOrNot) {
  TempDir dir;
  const std::string media = dir / "media";
  fs::create_directories(media);
  const char* photos[] = {"building.jpg", "fruits.jpg", "baboon.jpg", "aero1.jpg", "home.jpg", "orange.jpg"};
  for (const char* f : photos) fs::copy_file(SampleData(f), media + "/" + f);
  cv::Mat hole = cv::Mat::zeros(400, 400, CV_8U);
  cv::ellipse(hole, cv::Point(200, 180), cv::Size(60, 90), 15, 0, 360, 255, cv::FILLED);
  ASSERT_TRUE(cv::imwrite(dir / "hole.png", hole));
  std::map<std::string, std::string> env = {{"FRAMEMILL_DB", dir / "fm.db"},
                                            {"FRAMEMILL_OUT", dir / "out"},
                                            {"FRAMEMILL_STAGES", "inpaint"},
                                            {"FRAMEMILL_INPAINT_MASKS", dir / "hole.png"},
                                            {"GPU_BACKEND", "sim"},
                                            {"INPAINTING_GPU", "true"},
                                            {"FRAMEMILL_GPU_WORKERS_PER_DEVICE", "1"},
                                            {"FRAMEMILL_GPU_MAX_WORKERS_PER_DEVICE", "1"}};
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path()).exit_code, 0);
  auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, dir.path(), 300);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto rows = ExportRows(env, dir.path(), "inpaint");
  ASSERT_EQ(rows.size(), std::size(photos));
  for (const auto& r : rows) {
    const std::string name = fs::path(r["item"].get<std::string>()).filename().string();
    EXPECT_EQ(r["result"]["method"], "pyramid") << name << " on " << r["device"];
    const cv::Mat photo = cv::imread(media + "/" + name);
    cv::Mat mask;
    cv::resize(hole, mask, photo.size(), 0, 0, cv::INTER_NEAREST);
    auto twin = Inpaint(photo, mask > 127, InpaintMethod::kPyramid);
    ASSERT_TRUE(twin.ok());
    const cv::Mat filled = cv::imread(r["result"]["image"].get<std::string>());
    EXPECT_EQ(cv::norm(filled, *twin, cv::NORM_INF), 0) << name << " on " << r["device"];
  }
}

}  // namespace
}  // namespace framemill::testing
