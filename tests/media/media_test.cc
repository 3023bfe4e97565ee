#include "media/image.h"
#include "media/sniff.h"
#include "media/video.h"

#include <gtest/gtest.h>

#include "tests/support/test_support.h"

namespace framemill {
namespace {

using testing::ReadFile;
using testing::SampleData;
using testing::TempDir;
using testing::WriteFile;
using testing::WriteTruncated;

TEST(MediaTest, SniffsRealFilesByContent) {
  struct Case {
    const char* file;
    MediaKind kind;
    const char* format;
  } cases[] = {{"messi5.jpg", MediaKind::kImage, "jpeg"},
               {"box.png", MediaKind::kImage, "png"},
               {"vtest.avi", MediaKind::kVideo, "avi"},
               {"Megamind.avi", MediaKind::kVideo, "avi"}};
  for (const Case& c : cases) {
    auto s = SniffMedia(ReadFile(SampleData(c.file)).substr(0, 512));
    ASSERT_TRUE(s.has_value()) << c.file;
    EXPECT_EQ(s->kind, c.kind) << c.file;
    EXPECT_EQ(s->format, c.format) << c.file;
  }
  EXPECT_FALSE(SniffMedia("hello world, this is text").has_value());
  EXPECT_FALSE(SniffMedia("").has_value());
}

TEST(MediaTest, ProbesDimensionsFromRealHeaders) {
  auto jpg = ProbeImageHeader(ReadFile(SampleData("messi5.jpg")), "jpeg");
  ASSERT_TRUE(jpg.ok()) << jpg.status().ToString();
  EXPECT_EQ(jpg->width, 548);
  EXPECT_EQ(jpg->height, 342);
  auto png = ProbeImageHeader(ReadFile(SampleData("box.png")), "png");
  ASSERT_TRUE(png.ok());
  EXPECT_EQ(png->width, 324);
  EXPECT_EQ(png->height, 223);
  EXPECT_TRUE(ProbeImageHeader(ReadFile(SampleData("messi5.jpg")).substr(0, 10), "jpeg")
                  .status().IsCorruption());
}

TEST(MediaTest, ExtensionOnlyNamesAKindNotAFormat) {
  EXPECT_EQ(KindFromExtension("/a/b.JPG"), MediaKind::kImage);
  EXPECT_EQ(KindFromExtension("clip.mp4"), MediaKind::kVideo);
  EXPECT_FALSE(KindFromExtension("notes.txt").has_value());
  EXPECT_FALSE(KindFromExtension("Makefile").has_value());
}

TEST(MediaTest, DecodesARealPhoto) {
  auto img = DecodeImageFile(SampleData("messi5.jpg"), ImageLimits{});
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  EXPECT_EQ(img->cols, 548);
  EXPECT_EQ(img->rows, 342);
  EXPECT_EQ(img->channels(), 3);
}

TEST(MediaTest, RefusesOversizedImagesBeforeDecoding) {
  ImageLimits small;
  small.max_pixels = 100'000;  // messi5 is 187,416 pixels
  auto img = DecodeImageFile(SampleData("messi5.jpg"), small);
  ASSERT_FALSE(img.ok());
  EXPECT_EQ(img.status().code(), Status::Code::kTooLarge);
  EXPECT_NE(img.status().message().find("548x342"), std::string::npos);
}

TEST(MediaTest, BadImagesFailWithTheirReason) {
  TempDir d;
  WriteFile(d / "empty.jpg", "");
  WriteTruncated(SampleData("messi5.jpg"), d / "cut.jpg", 0.6);
  WriteTruncated(SampleData("box.png"), d / "cut.png", 0.3);
  WriteFile(d / "text.jpg", "just words\n");
  auto check = [&](const std::string& f, Status::Code code, const std::string& msg) {
    auto r = DecodeImageFile(d / f, ImageLimits{});
    ASSERT_FALSE(r.ok()) << f;
    EXPECT_EQ(r.status().code(), code) << f << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(msg), std::string::npos) << r.status().message();
  };
  check("empty.jpg", Status::Code::kCorruption, "empty file");
  check("cut.jpg", Status::Code::kCorruption, "truncated JPEG");
  check("cut.png", Status::Code::kCorruption, "could not decode png");
  check("text.jpg", Status::Code::kUnsupported, "content is text");
  auto missing = DecodeImageFile(d / "nope.jpg", ImageLimits{});
  EXPECT_TRUE(missing.status().IsNotFound());
}

TEST(MediaTest, SamplesFramesSpreadOverARealVideo) {
  auto v = SampleVideoFrames(SampleData("vtest.avi"), 4);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->info.frames, 795);
  EXPECT_EQ(v->info.width, 768);
  EXPECT_EQ(v->indices, (std::vector<int64_t>{99, 298, 496, 695}));
  ASSERT_EQ(v->frames.size(), 4u);
  EXPECT_EQ(v->frames[0].cols, 768);
  // Different moments of the footage, not one frame four times.
  EXPECT_GT(cv::norm(v->frames[0], v->frames[3], cv::NORM_L1), 0.0);
}

TEST(MediaTest, TruncatedVideoFailsNamingTheFrame) {
  TempDir d;
  WriteTruncated(SampleData("vtest.avi"), d / "cut.avi", 0.4);
  auto v = SampleVideoFrames(d / "cut.avi", 8);
  ASSERT_FALSE(v.ok());
  EXPECT_TRUE(v.status().IsCorruption()) << v.status().ToString();
  EXPECT_NE(v.status().message().find("truncated or damaged: frame"), std::string::npos);
}

}  // namespace
}  // namespace framemill
