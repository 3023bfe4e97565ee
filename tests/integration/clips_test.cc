// The clips stage through the binary, on Debian's sample videos: every shot motion found
// is a clip file whose frames are the shot's, a short shot is listed with the reason, a
// still image is skipped; and a run killed while a clip is being written, then rerun,
// gives each clip once, byte for byte as a run that was not killed.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "tests/support/export_rows.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

namespace fs = std::filesystem;

// The sample videos (and a still) in dir/media; the environment of a run over them.
std::map<std::string, std::string> EnqueueSampleVideos(const TempDir& dir) {
  const std::string media = dir / "media";
  fs::create_directories(media);
  for (const char* v : {"vtest.avi", "Megamind.avi"}) fs::copy_file(SampleData(v), media + "/" + v);
  fs::copy_file(ImageioData("cockatoo.mp4"), media + "/cockatoo.mp4");
  fs::copy_file(SampleData("messi5.jpg"), media + "/still.jpg");
  std::map<std::string, std::string> env = {{"FRAMEMILL_DB", dir / "fm.db"},
                                            {"FRAMEMILL_OUT", dir / "out"},
                                            {"FRAMEMILL_STAGES", "clips"}};
  EXPECT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path()).exit_code, 0);
  return env;
}

// Frames of a video file as ffprobe counts them by decoding.
int64_t DecodedFrames(const std::string& path) {
  auto r = RunProcess({"/usr/bin/ffprobe", "-v", "error", "-count_frames", "-select_streams", "v",
                       "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return std::atoll(r.out.c_str());
}

// Clip bytes by (item file name, first frame).
std::map<std::pair<std::string, int64_t>, std::string> ClipBytes(const std::vector<nlohmann::json>& rows) {
  std::map<std::pair<std::string, int64_t>, std::string> out;
  for (const auto& row : rows)
    for (const auto& c : row["result"]["clips"])
      out[{fs::path(row["item"].get<std::string>()).filename().string(), c["start_frame"].get<int64_t>()}] =
          ReadFile(c["artifact"].get<std::string>());
  return out;
}

// Every file under out/clips, relative names.
std::set<std::string> FilesUnder(const std::string& dir) {
  std::set<std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.insert(e.path().string());
  return out;
}

TEST(ClipsBinaryTest, EveryShotOfTheSampleVideosIsAClipFileHoldingItsFrames) {
  TempDir dir;
  auto env = EnqueueSampleVideos(dir);
  auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, dir.path(), 300);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::map<std::string, nlohmann::json> motion, clips;
  for (const auto& row : ExportRows(env, dir.path(), "motion"))
    motion[fs::path(row["item"].get<std::string>()).filename().string()] = row["result"];
  for (const auto& row : ExportRows(env, dir.path(), "clips"))
    clips[fs::path(row["item"].get<std::string>()).filename().string()] = row["result"];
  ASSERT_EQ(clips.size(), 3u);  // the still image has no clips job done
  std::set<std::string> artifacts;
  for (const auto& [name, r] : clips) {
    SCOPED_TRACE(name);
    const nlohmann::json& m = motion.at(name);
    // Every frame of every shot is in a clip or in a dropped span, once.
    int64_t covered = 0;
    for (const auto& c : r["clips"]) covered += c["end_frame"].get<int64_t>() - c["start_frame"].get<int64_t>();
    for (const auto& d : r["dropped"]) covered += d["end_frame"].get<int64_t>() - d["start_frame"].get<int64_t>();
    EXPECT_EQ(covered, m["shots"].back()["end"].get<int64_t>());
    for (const auto& c : r["clips"]) {
      const std::string path = c["artifact"];
      artifacts.insert(path);
      const int64_t frames = c["end_frame"].get<int64_t>() - c["start_frame"].get<int64_t>();
      EXPECT_EQ(c["frames"].get<int64_t>(), frames);
      EXPECT_EQ(DecodedFrames(path), frames) << path;
      EXPECT_EQ(c["bytes"].get<int64_t>(), static_cast<int64_t>(fs::file_size(path)));
      EXPECT_LE(c["end_s"].get<double>() - c["start_s"].get<double>(), 60.0 + 1e-6);  // clips.max_s
      EXPECT_GE(c["end_s"].get<double>() - c["start_s"].get<double>(), 2.0 - 1e-6);   // clips.min_s
      EXPECT_EQ(c["codec"], "h264");
      EXPECT_TRUE(c["motion"]["camera"].contains("label"));
      // Inside one shot of motion's.
      bool inside = false;
      for (const auto& s : m["shots"])
        inside = inside || (s["start"].get<int64_t>() <= c["start_frame"].get<int64_t>() &&
                            c["end_frame"].get<int64_t>() <= s["end"].get<int64_t>());
      EXPECT_TRUE(inside) << c.dump();
    }
  }
  // vtest.avi: one shot of 79.5 s, two clips of at most 60 s. Megamind: its cuts at 98, 154
  // and 200, the shot 154-200 (1.9 s) left out.
  EXPECT_EQ(clips["vtest.avi"]["clips"].size(), 2u);
  EXPECT_FALSE(clips["vtest.avi"]["clips"][0]["has_audio"].get<bool>());
  EXPECT_TRUE(clips["Megamind.avi"]["clips"][0]["has_audio"].get<bool>());
  ASSERT_EQ(clips["Megamind.avi"]["dropped"].size(), 1u);
  EXPECT_NE(clips["Megamind.avi"]["dropped"][0]["reason"].get<std::string>().find("clips.min_s"),
            std::string::npos);
  // Nothing else under out/clips: no temporary, no other attempt's file.
  EXPECT_EQ(FilesUnder(dir / "out/clips"), artifacts);
  auto status = RunProcess({FRAMEMILL_BIN, "status", "--json"}, env, dir.path());
  const auto st = nlohmann::json::parse(status.out);
  EXPECT_EQ(st["stages"]["clips"]["done"], 3);
  EXPECT_EQ(st["stages"]["clips"]["skipped"], 1);
}

TEST(ClipsBinaryTest, AKillWhileAClipIsWrittenThenARerunMakesEachClipOnceAndTheSameBytes) {
  TempDir whole, killed;
  auto env_whole = EnqueueSampleVideos(whole);
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "run", "--workers", "1"}, env_whole, whole.path(), 300).exit_code, 0);
  const auto expected = ClipBytes(ExportRows(env_whole, whole.path(), "clips"));
  ASSERT_EQ(expected.size(), 6u);

  auto env = EnqueueSampleVideos(killed);
  const std::string out = killed / "out/clips";
  const pid_t pid = StartProcess({FRAMEMILL_BIN, "run", "--workers", "1"}, env, killed.path(), killed / "run.log");
  // A clip in hand: its temporary is there, and at least one clip before it is whole.
  const bool caught = WaitUntil([&] {
    int tmp = 0, whole_files = 0;
    for (const std::string& f : FilesUnder(out)) (f.find(".tmp") != std::string::npos ? tmp : whole_files)++;
    return tmp > 0 && whole_files > 0;
  }, 120);
  SignalTree(pid, SIGKILL);
  WaitProcess(pid);
  ASSERT_TRUE(caught) << ReadFile(killed / "run.log");
  auto rerun = RunProcess({FRAMEMILL_BIN, "run", "--workers", "1"}, env, killed.path(), 300);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  const auto rows = ExportRows(env, killed.path(), "clips");
  const auto got = ClipBytes(rows);
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [key, bytes] : expected) {
    ASSERT_TRUE(got.count(key)) << key.first << " " << key.second;
    EXPECT_TRUE(got.at(key) == bytes) << key.first << " from frame " << key.second << " differs";
  }
  std::set<std::string> artifacts;
  for (const auto& row : rows)
    for (const auto& c : row["result"]["clips"]) artifacts.insert(c["artifact"].get<std::string>());
  EXPECT_EQ(FilesUnder(out), artifacts) << "a half clip or another attempt's clip was left";
}

}  // namespace
}  // namespace framemill::testing
