#include "media/image.h"

#include <cstdio>

#include <opencv2/imgcodecs.hpp>

#include "media/sniff.h"

namespace framemill {

Result<cv::Mat> DecodeImageFile(const std::string& path, const ImageLimits& limits) {
  auto bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  const std::string& b = *bytes;
  if (b.empty()) return Status::Corruption("empty file (0 bytes)");
  auto sniffed = SniffMedia(b);
  if (!sniffed) return Status::Unsupported("not an image: content is " + DescribeContent(b));
  if (sniffed->kind != MediaKind::kImage)
    return Status::Unsupported("not an image: content is " + sniffed->format + " video");
  // Decoding is allowed only once the header's declared size is known to be within the
  // limit: a format whose size cannot be read is refused, never decoded unbounded.
  auto header = ProbeImageHeader(b, sniffed->format);
  if (!header.ok()) {
    if (header.status().IsCorruption()) return header.status();
    return Status::Unsupported(sniffed->format + ": the image size cannot be read from its header (" +
                               std::string(header.status().message()) +
                               "), so it is not decoded (media.max_image_pixels)");
  }
  if (header->width <= 0 || header->height <= 0)
    return Status::Corruption(sniffed->format + " header declares an empty image");
  int64_t px = 0;
  if (__builtin_mul_overflow(header->width, header->height, &px) || px > limits.max_pixels) {
    char msg[256];
    std::snprintf(msg, sizeof msg,
                  "%s header declares %lldx%lld (%.1f MP), over the limit of %.1f MP "
                  "(media.max_image_pixels); not decoded",
                  sniffed->format.c_str(), static_cast<long long>(header->width),
                  static_cast<long long>(header->height),
                  static_cast<double>(header->width) * static_cast<double>(header->height) / 1e6,
                  static_cast<double>(limits.max_pixels) / 1e6);
    return Status::TooLarge(msg);
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

}  // namespace framemill
