// One stream of a media file decoded with FFmpeg's libraries (libavformat, libavcodec):
// what the video and audio readers share. Opens the container, picks the best stream of a
// kind, and hands out decoded frames in order, each once; damaged packets are counted,
// not fatal. Owned by one reader, used by one thread. Internal to media/.
#pragma once

#include <cstdint>
#include <string>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}

#include "base/status.h"

namespace framemill {

std::string AvError(int code);

class AvDecoder {
 public:
  AvDecoder() = default;
  ~AvDecoder();
  AvDecoder(const AvDecoder&) = delete;
  AvDecoder& operator=(const AvDecoder&) = delete;

  // Opens `path` (sniffed as `format`) and the best stream of `type`. Corruption when the
  // container does not open; NotFound when it holds no decodable stream of that type.
  Status Open(const std::string& path, const std::string& format, AVMediaType type, int threads);
  // After Open, before the first Next: the decoder is set up from these.
  AVFormatContext* format() const { return fmt_; }
  AVStream* stream() const { return fmt_->streams[stream_]; }
  AVCodecContext* codec() const { return dec_; }

  // The next decoded frame in frame(): true; false at the end (or when the decoder cannot
  // go on). Corruption when the file breaks before any frame decoded.
  Result<bool> Next();
  AVFrame* frame() const { return frame_; }
  int64_t decoded() const { return decoded_; }
  int64_t damaged_packets() const { return damaged_; }

 private:
  Result<bool> Feed();  // one packet of our stream to the decoder; false when exhausted

  AVFormatContext* fmt_ = nullptr;
  AVCodecContext* dec_ = nullptr;
  AVPacket* packet_ = nullptr;
  AVFrame* frame_ = nullptr;
  std::string kind_;  // "video" or "audio", for messages
  int stream_ = -1;
  int64_t decoded_ = 0, damaged_ = 0;
  bool draining_ = false, finished_ = false;
};

}  // namespace framemill
