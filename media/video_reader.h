// A video reader for analysis: it decodes the stream once, in order, and converts only
// the frames a stage keeps, straight to the size it needs (one libswscale pass, no
// full-size BGR copy). Frame times come from the stream's timestamps. One reader per
// file, used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <opencv2/core.hpp>

#include "base/status.h"
#include "media/video.h"

namespace framemill {

struct VideoReaderOptions {
  int max_width = 0;    // frames wider are scaled down to this width, keeping the aspect; 0: source size
  double max_fps = 0;   // keep at most this many frames per second of stream time; 0: every frame
  int64_t max_kept = 0;  // >0: a lower rate where needed, so that about this many frames are
                         // kept over the declared length (of its first limits.max_frames)
  bool gray = false;    // 8-bit gray instead of 8-bit BGR
  // Next() also returns the frames max_fps leaves out, converted as the kept ones, with
  // VideoFrame::kept false: a stage that analyses a lower rate but places what it finds at
  // the source's own frames (motion's cuts above motion.max_fps).
  bool also_skipped = false;
  int threads = 1;      // decoder threads (a worker already has its share of the cores)
  VideoLimits limits;   // max_pixels refused from the header; max_frames decoded at most
};

struct VideoFrame {
  int64_t index = 0;    // source frame number, in presentation order from 0
  double time_s = 0;    // presentation time, from the stream's pts, relative to its start
  cv::Mat image;        // 8-bit, BGR or gray as asked, at the reader's output size
  bool kept = true;     // false: a frame max_fps leaves out (only with also_skipped)
};

class VideoReader {
 public:
  // Opens a file. Unsupported when it is not a video; TooLarge when its frames declare
  // more than limits.max_pixels; Corruption when it has no decodable video stream.
  static Result<std::unique_ptr<VideoReader>> Open(const std::string& path,
                                                   const VideoReaderOptions& options);
  ~VideoReader();
  VideoReader(const VideoReader&) = delete;
  VideoReader& operator=(const VideoReader&) = delete;

  const VideoInfo& info() const;
  cv::Size output_size() const;  // size of every frame Next() returns

  // The next kept frame (or skipped one, with also_skipped): true with *frame filled, false
  // at the end of the stream (or after limits.max_frames). Corruption when the file breaks before any frame decoded;
  // damage later ends the stream early, counted in damaged_packets().
  Result<bool> Next(VideoFrame* frame);

  // The rate frames are kept at from here on (frames per second of stream time; > 0). Kept
  // frames follow a grid of 1 / rate: halving the rate after a run of kept frames makes
  // every other one of them, from the first, the grid's.
  void set_max_fps(double fps);
  double max_fps() const;

  int64_t frames_decoded() const;   // every frame the decoder produced, each exactly once
  int64_t damaged_packets() const;  // packets the decoder refused
  // Frames [first, last] that broken packets spoiled, each to the next keyframe (AvDecoder).
  std::vector<std::pair<int64_t, int64_t>> damaged_frames() const;

 private:
  struct Impl;
  explicit VideoReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace framemill
