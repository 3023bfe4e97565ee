#include "media/image.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include <opencv2/imgcodecs.hpp>

#include "base/time_split.h"
#include "media/sniff.h"

namespace framemill {

namespace {

// The strongest DCT scaling of a JPEG whose longest side `longest` keeps at least
// `min_long_side` pixels (libjpeg rounds the scaled size up).
int JpegReduction(int64_t longest, int min_long_side) {
  if (min_long_side <= 0) return 1;
  for (int r : {8, 4, 2})
    if ((longest + r - 1) / r >= min_long_side) return r;
  return 1;
}

int ReducedFlag(int reduction) {
  switch (reduction) {
    case 2: return cv::IMREAD_REDUCED_COLOR_2;
    case 4: return cv::IMREAD_REDUCED_COLOR_4;
    case 8: return cv::IMREAD_REDUCED_COLOR_8;
    default: return cv::IMREAD_COLOR;
  }
}

// The declared size of an image, read from its header; refused when it cannot be read, is
// empty or is over the limit. Decoding is allowed only once the header's declared size is
// known to be within the limit: a format whose size cannot be read is never decoded unbounded.
Result<ImageHeader> CheckedHeader(const std::string& b, const std::string& format,
                                  const ImageLimits& limits) {
  auto header = ProbeImageHeader(b, format);
  if (!header.ok()) {
    if (header.status().IsCorruption()) return header.status();
    return Status::Unsupported(format + ": the image size cannot be read from its header (" +
                               std::string(header.status().message()) +
                               "), so it is not decoded (media.max_image_pixels)");
  }
  if (header->width <= 0 || header->height <= 0)
    return Status::Corruption(format + " header declares an empty image");
  int64_t px = 0;
  if (__builtin_mul_overflow(header->width, header->height, &px) || px > limits.max_pixels) {
    char msg[256];
    std::snprintf(msg, sizeof msg,
                  "%s header declares %lldx%lld (%.1f MP), over the limit of %.1f MP "
                  "(media.max_image_pixels); not decoded",
                  format.c_str(), static_cast<long long>(header->width),
                  static_cast<long long>(header->height),
                  static_cast<double>(header->width) * static_cast<double>(header->height) / 1e6,
                  static_cast<double>(limits.max_pixels) / 1e6);
    return Status::TooLarge(msg);
  }
  if (format == "jpeg") {
    // libjpeg pads a cut-off JPEG with grey and returns it; insist on the end marker.
    size_t tail = b.size() > 4096 ? b.size() - 4096 : 0;
    if (b.find("\xFF\xD9", tail) == std::string::npos)
      return Status::Corruption("truncated JPEG: no end-of-image marker");
  }
  return header;
}

Result<ScaledImage> Decode(const std::string& path, const ImageLimits& limits, int min_long_side) {
  auto bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  const std::string& b = *bytes;
  if (b.empty()) return Status::Corruption("empty file (0 bytes)");
  auto sniffed = SniffMedia(b);
  if (!sniffed) return Status::Unsupported("not an image: content is " + DescribeContent(b));
  if (sniffed->kind != MediaKind::kImage)
    return Status::Unsupported("not an image: content is " + sniffed->format + " video");
  auto header = CheckedHeader(b, sniffed->format, limits);
  if (!header.ok()) return header.status();
  // Only libjpeg scales while decoding; OpenCV would decode any other format in full and
  // then resize it.
  const int reduction = sniffed->format == "jpeg"
                            ? JpegReduction(std::max(header->width, header->height), min_long_side)
                            : 1;
  ScaledImage out;
  out.reduction = reduction;
  try {
    out.image = cv::imdecode(cv::Mat(1, static_cast<int>(b.size()), CV_8U, const_cast<char*>(b.data())),
                             ReducedFlag(reduction));
  } catch (const cv::Exception& e) {
    return Status::Corruption("could not decode " + sniffed->format + ": " + e.what());
  }
  if (out.image.empty())
    return Status::Corruption("could not decode " + sniffed->format +
                              " data (truncated or corrupt)");
  // The header's size is before EXIF orientation; the image is after it.
  out.source = cv::Size(static_cast<int>(header->width), static_cast<int>(header->height));
  if (reduction == 1) {
    out.source = out.image.size();
  } else if ((out.image.cols > out.image.rows) != (out.source.width > out.source.height)) {
    std::swap(out.source.width, out.source.height);
  }
  return out;
}

}  // namespace

Result<cv::Mat> DecodeImageFile(const std::string& path, const ImageLimits& limits) {
  TimeSpent decoding(TimePart::kDecode);
  auto img = Decode(path, limits, 0);
  if (!img.ok()) return img.status();
  return std::move(img->image);
}

Result<ScaledImage> DecodeImageFileScaled(const std::string& path, const ImageLimits& limits,
                                          int min_long_side) {
  TimeSpent decoding(TimePart::kDecode);
  return Decode(path, limits, min_long_side);
}

}  // namespace framemill
