// The clips stage through the binary, on Debian's sample videos: every shot motion found
// is a clip file whose frames are the shot's, a short shot is listed with the reason, a
// still image is skipped; and a run killed while a clip is being written, then rerun,
// gives each clip once, byte for byte as a run that was not killed.
#include <gtest/gtest.h>

#include <signal.h>

#include <cstring>
#include <iostream>
#include <random>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/support/export_rows.h"
#include "tests/support/model_test_support.h"
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

// A stale worker killed after renaming its clips, before its completion was refused, leaves
// them to no one: gc removes the clip files no done clips job lists, and nothing else.
TEST(ClipsBinaryTest, GcRemovesClipFilesNoDoneJobListsAndKeepsTheRest) {
  TempDir dir;
  const std::string media = dir / "media";
  fs::create_directories(media);
  fs::copy_file(ImageioData("cockatoo.mp4"), media + "/cockatoo.mp4");
  const std::map<std::string, std::string> env = {
      {"FRAMEMILL_DB", dir / "fm.db"}, {"FRAMEMILL_OUT", dir / "out"}, {"FRAMEMILL_STAGES", "clips"}};
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path()).exit_code, 0);
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "run", "--workers", "1"}, env, dir.path(), 300).exit_code, 0);
  std::set<std::string> artifacts;
  for (const auto& row : ExportRows(env, dir.path(), "clips"))
    for (const auto& c : row["result"]["clips"]) artifacts.insert(c["artifact"].get<std::string>());
  ASSERT_FALSE(artifacts.empty());
  const fs::path item_dir = fs::path(*artifacts.begin()).parent_path();
  const std::string item = item_dir.filename().string();
  // A stale attempt's clip and its temporary; beside them what is not a clip of this item, and
  // a clip of an item with no done clips job: these stay.
  const std::set<std::string> stale = {item_dir / (item + "-f12-00000000deadbeef.mp4"),
                                       item_dir / (item + "-f40-00000000deadbeef.mp4.tmp.77")};
  const std::set<std::string> others = {item_dir / "notes.txt", item_dir / (item + "-f12-00000000deadbeef.json"),
                                        dir / "out/clips/999/999-f0-00000000deadbeef.mp4"};
  for (const std::string& f : stale) fs::copy_file(*artifacts.begin(), f);
  for (const std::string& f : others) {
    fs::create_directories(fs::path(f).parent_path());
    fs::copy_file(*artifacts.begin(), f);
  }
  std::set<std::string> all = artifacts;
  all.insert(stale.begin(), stale.end());
  all.insert(others.begin(), others.end());

  auto dry = RunProcess({FRAMEMILL_BIN, "gc", "--dry-run"}, env, dir.path());
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("would remove 2 clip file(s) that no done clips job lists (dry run)"), std::string::npos)
      << dry.out;
  EXPECT_EQ(FilesUnder(dir / "out/clips"), all);
  auto gc = RunProcess({FRAMEMILL_BIN, "gc"}, env, dir.path());
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_NE(gc.out.find("removed 2 clip file(s) that no done clips job lists"), std::string::npos) << gc.out;
  std::set<std::string> kept = artifacts;
  kept.insert(others.begin(), others.end());
  EXPECT_EQ(FilesUnder(dir / "out/clips"), kept);
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

// Overwrites the last two thirds of packets `which` (decoding order) of the video stream with
// bytes from a seeded generator: broken packets in the middle of a file that still opens.
void BreakPackets(const std::string& path, const std::vector<size_t>& which, uint32_t seed) {
  std::cout << "BreakPackets " << path << ": seed " << seed << "\n";
  auto probe = RunProcess({"/usr/bin/ffprobe", "-v", "error", "-select_streams", "v", "-show_entries",
                           "packet=pos,size", "-of", "json", path});
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  const auto packets = nlohmann::json::parse(probe.out)["packets"];
  std::string bytes = ReadFile(path);
  std::mt19937 rng(seed);
  for (size_t k : which) {
    const auto pos = std::stoll(packets[k]["pos"].get<std::string>());
    const auto size = std::stoll(packets[k]["size"].get<std::string>());
    for (int64_t b = pos + size / 3; b < pos + size; ++b) bytes[size_t(b)] = char(rng() & 0xFF);
  }
  WriteFile(path, bytes);
}

// Overwrites a Matroska file's segment duration (the float after EBML id 0x4489) with `ms`.
void SetMatroskaDuration(const std::string& path, double ms) {
  std::string bytes = ReadFile(path);
  const size_t at = bytes.find("\x44\x89\x88");
  ASSERT_NE(at, std::string::npos) << "no 8-byte Duration element in " << path;
  uint64_t bits;
  std::memcpy(&bits, &ms, 8);
  for (int i = 0; i < 8; ++i) bytes[at + 3 + size_t(i)] = char(bits >> (56 - 8 * i));
  WriteFile(path, bytes);
}

// The result of `stage` for each item, by file name.
std::map<std::string, nlohmann::json> ResultsByFile(const std::map<std::string, std::string>& env,
                                                    const std::string& dir, const std::string& stage) {
  std::map<std::string, nlohmann::json> out;
  for (const auto& row : ExportRows(env, dir, stage))
    out[fs::path(row["item"].get<std::string>()).filename().string()] = row["result"];
  return out;
}

// Runs `stages` over `media` in a store of its own (named `name`) with `more` in the environment.
std::map<std::string, std::string> RunOver(const TempDir& dir, const std::string& media, const std::string& name,
                                           const std::string& stages, std::map<std::string, std::string> more = {}) {
  more["FRAMEMILL_DB"] = dir / (name + ".db");
  more["FRAMEMILL_OUT"] = dir / (name + "-out");
  more["FRAMEMILL_STAGES"] = stages;
  EXPECT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, more, dir.path()).exit_code, 0);
  auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, more, dir.path(), 300);
  EXPECT_NE(run.exit_code, -1) << "the run hung";
  return more;
}

std::vector<std::pair<int64_t, int64_t>> Spans(const nlohmann::json& list) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& c : list) out.emplace_back(c["start_frame"].get<int64_t>(), c["end_frame"].get<int64_t>());
  return out;
}

TEST(ClipsBinaryTest, BrokenPacketsAreLeftOutOfClipsToTheNextKeyframe) {
  TempDir dir;
  const std::string media = dir / "media";
  fs::create_directories(media);
  // vtest.avi's first 200 frames as H.264, a keyframe every 50, then packets 60-62 broken.
  Ffmpeg(media, "broken.mp4", {"-i", SampleData("vtest.avi"), "-frames:v", "200", "-c:v", "libx264",
                               "-g", "50", "-bf", "0"});
  BreakPackets(media + "/broken.mp4", {60, 61, 62}, 7);
  auto env = RunOver(dir, media, "encode", "clips");
  const nlohmann::json motion = ResultsByFile(env, dir.path(), "motion")["broken.mp4"];
  ASSERT_TRUE(motion.contains("damaged_frames")) << motion.dump();
  ASSERT_EQ(motion["damaged_frames"].size(), 1u) << motion.dump();
  const int64_t first = motion["damaged_frames"][0][0], last = motion["damaged_frames"][0][1];
  EXPECT_GE(first, 60);
  EXPECT_LE(first, 62);
  EXPECT_EQ(last, 99);  // the damage lasts to the keyframe at 100
  const nlohmann::json clips = ResultsByFile(env, dir.path(), "clips")["broken.mp4"];
  EXPECT_EQ(Spans(clips["clips"]), (std::vector<std::pair<int64_t, int64_t>>{{0, first}, {100, 200}}));
  ASSERT_EQ(Spans(clips["dropped"]), (std::vector<std::pair<int64_t, int64_t>>{{first, 100}}));
  EXPECT_NE(clips["dropped"][0]["reason"].get<std::string>().find("broken packets"), std::string::npos);
  for (const auto& c : clips["clips"]) EXPECT_EQ(DecodedFrames(c["artifact"]), c["frames"].get<int64_t>());
}

TEST(ClipsBinaryTest, CopyModeStartsAtAKeyframeAndSaysWhenAShotHasNoneOrTooLittleAfterIt) {
  TempDir dir;
  const std::string media = dir / "media";
  fs::create_directories(media);
  // Two shots of 100 frames (testsrc, then mandelbrot), one keyframe at frame 0 only; and
  // the same with one more keyframe at 185, 0.6 s before the end.
  const std::vector<std::string> two_shots = {
      "-f", "lavfi", "-i", "testsrc=s=320x240:r=25:d=4", "-f", "lavfi", "-i", "mandelbrot=s=320x240:r=25",
      "-filter_complex", "[1:v]trim=duration=4,setpts=PTS-STARTPTS[m];[0:v][m]concat=n=2:v=1[v]",
      "-map", "[v]", "-c:v", "libx264", "-g", "1000", "-keyint_min", "1000", "-sc_threshold", "0"};
  auto with = [&](std::vector<std::string> more) { more.insert(more.begin(), two_shots.begin(), two_shots.end()); return more; };
  Ffmpeg(media, "no-keyframe.mp4", with({}));
  Ffmpeg(media, "late-keyframe.mp4", with({"-force_key_frames", "expr:eq(n,0)+eq(n,185)"}));
  auto env = RunOver(dir, media, "copy", "clips", {{"FRAMEMILL_CLIPS_MODE", "copy"}});
  auto results = ResultsByFile(env, dir.path(), "clips");
  for (const char* file : {"no-keyframe.mp4", "late-keyframe.mp4"}) {
    SCOPED_TRACE(file);
    const nlohmann::json& r = results[file];
    EXPECT_EQ(Spans(r["clips"]), (std::vector<std::pair<int64_t, int64_t>>{{0, 100}}));
    ASSERT_EQ(Spans(r["dropped"]), (std::vector<std::pair<int64_t, int64_t>>{{100, 200}}));
    const std::string reason = r["dropped"][0]["reason"];
    if (std::string(file) == "no-keyframe.mp4")
      EXPECT_NE(reason.find("no keyframe inside the span"), std::string::npos) << reason;
    else
      EXPECT_NE(reason.find("the first keyframe inside the span is frame 185; the 0.60 s"), std::string::npos) << reason;
  }
  EXPECT_EQ(FilesUnder(env["FRAMEMILL_OUT"] + "/clips").size(), 2u);  // the two first shots' clips only
}

TEST(ClipsBinaryTest, AContainerWhoseDurationLiesIsAnalysedByItsFrames) {
  TempDir dir;
  const std::string media = dir / "media";
  fs::create_directories(media);
  // 150 frames (6 s) in Matroska, whose header then says 3,600 s, or 0.5 s.
  for (const auto& [name, ms] : std::vector<std::pair<std::string, double>>{{"says-an-hour.mkv", 3.6e6},
                                                                            {"says-half-a-second.mkv", 500}}) {
    Ffmpeg(media, name, {"-f", "lavfi", "-i", "testsrc=s=320x240:r=25:d=6", "-f", "lavfi", "-i", "sine=d=6",
                         "-c:v", "libx264", "-c:a", "aac"});
    SetMatroskaDuration(media + "/" + name, ms);
  }
  // Pose reads in order, thinned to a rate from the declared length (ReadVideoInOrder).
  const bool pose = ModelsRequired() || fs::exists(ModelsDir() + "/movenet-multipose/manifest.json");
  auto env = RunOver(dir, media, "encode", pose ? "clips,lighting,pose" : "clips,lighting",
                     {{"FRAMEMILL_MODELS", ModelsDir()}});
  auto motion = ResultsByFile(env, dir.path(), "motion");
  auto clips = ResultsByFile(env, dir.path(), "clips");
  auto lighting = ResultsByFile(env, dir.path(), "lighting");
  for (const auto& [name, declared] : std::vector<std::pair<std::string, int64_t>>{{"says-an-hour.mkv", 90000},
                                                                                  {"says-half-a-second.mkv", 12}}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(motion[name]["frames"], 150);
    EXPECT_NEAR(motion[name].value("declared_frames", -1.0), double(declared), 1.0);  // duration x fps
    ASSERT_EQ(clips[name]["clips"].size(), 1u) << clips[name].dump();
    const auto& clip = clips[name]["clips"][0];
    EXPECT_EQ(clip["end_frame"], 150);
    EXPECT_NEAR(clip["end_s"].get<double>(), 6.0, 0.05);
    EXPECT_EQ(DecodedFrames(clip["artifact"]), 150);
    ASSERT_FALSE(lighting[name].is_null()) << "lighting failed on " << name;
  }
  // The lighting stage samples the frames there are, and says what the header claimed.
  EXPECT_EQ(lighting["says-an-hour.mkv"]["media"]["frames"], 150);
  EXPECT_NEAR(lighting["says-an-hour.mkv"]["media"].value("declared_frames", -1.0), 90000, 1.0);
  if (!pose) GTEST_SKIP() << "pose's model is not installed in " << ModelsDir() << "; the rest passed";
  // Both are read over their 6 s: the same frames, the first and the last second among them.
  auto poses = ResultsByFile(env, dir.path(), "pose");
  std::vector<int64_t> frames[2];
  int k = 0;
  for (const char* name : {"says-an-hour.mkv", "says-half-a-second.mkv"}) {
    SCOPED_TRACE(name);
    for (const auto& f : poses[name]["frames"]) frames[k].push_back(f["frame"].get<int64_t>());
    ASSERT_GE(frames[k].size(), 10u) << poses[name].dump().substr(0, 400);
    EXPECT_LT(frames[k].front(), 25);
    EXPECT_GE(frames[k].back(), 125);
    EXPECT_EQ(poses[name]["media"]["frames"], 150);
    ++k;
  }
  EXPECT_EQ(frames[0], frames[1]);
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

// Above motion.max_fps (30) the stage analyses 30 frames a second of the source's 50 or 60;
// a cut on a frame it does not analyse is still placed on that frame, so the clip before it
// holds none of the next shot (it used to end one frame into it). vtest's street (101 frames)
// then cockatoo.mp4 (140), each source frame one output frame: the cut is frame 101, skipped
// at 60 frames/s (every other frame analysed).
TEST(ClipsBinaryTest, AtFiftyAndSixtyFramesASecondACutIsOnItsExactFrame) {
  TempDir dir;
  const std::string media = dir / "media";
  fs::create_directories(media);
  constexpr int64_t kCut = 101, kFrames = 241;
  for (const std::string fps : {"50", "60"}) {
    const std::string graph =
        "[0:v]trim=start_frame=100:end_frame=201,setpts=PTS-STARTPTS,scale=640:360,setsar=1,fps=10[a];"
        "[1:v]trim=end_frame=140,scale=640:360,setsar=1[b];[a]settb=1/" + fps + ",setpts=N[a2];[b]settb=1/" +
        fps + ",setpts=N[b2];[a2][b2]concat=n=2:v=1:a=0,format=yuv420p";
    Ffmpeg(media, "cut-" + fps + ".mp4",
           {"-i", SampleData("vtest.avi"), "-i", ImageioData("cockatoo.mp4"), "-filter_complex", graph,
            "-fps_mode", "passthrough", "-r", fps, "-c:v", "libx264", "-preset", "veryfast", "-crf", "18"});
  }
  // 101 frames at 60 frames/s are 1.68 s: clips.min_s (2 s) would drop the first shot's clip.
  auto env = RunOver(dir, media, "fps", "clips", {{"FRAMEMILL_CLIPS_MIN_S", "1"}});
  const auto motion = ResultsByFile(env, dir.path(), "motion");
  const auto clips = ResultsByFile(env, dir.path(), "clips");
  for (const std::string name : {"cut-50.mp4", "cut-60.mp4"}) {
    ASSERT_EQ(motion.count(name), 1u) << name;
    const nlohmann::json& m = motion.at(name);
    EXPECT_EQ(m["frames"].get<int64_t>(), kFrames) << name;
    EXPECT_LE(m["frames_analysed"].get<int64_t>(), kFrames * 30 / 50 + 1) << name;  // max_fps 30
    EXPECT_EQ(m["cuts"], nlohmann::json::array({kCut})) << name << ": " << m["cuts"].dump();
    ASSERT_EQ(clips.count(name), 1u) << name;
    const auto spans = Spans(clips.at(name)["clips"]);
    ASSERT_EQ(spans.size(), 2u) << clips.at(name).dump();
    EXPECT_EQ(spans[0], std::make_pair(int64_t(0), kCut)) << name;
    EXPECT_EQ(spans[1].first, kCut) << name;
    EXPECT_EQ(DecodedFrames(clips.at(name)["clips"][0]["artifact"].get<std::string>()), kCut) << name;
  }
}

}  // namespace
}  // namespace framemill::testing
