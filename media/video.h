// Sampling frames of a video file for analysis. Stateless; thread-safe (each call opens
// its own decoder).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "base/status.h"
#include "media/sniff.h"

namespace framemill {

struct VideoInfo {
  double fps = 0;
  int64_t frames = 0;
  int width = 0, height = 0;
  std::string codec;
};

// Bounds on what a video may make a stage decode, checked from the container's header
// before any frame is read.
struct VideoLimits {
  int64_t max_pixels = 8192LL * 4320;  // media.max_video_pixels: per frame (8K UHD)
  int64_t max_frames = 1'000'000;      // media.max_video_frames: frames considered

  bool operator==(const VideoLimits&) const = default;
};

// The checks every video reader makes before decoding: the content is a video (else
// Unsupported, naming what it is), and its declared frame size is within the limit (else
// TooLarge; an empty frame is Corruption).
Result<Sniffed> SniffVideoFile(const std::string& path);
Status CheckVideoFrameSize(const std::string& format, int width, int height,
                           const VideoLimits& limits);

struct VideoSample {
  VideoInfo info;              // info.frames: the frames there are, as far as known
  int64_t declared_frames = 0;  // > 0: the header's count, which decoding did not bear out
  std::vector<int64_t> indices;
  std::vector<cv::Mat> frames;  // 8-bit BGR, one per index
};

// Decodes `count` frames spread evenly over the video (over its first
// `limits.max_frames` frames, when it declares more). A frame size over
// `limits.max_pixels` is TooLarge before any frame is decoded. A file that does not
// open, has no frames, or whose sampled frames cannot all be read (truncated) fails with
// Corruption and the frame that failed; a file that is not a video is Unsupported. A
// header that declares more frames than decode (a container whose duration lies) is
// found out when a sampled frame is missing: the frames are counted by decoding and the
// sample is taken over those, with `declared_frames` saying what the header claimed.
Result<VideoSample> SampleVideoFrames(const std::string& path, int count,
                                      const VideoLimits& limits = {});

}  // namespace framemill
