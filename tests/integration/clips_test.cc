// The clips stage through the binary, on Debian's sample videos: every shot motion found
// is a clip file whose frames are the shot's, a short shot is listed with the reason, a
// still image is skipped; and a run killed while a clip is being written, then rerun,
// gives each clip once, byte for byte as a run that was not killed.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

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

// Each line of `text` parsed as JSON.
std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(ClipsBinaryTest, ExportClipsWritesARecordPerClipAndWebDatasetSamplesTarAndFfprobeRead) {
  TempDir dir;
  auto env = EnqueueSampleVideos(dir);
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, dir.path(), 300).exit_code, 0);
  auto all = RunProcess({FRAMEMILL_BIN, "export", "--clips"}, env, dir.path());
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const auto records = JsonLines(all.out);
  int64_t clips = 0;
  for (const auto& row : ExportRows(env, dir.path(), "clips")) {
    clips += row["result"]["clips"].size();
    for (const auto& c : row["result"]["clips"]) {  // the per-job export carries the contents too
      EXPECT_TRUE(c.contains("labels") && c["labels"].is_null()) << c;
      EXPECT_TRUE(c.contains("faces") && c.contains("people") && c.contains("analysed")) << c;
    }
  }
  ASSERT_EQ(int64_t(records.size()), clips);
  for (const auto& r : records) {
    EXPECT_TRUE(r["faces"].is_null()) << r;  // faces did not run: said, not guessed
    EXPECT_TRUE(r["analysed"].empty()) << r;
  }
  // Per-clip filters: vtest.avi's fixed camera is the only static one; none is 60 s long.
  auto statics = JsonLines(RunProcess({FRAMEMILL_BIN, "export", "--clips", "--camera", "static"}, env, dir.path()).out);
  ASSERT_FALSE(statics.empty());
  for (const auto& r : statics) EXPECT_EQ(r["motion"]["camera"]["label"], "static");
  EXPECT_TRUE(RunProcess({FRAMEMILL_BIN, "export", "--clips", "--min-duration", "60"}, env, dir.path()).out.empty());
  EXPECT_TRUE(RunProcess({FRAMEMILL_BIN, "export", "--clips", "--faces", "1"}, env, dir.path()).out.empty());
  EXPECT_EQ(RunProcess({FRAMEMILL_BIN, "export", "--min-duration", "2"}, env, dir.path()).exit_code, 2);
  // WebDataset: <key>.mp4 byte for byte the clip, <key>.json its record; the same keys twice.
  const std::string shards = dir / "shards";
  auto wds = RunProcess({FRAMEMILL_BIN, "export", "--clips", "--format", "webdataset", "-o", shards}, env, dir.path());
  ASSERT_EQ(wds.exit_code, 0) << wds.err;
  const std::string unpacked = dir / "unpacked";
  fs::create_directories(unpacked);
  ASSERT_EQ(RunProcess({"/usr/bin/tar", "-xf", shards + "/shard-000000.tar", "-C", unpacked}).exit_code, 0);
  for (const auto& r : records) {
    const std::string key = r["key"];
    SCOPED_TRACE(key);
    EXPECT_EQ(ReadFile(unpacked + "/" + key + ".mp4"), ReadFile(r["artifact"]));
    EXPECT_EQ(DecodedFrames(unpacked + "/" + key + ".mp4"), r["end_frame"].get<int64_t>() - r["start_frame"].get<int64_t>());
    const auto meta = nlohmann::json::parse(ReadFile(unpacked + "/" + key + ".json"));
    EXPECT_EQ(meta["item"], r["item"]);
    EXPECT_EQ(meta["start_frame"], r["start_frame"]);
  }
  const auto again = JsonLines(RunProcess({FRAMEMILL_BIN, "export", "--clips"}, env, dir.path()).out);
  ASSERT_EQ(again.size(), records.size());
  for (size_t i = 0; i < again.size(); ++i) EXPECT_EQ(again[i]["key"], records[i]["key"]);
  // Counted: status --json's clips and seconds, and the report's clip strip on a video's page.
  double seconds = 0;
  for (const auto& r : records) seconds += r["end_s"].get<double>() - r["start_s"].get<double>();
  const auto status = nlohmann::json::parse(RunProcess({FRAMEMILL_BIN, "status", "--json"}, env, dir.path()).out);
  EXPECT_EQ(status["clips"]["clips"], records.size());
  EXPECT_NEAR(status["clips"]["seconds"].get<double>(), seconds, 1e-6);
  const std::string report = dir / "report";
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "report", "-o", report}, env, dir.path(), 300).exit_code, 0);
  int strips = 0, pictures = 0;
  for (const auto& e : fs::directory_iterator(report + "/items")) {
    const std::string page = ReadFile(e.path().string());
    if (page.find("<b>Clips</b>") == std::string::npos) continue;
    ++strips;
    for (size_t at = page.find("<figure class=\"clip\"><img"); at != std::string::npos;
         at = page.find("<figure class=\"clip\"><img", at + 1))
      ++pictures;
  }
  EXPECT_EQ(strips, 3);  // the three videos
  EXPECT_EQ(pictures, int(records.size()));
  EXPECT_NE(ReadFile(report + "/index.html").find("clip hours"), std::string::npos);
}

}  // namespace
}  // namespace framemill::testing

namespace framemill::testing {
namespace {

// Makes `name` in `dir` with ffmpeg from `args` (inputs and options before the output).
void Ffmpeg(const std::string& dir, const std::string& name, std::vector<std::string> args) {
  std::vector<std::string> cmd = {"/usr/bin/ffmpeg", "-v", "error", "-y"};
  cmd.insert(cmd.end(), args.begin(), args.end());
  cmd.push_back(dir + "/" + name);
  auto r = RunProcess(cmd);
  ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
}

TEST(ClipsBinaryTest, BadVideosEachEndWithTheReasonAndARotationIsKept) {
  TempDir dir;
  const std::string media = dir / "media";
  fs::create_directories(media);
  const std::vector<std::string> src = {"-f", "lavfi", "-i", "testsrc=s=320x240:r=25:d=4"};
  auto with = [&](std::vector<std::string> more) { more.insert(more.begin(), src.begin(), src.end()); return more; };
  Ffmpeg(media, "one-frame.mp4", with({"-frames:v", "1", "-c:v", "libx264"}));
  Ffmpeg(media, "audio-only.m4a", {"-f", "lavfi", "-i", "sine=d=3", "-c:a", "aac"});
  Ffmpeg(media, "vfr.mp4", {"-f", "lavfi", "-i", "testsrc=s=320x240:r=25:d=8", "-vf",
                            "setpts='if(lt(N,100),N/25,4+(N-100)/8)/TB'", "-fps_mode", "vfr", "-c:v", "libx264"});
  Ffmpeg(media, "plain.mp4", with({"-c:v", "libx264"}));
  Ffmpeg(media, "rotated.mp4", {"-i", media + "/plain.mp4", "-metadata:s:v:0", "rotate=90", "-c", "copy"});
  Ffmpeg(media, "huge.mp4", {"-f", "lavfi", "-i", "testsrc=s=8192x4352:r=5:d=1", "-c:v", "libx264", "-preset", "ultrafast"});
  WriteTruncated(media + "/plain.mp4", media + "/truncated.mp4", 0.5);
  std::map<std::string, std::string> env = {{"FRAMEMILL_DB", dir / "fm.db"}, {"FRAMEMILL_OUT", dir / "out"},
                                            {"FRAMEMILL_STAGES", "clips"}};
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path()).exit_code, 0);
  auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, dir.path(), 300);
  ASSERT_NE(run.exit_code, -1) << "the run hung";
  const std::map<std::string, std::pair<std::string, std::string>> expected = {  // file: stage, reason
      {"one-frame.mp4", {"motion", "motion needs two frames"}},
      {"audio-only.m4a", {"motion", "no decodable video stream"}},
      {"vfr.mp4", {"clips", "variable frame rate"}},
      {"huge.mp4", {"motion", "over the limit"}},
      {"truncated.mp4", {"motion", "could not open"}}};
  for (const auto& [file, want] : expected) {
    SCOPED_TRACE(file);
    const std::string sql = "select count(*) from jobs j join items i on i.id = j.item_id where i.source like '%/" +
                            file + "' and j.stage = '" + want.first + "' and j.state in (3, 4) and j.last_error like '%" +
                            want.second + "%'";
    EXPECT_EQ(QueryInt(dir / "fm.db", sql), 1);
  }
  bool rotated = false;
  for (const auto& row : ExportRows(env, dir.path(), "clips")) {
    if (fs::path(row["item"].get<std::string>()).filename() != "rotated.mp4") continue;
    ASSERT_EQ(row["result"]["clips"].size(), 1u);
    const auto& clip = row["result"]["clips"][0];
    EXPECT_EQ(clip["rotation_deg"], 90.0);
    auto probe = RunProcess({"/usr/bin/ffprobe", "-v", "error", "-show_entries", "stream_side_data=rotation",
                             "-of", "csv=p=0", clip["artifact"].get<std::string>()});
    EXPECT_NE(probe.out.find("90"), std::string::npos) << probe.out;
    rotated = true;
  }
  EXPECT_TRUE(rotated);
}

}  // namespace
}  // namespace framemill::testing
