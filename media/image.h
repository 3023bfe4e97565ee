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

// An image decoded at a reduced size, and the size it has in the file (after its EXIF
// orientation, as `image` is).
struct ScaledImage {
  cv::Mat image;
  cv::Size source;
  int reduction = 1;  // 1, 2, 4 or 8: source / image, rounded up
};

// As DecodeImageFile, but a JPEG is decoded at the strongest of libjpeg's DCT scalings
// (1/2, 1/4, 1/8) that keeps its longest side at least `min_long_side`: the scaling
// happens inside the inverse DCT, so it costs less than a full decode instead of more.
// Other formats, and min_long_side <= 0, decode at full size.
Result<ScaledImage> DecodeImageFileScaled(const std::string& path, const ImageLimits& limits,
                                          int min_long_side);

}  // namespace framemill
