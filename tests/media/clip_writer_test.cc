#include "media/clip_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <opencv2/core.hpp>

#include "media/audio_reader.h"
#include "media/video_reader.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

namespace fs = std::filesystem;
using testing::SampleData;
using testing::TempDir;

const std::string kVtest = SampleData("vtest.avi");        // msmpeg4v3, 795 frames at 10 fps, silent
const std::string kMegamind = SampleData("Megamind.avi");  // mpeg4 + AC-3, 270 frames at 23.976 fps
const std::string kCockatoo = testing::ImageioData("cockatoo.mp4");  // H.264 4:4:4 with B-frames, MP3

std::vector<VideoFrame> Decode(const std::string& path) {
  auto r = VideoReader::Open(path, {});
  EXPECT_TRUE(r.ok()) << path << ": " << r.status().ToString();
  std::vector<VideoFrame> frames;
  if (!r.ok()) return frames;
  for (VideoFrame f; ;) {
    auto more = (*r)->Next(&f);
    EXPECT_TRUE(more.ok()) << more.status().ToString();
    if (!more.ok() || !*more) break;
    frames.push_back({f.index, f.time_s, f.image.clone()});
  }
  return frames;
}

std::vector<ClipOutcome> Write(const std::string& source, const std::vector<ClipSpan>& spans,
                               const ClipWriteOptions& o, const std::string& dir) {
  auto r = WriteClips(source, spans, o, [&](size_t k) { return dir + "/clip" + std::to_string(k) + ".mp4"; });
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<ClipOutcome>{};
}

// Every clip of a source, in encode mode: its frame count is its span's, and its first and
// last frames are the source's at the span's ends (PSNR >= 35 dB).
void ExpectExact(const std::string& source, const std::vector<ClipOutcome>& clips) {
  const std::vector<VideoFrame> src = Decode(source);
  for (const ClipOutcome& c : clips) {
    ASSERT_TRUE(c.file) << c.reason;
    const ClipFile& f = *c.file;
    const std::vector<VideoFrame> got = Decode(f.path);
    ASSERT_EQ(int64_t(got.size()), f.span.end_frame - f.span.start_frame) << f.path;
    EXPECT_EQ(f.frames, int64_t(got.size()));
    EXPECT_EQ(f.bytes, int64_t(fs::file_size(f.path)));
    const cv::Rect crop(0, 0, f.width, f.height);  // an odd size loses its last column or row
    const double first = cv::PSNR(got.front().image, src[f.span.start_frame].image(crop));
    const double last = cv::PSNR(got.back().image, src[f.span.end_frame - 1].image(crop));
    EXPECT_GE(first, 35) << f.path;
    EXPECT_GE(last, 35) << f.path;
    // Its times start at 0, a frame apart as in the source.
    EXPECT_NEAR(got.front().time_s, 0, 1e-6);
    EXPECT_NEAR(f.start_s, src[f.span.start_frame].time_s, 1e-6);
  }
}

TEST(ClipWriterTest, EncodeGivesEachSpansExactFramesAndCutsTheLastToTheStream) {
  TempDir dir;
  const auto clips = Write(kVtest, {{0, 40}, {100, 180}, {760, 900}}, {}, dir.path());
  ASSERT_EQ(clips.size(), 3u);
  ExpectExact(kVtest, clips);
  ASSERT_TRUE(clips[2].file);
  EXPECT_EQ(clips[2].file->span, (ClipSpan{760, 795}));  // the video ends at 795
  EXPECT_NEAR(clips[2].file->end_s, 79.5, 1e-6);
  EXPECT_FALSE(clips[0].file->has_audio);
  EXPECT_EQ(clips[0].file->codec, "h264");
  EXPECT_EQ(clips[0].file->width, 768);
  // Nothing but the clips is left in the folder: no temporary.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 3);
}

TEST(ClipWriterTest, EncodeOfAFourFourFourSourceWithBFramesIsExactToo) {
  TempDir dir;
  const auto clips = Write(kCockatoo, {{5, 60}, {200, 280}}, {}, dir.path());
  ExpectExact(kCockatoo, clips);
  ASSERT_EQ(clips.size(), 2u);
  EXPECT_TRUE(clips[0].file->has_audio);
}

// In one process, again and again (a worker writes many videos' clips): libx264's AVX-512
// kernels made other bytes by the third or fourth time (media/clip_encode.cc).
TEST(ClipWriterTest, TheSameSpansMakeTheSameBytesEveryTime) {
  const std::vector<ClipSpan> spans = {{10, 70}, {150, 200}};
  std::vector<std::string> first;
  for (int run = 0; run < 5; ++run) {
    TempDir dir;
    const auto clips = Write(kMegamind, spans, {}, dir.path());
    ASSERT_EQ(clips.size(), 2u);
    for (size_t k = 0; k < 2; ++k) {
      const std::string bytes = testing::ReadFile(clips[k].file->path);
      if (run == 0) first.push_back(bytes);
      else EXPECT_TRUE(bytes == first[k]) << "run " << run << ", clip " << k;
    }
  }
}

// The clip's sound is the source's at the clip's times: the best lag between the two, at
// 16 kHz, is under a millisecond, and the clip's sound lasts as long as its picture.
TEST(ClipWriterTest, EncodeCutsTheSoundToTheSameSpanAndInSync) {
  TempDir dir;
  const auto clips = Write(kMegamind, {{48, 168}}, {}, dir.path());
  ASSERT_EQ(clips.size(), 1u);
  ASSERT_TRUE(clips[0].file) << clips[0].reason;
  const ClipFile& f = *clips[0].file;
  ASSERT_TRUE(f.has_audio);
  auto src = ReadAudio(kMegamind);
  auto got = ReadAudio(f.path);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const double seconds = (f.end_s - f.start_s);
  EXPECT_NEAR(got->seconds(), seconds, 0.03);
  EXPECT_NEAR(got->start_offset_s, 0, 0.002);
  // The source's sound starts where its container says, after its first frame or before.
  const int rate = 16000, from = static_cast<int>(std::lround((f.start_s - src->start_offset_s) * rate));
  const int n = static_cast<int>(got->samples.size()) - 2000, max_lag = 800;
  ASSERT_GT(n, rate);
  int best = 0;
  double best_c = -1;
  for (int lag = -max_lag; lag <= max_lag; ++lag) {
    double c = 0, ea = 0, eb = 0;
    for (int i = 1000; i < n; i += 2) {
      const double a = got->samples[i], b = src->samples[from + i + lag];
      c += a * b, ea += a * a, eb += b * b;
    }
    c /= std::sqrt(ea * eb) + 1e-12;
    if (c > best_c) best_c = c, best = lag;
  }
  EXPECT_LE(std::abs(best), 16) << "lag " << best << " samples at 16 kHz";
  EXPECT_GT(best_c, 0.9);
}

// Megamind (MPEG-4 in an AVI, B-frames packed into the packets of the frames after them) is
// re-encoded to MPEG-4 Part 2 without B-frames here, in MP4, with its AC-3 sound: its
// keyframes are then 0, 2 and every 25th frame after (ffprobe: 27, 52, ..., 177, 202).
TEST(ClipWriterTest, CopyStartsAtTheFirstKeyframeInsideTheSpanAndEndsExactly) {
  TempDir dir;
  const std::string source = dir.path() + "/megamind.mp4";
  ASSERT_EQ(std::system(("ffmpeg -v error -y -i " + kMegamind + " -c:v mpeg4 -bf 0 -g 25 -q:v 3 -c:a copy " +
                         source).c_str()), 0);
  ClipWriteOptions o;
  o.encoding.mode = ClipMode::kCopy;
  const auto clips = Write(source, {{30, 150}, {160, 174}, {200, 270}}, o, dir.path());
  ASSERT_EQ(clips.size(), 3u);
  ASSERT_TRUE(clips[0].file) << clips[0].reason;
  EXPECT_EQ(clips[0].file->span, (ClipSpan{52, 150}));
  EXPECT_FALSE(clips[1].file);
  EXPECT_EQ(clips[1].reason, "copy: no keyframe inside the span (clips.mode encode cuts it exactly)");
  ASSERT_TRUE(clips[2].file) << clips[2].reason;
  EXPECT_EQ(clips[2].file->span, (ClipSpan{202, 270}));
  EXPECT_EQ(clips[0].file->codec, "mpeg4");
  EXPECT_TRUE(clips[0].file->has_audio);
  // The same packets: the same pictures as the source's frames, every one.
  const std::vector<VideoFrame> src = Decode(source);
  for (const ClipOutcome* c : {&clips[0], &clips[2]}) {
    const std::vector<VideoFrame> got = Decode(c->file->path);
    ASSERT_EQ(int64_t(got.size()), c->file->span.end_frame - c->file->span.start_frame);
    EXPECT_EQ(c->file->frames, int64_t(got.size()));
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(cv::norm(got[i].image, src[c->file->span.start_frame + i].image, cv::NORM_INF), 0) << i;
  }
  // The AVI itself cannot be cut by copying: every span says why.
  const auto avi = Write(kMegamind, {{30, 150}}, o, dir.path() + "/avi");
  ASSERT_EQ(avi.size(), 1u);
  EXPECT_FALSE(avi[0].file);
  EXPECT_NE(avi[0].reason.find("packed as in an AVI"), std::string::npos) << avi[0].reason;
}

// H.264 with B-frames (made here by the encode mode: libx264's veryfast, an IDR at most
// every 250 frames and at scene changes): the copy starts at a keyframe inside the span,
// and every frame it holds is the source's.
TEST(ClipWriterTest, CopyOfH264WithBFramesHoldsTheSourcesFramesFromAKeyframe) {
  TempDir dir;
  const auto h264 = Write(kVtest, {{0, 600}}, {}, dir.path() + "/h264");
  ASSERT_EQ(h264.size(), 1u);
  ASSERT_TRUE(h264[0].file);
  const std::string source = h264[0].file->path;
  ClipWriteOptions o;
  o.encoding.mode = ClipMode::kCopy;
  const auto clips = Write(source, {{100, 590}}, o, dir.path());
  ASSERT_EQ(clips.size(), 1u);
  ASSERT_TRUE(clips[0].file) << clips[0].reason;
  const ClipFile& f = *clips[0].file;
  EXPECT_GE(f.span.start_frame, 100);
  EXPECT_LE(f.span.start_frame, 350);
  EXPECT_GE(f.span.end_frame, 586);  // B-frames at the end that need frame 590 are left out
  EXPECT_LE(f.span.end_frame, 590);
  const std::vector<VideoFrame> src = Decode(source), got = Decode(f.path);
  ASSERT_EQ(int64_t(got.size()), f.span.end_frame - f.span.start_frame);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(cv::norm(got[i].image, src[f.span.start_frame + i].image, cv::NORM_INF), 0) << i;
}

TEST(ClipWriterTest, CopyOfACodecMp4CannotHoldSaysSoForEverySpan) {
  TempDir dir;
  ClipWriteOptions o;
  o.encoding.mode = ClipMode::kCopy;
  const auto clips = Write(kVtest, {{0, 40}, {100, 180}}, o, dir.path());
  ASSERT_EQ(clips.size(), 2u);
  for (const ClipOutcome& c : clips) {
    EXPECT_FALSE(c.file);
    EXPECT_EQ(c.reason, "copy: msmpeg4v3 video cannot be stored in MP4 as it is (clips.mode encode re-encodes it)");
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(ClipWriterTest, BadInputAndBadSpansAreRefusedWithTheReason) {
  TempDir dir;
  auto path = [&](size_t) { return dir.path() + "/x.mp4"; };
  auto image = WriteClips(SampleData("messi5.jpg"), {{0, 1}}, {}, path);
  ASSERT_FALSE(image.ok());
  EXPECT_TRUE(image.status().code() == Status::Code::kUnsupported) << image.status().ToString();
  auto overlap = WriteClips(kVtest, {{0, 10}, {5, 20}}, {}, path);
  ASSERT_FALSE(overlap.ok());
  EXPECT_TRUE(overlap.status().IsInvalidArgument());
  ClipWriteOptions small;
  small.limits.max_pixels = 1000;
  auto large = WriteClips(kVtest, {{0, 10}}, small, path);
  ASSERT_FALSE(large.ok());
  EXPECT_TRUE(large.status().code() == Status::Code::kTooLarge) << large.status().ToString();
  const std::string truncated = dir.path() + "/half.avi";
  testing::WriteTruncated(kVtest, truncated, 0.5);
  auto half = WriteClips(truncated, {{0, 10}, {700, 790}}, {}, path);
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  EXPECT_TRUE((*half)[0].file);
  EXPECT_FALSE((*half)[1].file);
  EXPECT_NE((*half)[1].reason.find("before the span starts"), std::string::npos) << (*half)[1].reason;
}

}  // namespace
}  // namespace framemill
