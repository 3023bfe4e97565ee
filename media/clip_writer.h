// Cutting a video into clip files: one pass over the source, in order, each span written
// as an MP4 file through a temporary name and renamed when whole. Streamed: one clip is
// open at a time and nothing is held beyond a frame, the encoders' lookahead and the
// audio between two frames, whatever the video's length.
//   encode: exact frames. Every frame of the span decoded and re-encoded with libx264
//           (libavcodec), AAC audio cut to the same times.
//   copy:   no re-encoding. The clip starts at the first keyframe inside its span and
//           ends at its end (where B-frames at the end need a frame past it, before
//           them); audio packets within the same times. The clip states the span it
//           really got.
// Frames are numbered as VideoReader numbers them (decoder output, from 0), so a span from
// motion's cuts is the frames motion saw. Stateless; thread-safe (each call opens its own
// demuxers).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "media/video.h"

namespace framemill {

struct ClipSpan {
  int64_t start_frame = 0, end_frame = 0;  // source frames [start, end)
  bool operator==(const ClipSpan&) const = default;
};

enum class ClipMode { kEncode, kCopy };

struct ClipEncoding {
  ClipMode mode = ClipMode::kEncode;
  std::string preset = "veryfast";  // libx264's preset (encode)
  int crf = 20;                     // libx264's constant rate factor (encode)
  int audio_kbps = 128;             // AAC (encode)
  int threads = 1;                  // decoder and encoder threads (a worker has its share)
  bool operator==(const ClipEncoding&) const = default;
};

struct ClipFile {
  ClipSpan span;                // the frames it holds (copy: from its first keyframe)
  double start_s = 0, end_s = 0;  // source times of its first frame and of the frame after
  int64_t frames = 0;
  double fps = 0;
  int width = 0, height = 0;
  std::string codec;            // of its video
  bool has_audio = false;
  int64_t bytes = 0;
  std::string path;
  double rotation_deg = 0;      // the source's display rotation, kept in the clip (counter-clockwise)
};

// What became of one span: a file, or why there is none.
struct ClipOutcome {
  std::optional<ClipFile> file;
  std::string reason;
};

struct ClipWriteOptions {
  ClipEncoding encoding;
  VideoLimits limits;
};

// Writes span k of `spans` (sorted, disjoint, non-empty) to path_for(k). One outcome per
// span. Fails as the readers do when the source cannot be read at all (Unsupported: not
// a video; TooLarge; Corruption), IOError when a file cannot be written; the clip in hand
// then leaves no file. A span past the end of the stream is cut to what the stream has,
// and one with nothing left gets its reason.
Result<std::vector<ClipOutcome>> WriteClips(const std::string& source,
                                            const std::vector<ClipSpan>& spans,
                                            const ClipWriteOptions& options,
                                            const std::function<std::string(size_t)>& path_for);

}  // namespace framemill
