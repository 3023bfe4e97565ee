// The audio_sync stage on real media with the real models (Silero VAD, BlazeFace,
// facemesh): clips made with ffmpeg at test time whose offsets are known by construction.
// - Flashes and beeps at irregular times, the sound shifted by known amounts: the absolute
//   offset within one frame.
// - Megamind.avi (opencv-doc: animated dialogue with speech), its sound re-encoded shifted
//   by -400, -200, +120 and +300 ms (no edit list: the shift is in the samples): the estimate
//   moves by the shift within one frame period (42 ms at 23.98 fps).
// - Real sound with no speaking face, no sound, silence, a damaged file: an answer with
//   the reason, never a crash.
#include "stages/audio_sync_stage.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

namespace fs = std::filesystem;
using testing::JobFor;

constexpr const char* kFfmpeg = "/usr/bin/ffmpeg";

void Ffmpeg(std::vector<std::string> args) {
  args.insert(args.begin(), {kFfmpeg, "-v", "error", "-y"});
  auto r = testing::RunProcess(args, {}, "/");
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

// The sound of `src` shifted by `shift_ms` (positive: later), video copied, audio re-encoded
// as PCM: the container declares no offset.
std::string Shifted(const testing::TempDir& dir, const std::string& src, int shift_ms, const std::string& ext) {
  const std::string out = dir / ("shift" + std::to_string(shift_ms) + "." + ext);
  char trim[64];
  std::snprintf(trim, sizeof trim, "atrim=start=%.3f,asetpts=PTS-STARTPTS", -shift_ms / 1000.0);
  const std::string filter = shift_ms >= 0 ? "adelay=" + std::to_string(shift_ms) + ":all=1" : trim;
  Ffmpeg({"-i", src, "-c:v", "copy", "-af", filter, "-c:a", "pcm_s16le", out});
  return out;
}

// 11 s at 25 fps: a white frame for 80 ms and a 1 kHz beep for 50 ms starting together at
// irregular times, on black and silence.
std::string FlashesAndBeeps(const testing::TempDir& dir) {
  const std::vector<double> at = {1.0, 1.7, 2.9, 3.4, 4.8, 5.5, 6.1, 7.6, 8.2, 9.5};
  std::string video, audio;
  char b[96];
  for (double t : at) {
    std::snprintf(b, sizeof b, "%sbetween(t,%.2f,%.2f)", video.empty() ? "" : "+", t, t + 0.079);
    video += b;
    std::snprintf(b, sizeof b, "%sbetween(t,%.2f,%.2f)", audio.empty() ? "" : "+", t, t + 0.05);
    audio += b;
  }
  const std::string out = dir / "flashes.mkv";
  Ffmpeg({"-f", "lavfi", "-i", "color=c=black:s=320x240:r=25:d=11", "-f", "lavfi", "-i",
          "aevalsrc='0.5*sin(2*PI*1000*t)*(" + audio + ")':s=48000:d=11", "-vf",
          "drawbox=x=0:y=0:w=iw:h=ih:color=white:t=fill:enable='" + video + "'", "-c:v", "libx264",
          "-pix_fmt", "yuv420p", "-c:a", "pcm_s16le", out});
  return out;
}

class AudioSyncStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* m : {"silero-vad", "blazeface", "facemesh"}) {
      FM_LOAD_MODEL_OR_SKIP(man, m);
      (void)man;
    }
    stage_ = std::make_unique<AudioSyncStage>(std::make_shared<models::ModelCache>(testing::ModelsDir()),
                                              AudioSyncOptions{}, dir_ / "out");
  }
  Outcome Run(const std::string& path, MediaKind kind = MediaKind::kVideo) {
    return stage_->Run(JobFor("audio_sync", path, kind, ++item_));
  }
  static double Offset(const Outcome& o) { return o.result["offset_ms"].get<double>(); }

  testing::TempDir dir_;
  std::unique_ptr<AudioSyncStage> stage_;
  int64_t item_ = 0;
};

TEST_F(AudioSyncStageTest, FlashesAndBeepsAreTimedWithinAFrame) {
  const std::string base = FlashesAndBeeps(dir_);
  for (int shift : {0, 120, -200, 40}) {
    const Outcome o = Run(shift == 0 ? base : Shifted(dir_, base, shift, "mkv"));
    ASSERT_EQ(o.kind, Outcome::Kind::kDone) << o.error.ToString();
    std::printf("[audio_sync] flashes shift %+d ms: %s\n", shift, o.result.dump().c_str());
    EXPECT_NEAR(Offset(o), shift, 40.0) << o.result.dump();  // one frame at 25 fps
    EXPECT_EQ(o.result["signal"], "onset+frame");
    EXPECT_GT(o.result["confidence"].get<double>(), 0.5);
    EXPECT_FALSE(o.result.contains("low_confidence"));
    EXPECT_EQ(o.result["container_offset_ms"].get<double>(), 0.0);
    ASSERT_EQ(o.artifacts.size(), 1u);
    EXPECT_TRUE(fs::exists(o.artifacts[0]));
  }
}

TEST_F(AudioSyncStageTest, ADeclaredOffsetIsReportedAndPartOfWhatAPlayerShows) {
  const std::string base = FlashesAndBeeps(dir_);
  const std::string late = dir_ / "declared.mkv";
  // The same samples, declared 0.3 s late by the container (-itsoffset).
  Ffmpeg({"-i", base, "-itsoffset", "0.3", "-i", base, "-map", "0:v", "-map", "1:a", "-c", "copy", late});
  const Outcome o = Run(late);
  ASSERT_EQ(o.kind, Outcome::Kind::kDone) << o.error.ToString();
  EXPECT_NEAR(o.result["container_offset_ms"].get<double>(), 300, 1);
  EXPECT_NEAR(Offset(o), 300, 40) << o.result.dump();
}

TEST_F(AudioSyncStageTest, MegamindsEstimateMovesWithTheShiftOfItsSound) {
  // The base: Megamind's own sound re-encoded the same way, unshifted.
  // Its first 6.5 s (issue 48: shorter clips, the same assertions). Measured on the 2-core VM
  // (2026-11-29): the whole 11.2 s clip moved by -397.7, -205.1, +120.0 and +300.0 ms for the
  // four shifts in 23.4 s; its first 6.5 s by -408.3, -202.1, +120.0 and +300.0 ms in 15.8 s,
  // each within 9 ms of its shift (the bound is 42).
  const std::string first = dir_ / "megamind-first.avi";
  Ffmpeg({"-i", testing::SampleData("Megamind.avi"), "-t", "6.5", "-c", "copy", first});
  const std::string base = Shifted(dir_, first, 0, "avi");
  const Outcome o0 = Run(base);
  ASSERT_EQ(o0.kind, Outcome::Kind::kDone) << o0.error.ToString();
  std::printf("[audio_sync] Megamind: %s\n", o0.result.dump().c_str());
  EXPECT_EQ(o0.result["signal"], "energy+mouth") << "faces with a mouth in nearly every frame";
  EXPECT_GT(o0.result["face_fraction"].get<double>(), 0.9);
  EXPECT_LT(std::fabs(Offset(o0)), 200) << "the animators' lips are not far off";
  for (int shift : {-400, -200, 120, 300}) {
    const Outcome o = Run(Shifted(dir_, base, shift, "avi"));
    ASSERT_EQ(o.kind, Outcome::Kind::kDone) << o.error.ToString();
    std::printf("[audio_sync] Megamind shift %+d ms: offset %.1f ms (moved %+.1f), confidence %.3f, %s\n",
                shift, Offset(o), Offset(o) - Offset(o0), o.result["confidence"].get<double>(),
                o.result["signal"].get<std::string>().c_str());
    EXPECT_NEAR(Offset(o) - Offset(o0), shift, 42.0) << o.result.dump();
    EXPECT_EQ(o.result["signal"], o0.result["signal"]);
  }
}

TEST_F(AudioSyncStageTest, NoSoundSilenceAndStillImagesAreSkippedWithTheReason) {
  const Outcome silent_video = Run(testing::SampleData("vtest.avi"));
  EXPECT_EQ(silent_video.kind, Outcome::Kind::kSkipped);
  EXPECT_NE(silent_video.error.message().find("no audio stream"), std::string::npos)
      << silent_video.error.ToString();
  const Outcome silence = Run(testing::ImageioData("cockatoo.mp4"));  // a track of zeros
  EXPECT_EQ(silence.kind, Outcome::Kind::kSkipped);
  EXPECT_NE(silence.error.message().find("silent"), std::string::npos) << silence.error.ToString();
  const Outcome image = Run(testing::SampleData("lena.jpg"), MediaKind::kImage);
  EXPECT_EQ(image.kind, Outcome::Kind::kSkipped);
}

TEST_F(AudioSyncStageTest, RealSoundWithoutASpeakingFaceGetsALowConfidenceAnswer) {
  std::vector<std::string> clips = {testing::ImageioData("realshort.mp4")};
  const std::string ts = testing::MediaDir() + "/mux.js-7.1.0/test-segment.ts";
  if (fs::exists(ts)) clips.push_back(ts);
  else if (testing::ModelsRequired()) ADD_FAILURE() << "run tools/media/fetch_media.sh: no " << ts;
  for (const std::string& clip : clips) {
    const Outcome o = Run(clip);
    std::printf("[audio_sync] %s: %s\n", fs::path(clip).filename().c_str(), o.result.dump().c_str());
    ASSERT_EQ(o.kind, Outcome::Kind::kDone) << clip << ": " << o.error.ToString();
    EXPECT_TRUE(o.result.value("low_confidence", false)) << o.result.dump();
    EXPECT_FALSE(o.result["reason"].get<std::string>().empty());
    EXPECT_LT(o.result["confidence"].get<double>(), 0.25);
  }
}

TEST_F(AudioSyncStageTest, ADamagedFileEndsItsJobWithAReason) {
  const std::string cut = dir_ / "cut.avi";
  testing::WriteTruncated(testing::SampleData("Megamind.avi"), cut, 0.02);
  const Outcome o = Run(cut);
  EXPECT_NE(o.kind, Outcome::Kind::kDone);
  EXPECT_FALSE(o.error.message().empty());
  const std::string text = dir_ / "not-a-video.mp4";
  testing::WriteFile(text, "this is not a video");
  const Outcome t = Run(text);
  EXPECT_EQ(t.kind, Outcome::Kind::kFailed);
  EXPECT_FALSE(t.error.message().empty());
}

}  // namespace
}  // namespace framemill
