// Recognising and decoding media: content sniffing by magic bytes, image header
// probing (so oversized images are refused before any pixel is decoded), and
// decoding with clear, classified errors. Stateless functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <opencv2/core.hpp>

#include "configs/config.h"
#include "jobs/job.h"
#include "storage/status.h"

namespace framemill {

struct Sniffed {
  MediaKind kind;
  std::string format;  // jpeg, png, gif, bmp, webp, tiff, avi, mp4, mkv, ...
};

// Kind and format from the first bytes of a file (at least 32 are needed for most).
std::optional<Sniffed> SniffMedia(std::string_view head);

// The kind a file's extension claims (".jpg" -> image), if any. Used only to keep a
// file that claims to be media but is not, so its failure is recorded on a job.
std::optional<MediaKind> KindFromExtension(std::string_view path);

struct ImageHeader {
  int64_t width = 0, height = 0;
};
// Dimensions declared by an image header, reading only `head`. NotFound when the
// format's header is not parsed here (decoding then decides); Corruption when the
// header is present but damaged or cut short.
Result<ImageHeader> ProbeImageHeader(std::string_view head, const std::string& format);

// Reads and decodes an image as 8-bit BGR. Refuses (TooLarge) images whose header
// declares more than media.max_image_pixels before decoding; empty, truncated or
// non-image files fail with Corruption/Unsupported naming the reason.
Result<cv::Mat> DecodeImageFile(const std::string& path, const MediaConfig& media);

struct VideoInfo {
  double fps = 0;
  int64_t frames = 0;
  int width = 0, height = 0;
  std::string codec;
};
struct VideoSample {
  VideoInfo info;
  std::vector<int64_t> indices;
  std::vector<cv::Mat> frames;  // 8-bit BGR, one per index
};
// Decodes `count` frames spread evenly over the video. A file that does not open,
// has no frames, or whose sampled frames cannot all be read (truncated) fails with
// Corruption and the frame that failed.
Result<VideoSample> SampleVideoFrames(const std::string& path, int count);

// Reads a whole file; IOError/NotFound on failure.
Result<std::string> ReadFileBytes(const std::string& path, size_t max_bytes = SIZE_MAX);

}  // namespace framemill
