// What the clip writer's two passes share: the source as opened once, and its frame
// times as VideoReader gives them. Internal to media/ (clip_writer.cc, clip_encode.cc,
// clip_copy.cc).
#pragma once

#include <functional>
#include <string>
#include <vector>

extern "C" {
#include <libavformat/avformat.h>
}

#include "media/av_decoder.h"
#include "media/clip_output.h"
#include "media/clip_writer.h"

namespace framemill::clips {

struct Source {
  std::string path, format;  // format: as sniffed
  double fps = 0;            // the stream's guessed rate; 0: unknown
  VideoLimits limits;
  // The video decoder on the source, its frame size checked against the limits.
  Status OpenVideo(AvDecoder* av, int threads) const;
};

// A frame's time in seconds from the stream's first, as VideoReader::Next gives it: from its
// best-effort timestamp, one frame after the last where it has none.
class FrameClock {
 public:
  // start_pts: the first frame's time; none: the stream's start (else its first frame's).
  FrameClock(const AVStream* stream, double fps, int64_t start_pts = AV_NOPTS_VALUE);
  double Time(const AVFrame* frame) { return TimeOf(frame->best_effort_timestamp); }
  double TimeOf(int64_t pts);
  double start_s() const;  // the stream's start, in seconds of the container's clock
  double FrameSeconds() const { return fps_ > 0 ? 1.0 / fps_ : 0.04; }

 private:
  AVRational time_base_;
  int64_t start_pts_;
  double fps_, last_ = -1;
};

Status EncodePass(const Source& src, const std::vector<ClipSpan>& spans,
                  const ClipWriteOptions& options, const std::function<std::string(size_t)>& path_for,
                  std::vector<ClipOutcome>* outcomes);
Status CopyPass(const Source& src, const std::vector<ClipSpan>& spans,
                const ClipWriteOptions& options, const std::function<std::string(size_t)>& path_for,
                std::vector<ClipOutcome>* outcomes);

}  // namespace framemill::clips
