// Near-duplicates as users get them: the real binary runs categorize and dedup over real
// photos and copies of them; `export --stage dedup` has the groups, `export --unique` leaves
// the copies out, and a new copy re-arms the dataset-level job, which joins it.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<json> Lines(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

// A store and a media folder of the test's own; categorize and dedup run by the binary.
class DedupBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FM_REQUIRE_MODEL("centernet");
    FM_REQUIRE_MODEL("nsfw");
    fs::create_directories(media);
  }
  ProcResult Fm(const std::vector<std::string>& args, int timeout_s = 300) {
    std::vector<std::string> argv = {FRAMEMILL_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, env, "", timeout_s);
  }
  // Enqueues the folder for dedup (and so categorize) and runs it to the end.
  void EnqueueAndRun() {
    ASSERT_EQ(Fm({"enqueue", "--stages", "dedup", media}).exit_code, 0);
    auto run = Fm({"run", "--workers", "2"}, 600);
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  // The dedup job's groups.
  json Groups() {
    auto e = Fm({"export", "--stage", "dedup"});
    EXPECT_EQ(e.exit_code, 0) << e.err;
    const auto rows = Lines(e.out);
    EXPECT_EQ(rows.size(), 1u) << e.out;
    return rows.empty() ? json::array() : rows[0]["result"]["groups"];
  }

  TempDir dir;
  const std::string media = dir / "media";
  const std::map<std::string, std::string> env = {{"FRAMEMILL_DB", dir / "fm.db"}, {"FRAMEMILL_OUT", dir / "out"},
                                                  {"FRAMEMILL_MODELS", ModelsDir()}, {"LOG_LEVEL", "warn"}};
};

TEST_F(DedupBinaryTest, CopiesAreGroupedUnderTheirOriginalAndLeftOutByUnique) {
  for (const char* name : {"messi5.jpg", "fruits.jpg", "building.jpg"}) {
    const cv::Mat im = cv::imread(SampleData(name), cv::IMREAD_COLOR);
    const std::string stem = fs::path(name).stem();
    cv::imwrite(media + "/" + stem + ".png", im);
    if (stem == "building") continue;  // no copy: unique
    cv::Mat half;
    cv::resize(im, half, cv::Size(im.cols / 2, im.rows / 2), 0, 0, cv::INTER_AREA);
    cv::imwrite(media + "/" + stem + "-half.jpg", half, {cv::IMWRITE_JPEG_QUALITY, 30});
    cv::imwrite(media + "/" + stem + "-crop.jpg",
                im(cv::Rect(im.cols / 20, im.rows / 20, im.cols * 9 / 10, im.rows * 9 / 10)).clone());
  }
  ASSERT_NO_FATAL_FAILURE(EnqueueAndRun());
  const json groups = Groups();
  ASSERT_EQ(groups.size(), 2u) << groups.dump();
  for (const auto& g : groups) {
    const std::string rep = fs::path(g["representative"]["item"].get<std::string>()).filename();
    ASSERT_TRUE(rep == "messi5.png" || rep == "fruits.png") << "the largest is the original: " << g.dump();
    const std::string stem = fs::path(rep).stem();
    std::set<std::string> members;
    for (const auto& m : g["members"]) {
      members.insert(fs::path(m["item"].get<std::string>()).filename());
      EXPECT_TRUE(m["signal"] == "phash" || m["signal"] == "embedding") << m.dump();
      EXPECT_TRUE(m.contains("similarity"));
    }
    EXPECT_EQ(members, (std::set<std::string>{stem + "-half.jpg", stem + "-crop.jpg"})) << g.dump();
  }

  // --unique: every categorize row but the four copies'.
  auto unique = Fm({"export", "--stage", "categorize", "--unique"});
  ASSERT_EQ(unique.exit_code, 0) << unique.err;
  std::set<std::string> kept;
  for (const auto& row : Lines(unique.out)) kept.insert(fs::path(row["item"].get<std::string>()).filename());
  EXPECT_EQ(kept, (std::set<std::string>{"messi5.png", "fruits.png", "building.png"}));
  // And in WebDataset shards: one sample per unique item.
  auto shards = Fm({"export", "--format", "webdataset", "-o", dir / "shards", "--unique"});
  ASSERT_EQ(shards.exit_code, 0) << shards.err;
  EXPECT_NE(shards.err.find("exported 3 item(s)"), std::string::npos) << shards.err;

  // A new copy re-arms dedup, which joins it to its original's group.
  const cv::Mat building = cv::imread(media + "/building.png", cv::IMREAD_COLOR);
  cv::Mat bright;
  building.convertTo(bright, -1, 1.0, 30);
  cv::imwrite(media + "/building-bright.jpg", bright);
  ASSERT_NO_FATAL_FAILURE(EnqueueAndRun());
  const json again = Groups();
  ASSERT_EQ(again.size(), 3u) << again.dump();
  bool found = false;
  for (const auto& g : again)
    if (fs::path(g["representative"]["item"].get<std::string>()).filename() == "building.png")
      found = g["members"].size() == 1 && fs::path(g["members"][0]["item"].get<std::string>()).filename() == "building-bright.jpg";
  EXPECT_TRUE(found) << again.dump();
}

// Videos take part through categorize's sampled frames: a rescaled, re-encoded copy of a
// clip joins it; the frames of one video never make a group alone.
TEST_F(DedupBinaryTest, AVideoAndItsRescaledCopyAreOneGroup) {
  for (const auto& [name, scale] : std::vector<std::pair<std::string, std::string>>{
           {"clip.mp4", "768:576"}, {"clip-small.mp4", "384:288"}}) {
    auto r = RunProcess({"/usr/bin/ffmpeg", "-v", "error", "-y", "-i", SampleData("vtest.avi"), "-t", "4", "-vf",
                         "scale=" + scale, "-c:v", "libx264", "-preset", "ultrafast", media + "/" + name});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  cv::imwrite(media + "/fruits.png", cv::imread(SampleData("fruits.jpg"), cv::IMREAD_COLOR));
  ASSERT_NO_FATAL_FAILURE(EnqueueAndRun());
  const json groups = Groups();
  ASSERT_EQ(groups.size(), 1u) << groups.dump();
  EXPECT_EQ(fs::path(groups[0]["representative"]["item"].get<std::string>()).filename(), "clip.mp4") << groups.dump();
  ASSERT_EQ(groups[0]["members"].size(), 1u) << groups.dump();
  EXPECT_EQ(fs::path(groups[0]["members"][0]["item"].get<std::string>()).filename(), "clip-small.mp4");
  EXPECT_TRUE(groups[0]["representative"].contains("frame")) << "a video is represented by a frame";
}

// A group is a set of items (issue 40): Megamind.avi and its re-encoded copy match on
// several of their sampled frames, and make one group of the two videos, not one per frame;
// the report and `export --unique` count one copy.
TEST_F(DedupBinaryTest, AVideoMatchedOnManyFramesIsOneGroupOfItems) {
  for (const char* name : {"Megamind.avi", "Megamind_bugy.avi"})
    fs::copy_file(SampleData(name), media + "/" + name);
  cv::imwrite(media + "/fruits.png", cv::imread(SampleData("fruits.jpg"), cv::IMREAD_COLOR));
  ASSERT_NO_FATAL_FAILURE(EnqueueAndRun());
  const json groups = Groups();
  ASSERT_EQ(groups.size(), 1u) << groups.dump();
  ASSERT_EQ(groups[0]["members"].size(), 1u) << groups.dump();
  std::set<std::string> items = {fs::path(groups[0]["representative"]["item"].get<std::string>()).filename(),
                                 fs::path(groups[0]["members"][0]["item"].get<std::string>()).filename()};
  EXPECT_EQ(items, (std::set<std::string>{"Megamind.avi", "Megamind_bugy.avi"})) << groups.dump();
  auto unique = Fm({"export", "--unique", "--stage", "categorize"});
  ASSERT_EQ(unique.exit_code, 0) << unique.err;
  EXPECT_EQ(Lines(unique.out).size(), 2u) << "fruits and one of the videos:\n" << unique.out;
}

}  // namespace
}  // namespace framemill::testing
