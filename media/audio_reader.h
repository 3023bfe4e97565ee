// A media file's best audio stream, decoded once and resampled (libswresample) to mono
// float at the rate analysis wants (16 kHz for voice activity). The stream's own start
// time is kept, so a container that declares the audio ahead of or behind the picture
// (an edit list, ffmpeg's -itsoffset) is reported as such, apart from anything measured.
// Stateless; thread-safe (each call opens its own decoder).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace framemill {

struct AudioReadOptions {
  int sample_rate = 16000;
  double max_seconds = 3 * 3600.0;  // samples beyond are not decoded
};

struct AudioTrack {
  std::vector<float> samples;  // mono, [-1, 1], at sample_rate
  int sample_rate = 0;
  std::string codec;
  int source_rate = 0, source_channels = 0;
  // When the first sample plays, relative to the first video frame (0 without video):
  // the container's declared offset. Positive: the audio starts later.
  double start_offset_s = 0;
  int64_t damaged_packets = 0;
  double seconds() const { return sample_rate ? double(samples.size()) / sample_rate : 0; }
};

// NotFound when the file has no decodable audio stream (a silent video); Corruption when
// it breaks before any audio decoded; Unsupported when it is not a video file.
Result<AudioTrack> ReadAudio(const std::string& path, const AudioReadOptions& options = {});

}  // namespace framemill
