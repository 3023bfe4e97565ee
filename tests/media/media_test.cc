#include "media/image.h"
#include "media/sniff.h"
#include "media/video.h"

#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>

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
  // An MPEG-1 elementary stream (visp-images-data): a sequence header, no container.
  auto cube = SniffMedia(ReadFile("/usr/share/visp-images-data/ViSP-images/video/cube.mpeg").substr(0, 512));
  ASSERT_TRUE(cube.has_value());
  EXPECT_EQ(cube->kind, MediaKind::kVideo);
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

// A JPEG with an EXIF orientation tag inserted after its SOI: `value` 6 turns it 90 degrees.
std::string WithExifOrientation(const std::string& jpeg, uint8_t value) {
  const std::string tiff = std::string("II*\0\x08\0\0\0", 8) +          // little endian, IFD at 8
                           std::string("\x01\0", 2) +                         // one entry
                           std::string("\x12\x01\x03\0\x01\0\0\0", 8) +  // 0x0112 SHORT x1
                           std::string(1, static_cast<char>(value)) + std::string("\0\0\0", 3) +
                           std::string("\0\0\0\0", 4);                     // no next IFD
  const std::string body = std::string("Exif\0\0", 6) + tiff;
  const size_t len = body.size() + 2;
  const std::string app1 = std::string("\xFF\xE1", 2) + static_cast<char>(len >> 8) + static_cast<char>(len & 0xFF) + body;
  return jpeg.substr(0, 2) + app1 + jpeg.substr(2);
}

// libjpeg's DCT scaling, as far as the longest side keeps its floor; the size in the
// file is reported after the EXIF orientation, as the image is.
TEST(MediaTest, AJpegDecodesAtTheStrongestScaleThatKeepsItsFloor) {
  const std::string photo = SampleData("messi5.jpg");  // 548x342
  const cv::Mat full = *DecodeImageFile(photo, ImageLimits{});
  for (auto [floor, reduction] : std::vector<std::pair<int, int>>{{0, 1}, {548, 1}, {274, 2}, {200, 2}, {137, 4}, {60, 8}, {1, 8}}) {
    auto r = DecodeImageFileScaled(photo, ImageLimits{}, floor);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->reduction, reduction) << "floor " << floor;
    EXPECT_EQ(r->source, full.size()) << "floor " << floor;
    EXPECT_EQ(r->image.cols, (548 + reduction - 1) / reduction) << "floor " << floor;
    EXPECT_EQ(r->image.rows, (342 + reduction - 1) / reduction) << "floor " << floor;
    EXPECT_GE(std::max(r->image.cols, r->image.rows), floor);
  }
  // The scaled pixels are the full image's, averaged: its mean colour is kept.
  const cv::Mat half = DecodeImageFileScaled(photo, ImageLimits{}, 274)->image;
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(cv::mean(half)[c], cv::mean(full)[c], 1.0) << c;

  TempDir dir;
  WriteFile(dir / "turned.jpg", WithExifOrientation(ReadFile(photo), 6));
  auto turned = DecodeImageFileScaled(dir / "turned.jpg", ImageLimits{}, 137);
  ASSERT_TRUE(turned.ok()) << turned.status().ToString();
  EXPECT_EQ(turned->source, cv::Size(342, 548));
  EXPECT_EQ(turned->image.size(), cv::Size(86, 137));
  // Only JPEG scales while decoding: a PNG comes whole.
  cv::imwrite(dir / "messi.png", full);
  auto png = DecodeImageFileScaled(dir / "messi.png", ImageLimits{}, 60);
  ASSERT_TRUE(png.ok());
  EXPECT_EQ(png->reduction, 1);
  EXPECT_EQ(png->image.size(), full.size());
}

TEST(MediaTest, RefusesOversizedImagesBeforeDecoding) {
  ImageLimits small;
  small.max_pixels = 100'000;  // messi5 is 187,416 pixels
  auto img = DecodeImageFile(SampleData("messi5.jpg"), small);
  ASSERT_FALSE(img.ok());
  EXPECT_EQ(img.status().code(), Status::Code::kTooLarge);
  EXPECT_NE(img.status().message().find("548x342"), std::string::npos);
}

// A TIFF whose only directory declares w x h (SHORT or LONG fields) over a few bytes of
// deflate data: a decoder that trusted it would allocate w*h*3 bytes.
std::string TiffBomb(bool little_endian, uint32_t w, uint32_t h, bool long_fields) {
  auto u16 = [&](uint32_t v) {
    return little_endian ? std::string{char(v), char(v >> 8)} : std::string{char(v >> 8), char(v)};
  };
  auto u32 = [&](uint32_t v) {
    return little_endian ? u16(v & 0xFFFF) + u16(v >> 16) : u16(v >> 16) + u16(v & 0xFFFF);
  };
  auto entry = [&](uint32_t tag, uint32_t type, uint32_t value) {
    std::string field = type == 3 ? u16(value) + u16(0) : u32(value);
    return u16(tag) + u16(type) + u32(1) + field;
  };
  const uint32_t t = long_fields ? 4 : 3;
  std::string s = little_endian ? std::string("II*\0", 4) : std::string("MM\0*", 4);
  s += u32(8);
  s += u16(6) + entry(256, t, w) + entry(257, t, h) + entry(258, 3, 8) + entry(259, 3, 8) +
       entry(273, 4, 90) + entry(279, 4, 8) + u32(0);
  s += std::string("\x78\x9c\x03\x00\x00\x00\x00\x01", 8);
  return s;
}

TEST(MediaTest, EveryProbedFormatIsRefusedByItsHeaderBeforeDecoding) {
  testing::TempDir dir;
  ImageLimits limits;  // 100 MP
  const std::vector<std::pair<std::string, std::string>> bombs = {
      {"le.tif", TiffBomb(true, 20000, 20000, true)},
      {"be.tif", TiffBomb(false, 30000, 30000, false)},
      {"big.pgm", "P5\n# a comment\n20000 20000\n255\n" + std::string(16, '\0')},
      // 2^32 x 2^32 overflows int64 when multiplied naively.
      {"overflow.tif", TiffBomb(true, 0xFFFFFFFF, 0xFFFFFFFF, true)},
  };
  for (const auto& [name, bytes] : bombs) {
    testing::WriteFile(dir / name, bytes);
    auto r = DecodeImageFile(dir / name, limits);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), Status::Code::kTooLarge) << name << ": " << r.status().ToString();
    EXPECT_NE(r.status().ToString().find("media.max_image_pixels"), std::string::npos);
  }
  // Within the limit, real TIFF and PNM files still decode, in both byte orders' worth.
  const cv::Mat img = cv::imread(testing::SampleData("baboon.jpg"));
  ASSERT_TRUE(cv::imwrite(dir / "ok.tif", img));
  ASSERT_TRUE(cv::imwrite(dir / "ok.ppm", img));
  for (const char* name : {"ok.tif", "ok.ppm"}) {
    auto r = DecodeImageFile(dir / name, limits);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    EXPECT_EQ(r->size(), img.size());
  }
  ImageLimits small;
  small.max_pixels = img.total() - 1;
  EXPECT_EQ(DecodeImageFile(dir / "ok.tif", small).status().code(), Status::Code::kTooLarge);
}

TEST(MediaTest, AnImageWhoseSizeCannotBeReadIsRefusedNotDecoded) {
  testing::TempDir dir;
  // An AVIF/HEIF box header: sniffed as an image, but no probe reads its size.
  std::string avif("\0\0\0\x1c" "ftypavif\0\0\0\0avifmif1miaf", 28);
  testing::WriteFile(dir / "x.avif", avif + std::string(64, '\0'));
  auto r = DecodeImageFile(dir / "x.avif", ImageLimits{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kUnsupported) << r.status().ToString();
  EXPECT_NE(r.status().ToString().find("cannot be read"), std::string::npos) << r.status().ToString();
  // A TIFF whose directory is cut off is damaged, not decoded.
  std::string cut = TiffBomb(true, 100, 100, true).substr(0, 20);
  testing::WriteFile(dir / "cut.tif", cut);
  EXPECT_EQ(DecodeImageFile(dir / "cut.tif", ImageLimits{}).status().code(), Status::Code::kCorruption);
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

// A video's frame size is refused from its header before a frame is decoded, and a
// header's frame count cannot send sampling past max_frames.
TEST(MediaTest, VideoLimitsRefuseLargeFramesAndBoundTheFramesConsidered) {
  testing::TempDir dir;
  const std::string path = dir / "small.avi";
  {
    cv::VideoWriter w(path, cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), 10, cv::Size(64, 48));
    ASSERT_TRUE(w.isOpened());
    for (int i = 0; i < 20; ++i) w.write(cv::Mat(48, 64, CV_8UC3, cv::Scalar(i * 10, 0, 0)));
  }
  VideoLimits tight;
  tight.max_pixels = 64 * 48 - 1;
  auto refused = SampleVideoFrames(path, 4, tight);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kTooLarge) << refused.status().ToString();
  EXPECT_NE(refused.status().ToString().find("media.max_video_pixels"), std::string::npos);

  VideoLimits few;
  few.max_frames = 5;
  auto sample = SampleVideoFrames(path, 4, few);
  ASSERT_TRUE(sample.ok()) << sample.status().ToString();
  EXPECT_EQ(sample->info.frames, 20);
  ASSERT_EQ(sample->indices.size(), 4u);
  for (int64_t i : sample->indices) EXPECT_LT(i, 5);
  auto all = SampleVideoFrames(path, 4);  // the defaults take in the whole clip
  ASSERT_TRUE(all.ok());
  EXPECT_GT(all->indices.back(), 10);
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
