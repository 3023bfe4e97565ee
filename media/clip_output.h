// One clip file being written: an MP4 muxer on a temporary name beside its path, its
// streams, and the rename into place when whole (or the removal when not). Bit-exact
// (no library versions or times in the file), so the same frames make the same bytes.
// Internal to media/ (the clip writer's); used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}

#include "base/status.h"

namespace framemill {

class ClipOutput {
 public:
  // The muxer on `path`'s temporary; nothing is written before Start.
  static Result<std::unique_ptr<ClipOutput>> Open(const std::string& path);
  ~ClipOutput();  // removes the temporary unless Finish renamed it
  ClipOutput(const ClipOutput&) = delete;
  ClipOutput& operator=(const ClipOutput&) = delete;

  // A stream copied from a source stream (copy), or fed by an encoder (encode): its index.
  Result<int> AddStream(const AVCodecParameters* par, AVRational time_base);
  Result<int> AddStream(const AVCodecContext* encoder);
  // The source stream's display matrix (a rotation), if it has one, on `stream`: a player
  // shows the clip turned as it shows the source.
  Status CopyDisplayMatrix(int stream, const AVStream* source);
  Status Start();  // the header: every stream added
  // One packet of `stream`, its times in `from` units; the packet is consumed.
  Status Write(AVPacket* packet, int stream, AVRational from);
  // The trailer, then the rename: the file's size.
  Result<int64_t> Finish();

 private:
  ClipOutput() = default;
  AVFormatContext* oc_ = nullptr;
  std::string path_, temp_;
  bool started_ = false, renamed_ = false;
};

}  // namespace framemill
