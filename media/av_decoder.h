// One stream of a media file decoded with FFmpeg's libraries (libavformat, libavcodec):
// what the video and audio readers share. Opens the container, picks the best stream of a
// kind, and hands out decoded frames in order, each once; damaged packets are counted,
// not fatal, and the frames they spoil are listed. Owned by one reader, used by one thread. Internal to media/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}

#include "base/status.h"

namespace framemill {

std::string AvError(int code);

// Frames [first, last] (decoded order, from 0) that broken packets spoiled.
struct DamagedRun {
  int64_t first = 0, last = 0;
};

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
  // The runs of spoiled frames so far. A run starts at a frame the decoder flagged (corrupt,
  // concealed, or the first after a packet it refused) and lasts until the next keyframe:
  // the frames between are predicted from the broken one and carry its damage (vtest.avi
  // as H.264 with three packets overwritten: 26.7 dB on the first, falling to 22.4 dB by
  // the keyframe 40 frames on, against the intact file).
  std::vector<DamagedRun> damaged_runs() const;
  // After the last frame: reading stopped on an error, not at the end of the file, or a
  // packet came out short (a file cut off), or the decoder refused one.
  bool ended_broken() const { return read_error_ || short_packets_ > 0 || damaged_ > 0; }

 private:
  Result<bool> Feed();  // one packet of our stream to the decoder; false when exhausted
  void NoteDamage();    // the frame just decoded: does it start, carry or end a run?

  AVFormatContext* fmt_ = nullptr;
  AVCodecContext* dec_ = nullptr;
  AVPacket* packet_ = nullptr;
  AVFrame* frame_ = nullptr;
  std::string kind_;  // "video" or "audio", for messages
  int stream_ = -1;
  int64_t decoded_ = 0, damaged_ = 0;
  int64_t damaged_seen_ = 0;  // damaged_ when the last frame came out
  std::vector<DamagedRun> runs_;
  bool in_run_ = false;       // the last run is still open (no keyframe since)
  bool read_error_ = false;
  int64_t short_packets_ = 0;  // flagged AV_PKT_FLAG_CORRUPT by the demuxer
  bool draining_ = false, finished_ = false;
};

}  // namespace framemill
