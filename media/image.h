// Decoding image files with their limits: the header's declared size is checked before
// any pixel is decoded, and every way a file can be unusable fails with a classified
// Status naming the reason. Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include <opencv2/core.hpp>

#include "base/status.h"

namespace framemill {

struct ImageLimits {
  int64_t max_pixels = 100'000'000;  // media.max_image_pixels: refused before decoding

  bool operator==(const ImageLimits&) const = default;
};

// Reads and decodes an image as 8-bit BGR. TooLarge when the header declares more than
// `limits.max_pixels`; Corruption (empty, truncated, damaged) or Unsupported (not an
// image) otherwise, naming the reason.
Result<cv::Mat> DecodeImageFile(const std::string& path, const ImageLimits& limits);

}  // namespace framemill
