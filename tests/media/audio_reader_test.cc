// The audio reader on real files: Megamind.avi's speech (AC-3, 48 kHz stereo), clips made
// with ffmpeg at test time with a known tone and a known declared offset, a silent video.
#include "media/audio_reader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "tests/support/test_support.h"

namespace framemill {
namespace {

using testing::SampleData;

// A 2 s 1 kHz tone in a 3 s test-pattern video, the audio declared `offset_s` late
// (ffmpeg's -itsoffset), in `container`.
std::string ToneClip(const testing::TempDir& dir, double offset_s, const std::string& container,
                     const std::string& audio_codec) {
  const std::string out = dir / ("tone." + container);
  auto r = testing::RunProcess(
      {"/usr/bin/ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
       "testsrc=size=160x120:rate=25:duration=3", "-itsoffset", std::to_string(offset_s), "-f",
       "lavfi", "-i", "sine=frequency=1000:sample_rate=44100:duration=2", "-ac", "2", "-c:v",
       "mpeg4", "-c:a", audio_codec, out},
      {}, "/");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

TEST(AudioReaderTest, MegamindsSpeechAt16kHzMono) {
  auto t = ReadAudio(SampleData("Megamind.avi"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->codec, "ac3");
  EXPECT_EQ(t->source_rate, 48000);
  EXPECT_EQ(t->source_channels, 2);
  EXPECT_EQ(t->sample_rate, 16000);
  EXPECT_NEAR(t->seconds(), 11.26, 0.1);  // ffprobe: 11.26 s
  // libav times the first decodable AC-3 frame (1536 samples, 32 ms) at 0.032 s, as ffprobe
  // -show_frames does.
  EXPECT_NEAR(t->start_offset_s, 0.032, 1e-6);
  double energy = 0, peak = 0;
  for (float v : t->samples) {
    energy += double(v) * v;
    peak = std::max(peak, double(std::fabs(v)));
  }
  EXPECT_LE(peak, 1.0);
  EXPECT_GT(std::sqrt(energy / t->samples.size()), 0.01) << "speech, not silence";
}

TEST(AudioReaderTest, AToneKeepsItsPitchAndTheDeclaredOffsetIsReported) {
  testing::TempDir dir;
  auto t = ReadAudio(ToneClip(dir, 0.5, "mp4", "aac"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->source_rate, 44100);
  EXPECT_NEAR(t->seconds(), 2.0, 0.05);
  // Declared 0.5 s late. The stream starts one AAC frame earlier (1024 samples, 23 ms: the
  // encoder's priming, which FFmpeg 5.1 decodes and times at 0.476 s, as ffprobe shows).
  EXPECT_NEAR(t->start_offset_s, 0.5 - 1024 / 44100.0, 0.001);
  // 1 kHz: 2000 zero crossings a second, counted over the middle second.
  int crossings = 0;
  for (size_t i = 8000 + 1; i < 24000; ++i)
    crossings += (t->samples[i - 1] < 0) != (t->samples[i] < 0);
  EXPECT_NEAR(crossings, 2000, 4);

  auto zero = ReadAudio(ToneClip(dir, 0.0, "mp4", "aac"));
  ASSERT_TRUE(zero.ok());
  EXPECT_NEAR(zero->start_offset_s, 0.0, 0.001);  // no offset declared: the priming is hidden
}

TEST(AudioReaderTest, ASilentVideoHasNoAudioAndAPhotoIsNotAVideo) {
  auto silent = ReadAudio(SampleData("vtest.avi"));
  ASSERT_FALSE(silent.ok());
  EXPECT_TRUE(silent.status().IsNotFound()) << silent.status().ToString();
  auto photo = ReadAudio(SampleData("messi5.jpg"));
  ASSERT_FALSE(photo.ok());
  EXPECT_EQ(photo.status().code(), Status::Code::kUnsupported) << photo.status().ToString();
}

}  // namespace
}  // namespace framemill
