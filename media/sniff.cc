#include "media/sniff.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

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

}  // namespace

std::string DescribeContent(std::string_view head) {
  if (head.empty()) return "empty";
  if (StartsWith(head, "%PDF")) return "a PDF document";
  if (StartsWith(head, "PK\x03\x04")) return "a zip archive";
  size_t printable = 0;
  for (char c : head.substr(0, 512))
    printable += (std::isprint(uint8_t(c)) || c == '\n' || c == '\r' || c == '\t');
  if (printable == std::min<size_t>(head.size(), 512)) return "text";
  return "unrecognised binary data (starts " + Hex(head, 8) + ")";
}

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
  // An MPEG-1/2 video elementary stream (a sequence header first), as ViSP's cube.mpeg.
  if (StartsWith(h, std::string_view("\x00\x00\x01\xB3", 4))) return Sniffed{K::kVideo, "m2v"};
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

namespace {

// The first image file directory's ImageWidth (256) and ImageLength (257).
Result<ImageHeader> ProbeTiff(std::string_view h) {
  const bool le = h[0] == 'I';
  auto u16 = [&](size_t at) { return le ? Le16(h, at) : Be16(h, at); };
  auto u32 = [&](size_t at) { return le ? Le32(h, at) : Be32(h, at); };
  if (h.size() < 8) return Status::Corruption("TIFF header cut short");
  const uint64_t ifd = u32(4);
  if (ifd + 2 > h.size()) return Status::Corruption("TIFF directory offset past the end of the file");
  const uint64_t entries = u16(static_cast<size_t>(ifd));
  int64_t width = -1, height = -1;
  for (uint64_t k = 0; k < entries; ++k) {
    const uint64_t e = ifd + 2 + 12 * k;
    if (e + 12 > h.size()) return Status::Corruption("TIFF directory cut short");
    const uint32_t tag = u16(static_cast<size_t>(e)), type = u16(static_cast<size_t>(e) + 2);
    if (tag != 256 && tag != 257) continue;
    // SHORT (3) sits in the first two bytes of the value field; LONG (4) fills it.
    const int64_t v = type == 3 ? u16(static_cast<size_t>(e) + 8) : u32(static_cast<size_t>(e) + 8);
    (tag == 256 ? width : height) = v;
  }
  if (width < 0 || height < 0) return Status::Corruption("TIFF directory has no image size");
  return ImageHeader{width, height};
}

// "P1".."P6", then width and height as decimal tokens, with # comments allowed between.
Result<ImageHeader> ProbePnm(std::string_view h) {
  size_t i = 2;
  int64_t dims[2];
  for (int64_t& d : dims) {
    for (;;) {
      while (i < h.size() && std::isspace(uint8_t(h[i]))) ++i;
      if (i < h.size() && h[i] == '#') {
        while (i < h.size() && h[i] != '\n') ++i;
        continue;
      }
      break;
    }
    if (i >= h.size() || !std::isdigit(uint8_t(h[i])))
      return Status::Corruption("PNM header cut short or damaged (no image size)");
    d = 0;
    for (; i < h.size() && std::isdigit(uint8_t(h[i])); ++i) {
      if (d > (int64_t{1} << 40)) return Status::Corruption("PNM header declares an absurd size");
      d = d * 10 + (h[i] - '0');
    }
  }
  return ImageHeader{dims[0], dims[1]};
}

}  // namespace

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
  if (format == "tiff") return ProbeTiff(h);
  if (format == "pnm") return ProbePnm(h);
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

}  // namespace framemill
