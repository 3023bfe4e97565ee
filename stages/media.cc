#include "stages/media.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <cstdio>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

namespace framemill {
namespace {

bool StartsWith(std::string_view s, std::string_view p, size_t at = 0) {
  return s.size() >= at + p.size() && s.substr(at, p.size()) == p;
}

uint32_t Be16(std::string_view s, size_t i) {
  return (uint8_t(s[i]) << 8) | uint8_t(s[i + 1]);
}
uint32_t Be32(std::string_view s, size_t i) {
  return (Be16(s, i) << 16) | Be16(s, i + 2);
}
uint32_t Le16(std::string_view s, size_t i) {
  return uint8_t(s[i]) | (uint8_t(s[i + 1]) << 8);
}
uint32_t Le32(std::string_view s, size_t i) { return Le16(s, i) | (Le16(s, i + 2) << 16); }

std::string Hex(std::string_view s, size_t n) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < std::min(n, s.size()); ++i) {
    std::snprintf(buf, sizeof buf, "%02x", uint8_t(s[i]));
    out += buf;
  }
  return out;
}

// What a non-media file looks like, for error messages ("text", "zip archive"...).
std::string Describe(std::string_view head) {
  if (head.empty()) return "empty";
  if (StartsWith(head, "%PDF")) return "a PDF document";
  if (StartsWith(head, "PK\x03\x04")) return "a zip archive";
  size_t printable = 0;
  for (char c : head.substr(0, 512))
    printable += (std::isprint(uint8_t(c)) || c == '\n' || c == '\r' || c == '\t');
  if (printable == std::min<size_t>(head.size(), 512)) return "text";
  return "unrecognised binary data (starts " + Hex(head, 8) + ")";
}

}  // namespace

std::optional<Sniffed> SniffMedia(std::string_view h) {
  using K = MediaKind;
  if (StartsWith(h, "\xFF\xD8\xFF")) return Sniffed{K::kImage, "jpeg"};
  if (StartsWith(h, "\x89PNG\r\n\x1A\n")) return Sniffed{K::kImage, "png"};
  if (StartsWith(h, "GIF87a") || StartsWith(h, "GIF89a")) return Sniffed{K::kImage, "gif"};
  if (StartsWith(h, "BM") && h.size() >= 26 && Le32(h, 14) >= 12 && Le32(h, 14) <= 124)
    return Sniffed{K::kImage, "bmp"};
  if (StartsWith(h, "II*\0", 0) || StartsWith(h, std::string_view("MM\0*", 4)))
    return Sniffed{K::kImage, "tiff"};
  if (StartsWith(h, "RIFF") && StartsWith(h, "WEBP", 8)) return Sniffed{K::kImage, "webp"};
  if (h.size() >= 3 && h[0] == 'P' && h[1] >= '1' && h[1] <= '6' && std::isspace(uint8_t(h[2])))
    return Sniffed{K::kImage, "pnm"};
  if (StartsWith(h, "RIFF") && StartsWith(h, "AVI ", 8)) return Sniffed{K::kVideo, "avi"};
  if (StartsWith(h, "ftyp", 4)) {
    std::string_view brand = h.size() >= 12 ? h.substr(8, 4) : "";
    if (brand == "avif" || brand == "avis" || brand == "heic" || brand == "heix" ||
        brand == "mif1" || brand == "msf1")
      return Sniffed{K::kImage, std::string(brand == "avif" || brand == "avis" ? "avif" : "heif")};
    if (brand == "qt  ") return Sniffed{K::kVideo, "mov"};
    return Sniffed{K::kVideo, "mp4"};
  }
  if (StartsWith(h, "\x1A\x45\xDF\xA3")) return Sniffed{K::kVideo, "mkv"};
  if (StartsWith(h, "FLV\x01")) return Sniffed{K::kVideo, "flv"};
  if (StartsWith(h, std::string_view("\x00\x00\x01\xBA", 4))) return Sniffed{K::kVideo, "mpeg"};
  if (StartsWith(h, "\x30\x26\xB2\x75\x8E\x66\xCF\x11")) return Sniffed{K::kVideo, "asf"};
  if (h.size() > 376 && h[0] == 0x47 && h[188] == 0x47 && h[376] == 0x47)
    return Sniffed{K::kVideo, "mpegts"};
  return std::nullopt;
}

std::optional<MediaKind> KindFromExtension(std::string_view path) {
  size_t dot = path.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::string ext(path.substr(dot + 1));
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  static const char* kImages[] = {"jpg", "jpeg", "png", "gif", "bmp", "tif", "tiff", "webp",
                                  "pgm", "ppm", "pbm", "pnm", "heic", "avif", "jpe"};
  static const char* kVideos[] = {"avi", "mp4", "mov", "mkv", "webm", "m4v", "mpg", "mpeg",
                                  "flv", "wmv", "ts", "3gp"};
  for (const char* e : kImages)
    if (ext == e) return MediaKind::kImage;
  for (const char* e : kVideos)
    if (ext == e) return MediaKind::kVideo;
  return std::nullopt;
}

Result<ImageHeader> ProbeImageHeader(std::string_view h, const std::string& format) {
  if (format == "png") {
    if (h.size() < 24 || !StartsWith(h, "IHDR", 12))
      return Status::Corruption("PNG header cut short (no IHDR chunk)");
    return ImageHeader{Be32(h, 16), Be32(h, 20)};
  }
  if (format == "gif") {
    if (h.size() < 10) return Status::Corruption("GIF header cut short");
    return ImageHeader{Le16(h, 6), Le16(h, 8)};
  }
  if (format == "bmp") {
    if (h.size() < 26) return Status::Corruption("BMP header cut short");
    int32_t w = static_cast<int32_t>(Le32(h, 18)), hh = static_cast<int32_t>(Le32(h, 22));
    return ImageHeader{std::abs(int64_t{w}), std::abs(int64_t{hh})};
  }
  if (format == "webp") {
    if (h.size() < 30) return Status::Corruption("WebP header cut short");
    if (StartsWith(h, "VP8 ", 12))
      return ImageHeader{Le16(h, 26) & 0x3FFF, Le16(h, 28) & 0x3FFF};
    if (StartsWith(h, "VP8L", 12)) {
      uint32_t b = Le32(h, 21);
      return ImageHeader{(b & 0x3FFF) + 1, ((b >> 14) & 0x3FFF) + 1};
    }
    if (StartsWith(h, "VP8X", 12)) {
      uint32_t w = (Le32(h, 24) & 0xFFFFFF) + 1, hh = (Le32(h, 27) & 0xFFFFFF) + 1;
      return ImageHeader{w, hh};
    }
    return Status::NotFound("unknown WebP variant");
  }
  if (format == "jpeg") {
    // Walk the marker segments up to the first start-of-frame.
    size_t i = 2;
    while (i + 4 <= h.size()) {
      if (uint8_t(h[i]) != 0xFF) return Status::Corruption("JPEG marker stream damaged");
      uint8_t m = uint8_t(h[i + 1]);
      if (m == 0xFF) {  // fill byte
        ++i;
        continue;
      }
      if (m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) {
        i += 2;
        continue;
      }
      uint32_t len = Be16(h, i + 2);
      bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
      if (sof) {
        if (i + 9 > h.size()) break;
        return ImageHeader{Be16(h, i + 7), Be16(h, i + 5)};
      }
      if (m == 0xDA || m == 0xD9)
        return Status::Corruption("JPEG has no frame header before its image data");
      i += 2 + len;
    }
    return Status::Corruption("JPEG header cut short before the frame header");
  }
  return Status::NotFound("no header probe for " + format);
}

Result<std::string> ReadFileBytes(const std::string& path, size_t max_bytes) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    int e = errno;
    if (e == ENOENT) return Status::NotFound(path + ": file no longer exists");
    return Status::IOError(path + ": " + std::strerror(e));
  }
  std::string out;
  char buf[1 << 16];
  size_t n;
  while (out.size() < max_bytes && (n = std::fread(buf, 1, sizeof buf, f)) > 0)
    out.append(buf, std::min(n, max_bytes - out.size()));
  bool err = std::ferror(f);
  std::fclose(f);
  if (err) return Status::IOError(path + ": read error");
  return out;
}

Result<cv::Mat> DecodeImageFile(const std::string& path, const MediaConfig& media) {
  auto bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  const std::string& b = *bytes;
  if (b.empty()) return Status::Corruption("empty file (0 bytes)");
  auto sniffed = SniffMedia(b);
  if (!sniffed) return Status::Unsupported("not an image: content is " + Describe(b));
  if (sniffed->kind != MediaKind::kImage)
    return Status::Unsupported("not an image: content is " + sniffed->format + " video");
  auto header = ProbeImageHeader(b, sniffed->format);
  if (header.ok()) {
    const int64_t px = header->width * header->height;
    if (header->width <= 0 || header->height <= 0)
      return Status::Corruption(sniffed->format + " header declares an empty image");
    if (px > media.max_image_pixels) {
      char msg[256];
      std::snprintf(msg, sizeof msg,
                    "%s header declares %lldx%lld (%.1f MP), over the limit of %.1f MP "
                    "(media.max_image_pixels); not decoded",
                    sniffed->format.c_str(), static_cast<long long>(header->width),
                    static_cast<long long>(header->height), px / 1e6,
                    media.max_image_pixels / 1e6);
      return Status::TooLarge(msg);
    }
  } else if (header.status().IsCorruption()) {
    return header.status();
  }
  if (sniffed->format == "jpeg") {
    // libjpeg pads a cut-off JPEG with grey and returns it; insist on the end marker.
    size_t tail = b.size() > 4096 ? b.size() - 4096 : 0;
    if (b.find("\xFF\xD9", tail) == std::string::npos)
      return Status::Corruption("truncated JPEG: no end-of-image marker");
  }
  cv::Mat img;
  try {
    img = cv::imdecode(cv::Mat(1, static_cast<int>(b.size()), CV_8U, const_cast<char*>(b.data())),
                       cv::IMREAD_COLOR);
  } catch (const cv::Exception& e) {
    return Status::Corruption("could not decode " + sniffed->format + ": " + e.what());
  }
  if (img.empty())
    return Status::Corruption("could not decode " + sniffed->format +
                              " data (truncated or corrupt)");
  return img;
}

Result<VideoSample> SampleVideoFrames(const std::string& path, int count) {
  auto head = ReadFileBytes(path, 512);
  if (!head.ok()) return head.status();
  if (head->empty()) return Status::Corruption("empty file (0 bytes)");
  auto sniffed = SniffMedia(*head);
  if (!sniffed || sniffed->kind != MediaKind::kVideo)
    return Status::Unsupported("not a video: content is " +
                               (sniffed ? sniffed->format + " image" : Describe(*head)));
  cv::VideoCapture cap;
  try {
    cap.open(path, cv::CAP_FFMPEG);
  } catch (const cv::Exception& e) {
    return Status::Corruption(std::string("could not open video: ") + e.what());
  }
  if (!cap.isOpened())
    return Status::Corruption("could not open " + sniffed->format + " video (damaged or truncated)");
  VideoSample out;
  out.info.fps = cap.get(cv::CAP_PROP_FPS);
  out.info.frames = static_cast<int64_t>(cap.get(cv::CAP_PROP_FRAME_COUNT));
  out.info.width = static_cast<int>(cap.get(cv::CAP_PROP_FRAME_WIDTH));
  out.info.height = static_cast<int>(cap.get(cv::CAP_PROP_FRAME_HEIGHT));
  int fourcc = static_cast<int>(cap.get(cv::CAP_PROP_FOURCC));
  for (int i = 0; i < 4; ++i) {
    char c = static_cast<char>((fourcc >> (8 * i)) & 0xFF);
    if (std::isprint(uint8_t(c))) out.info.codec += c;
  }
  if (out.info.frames <= 0) return Status::Corruption("video reports no frames");
  count = static_cast<int>(std::min<int64_t>(count, out.info.frames));
  for (int k = 0; k < count; ++k) {
    // Centres of `count` equal spans: the first and last frames are avoided, since
    // fades and black leaders there say little about the footage.
    int64_t idx = static_cast<int64_t>((k + 0.5) * out.info.frames / count);
    cv::Mat frame;
    bool ok = cap.set(cv::CAP_PROP_POS_FRAMES, static_cast<double>(idx)) && cap.read(frame);
    if (!ok || frame.empty()) {
      return Status::Corruption("video truncated or damaged: frame " + std::to_string(idx) +
                                " of " + std::to_string(out.info.frames) + " unreadable");
    }
    out.indices.push_back(idx);
    out.frames.push_back(frame);
  }
  return out;
}

}  // namespace framemill
