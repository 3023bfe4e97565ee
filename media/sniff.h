// Recognising media by content: magic bytes, the dimensions an image header declares
// (so oversized images are refused before any pixel is decoded), and a description of
// what a non-media file looks like, for error messages. Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "media/kind.h"

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

// What content that is not media looks like: "empty", "text", "a PDF document"...
std::string DescribeContent(std::string_view head);

struct ImageHeader {
  int64_t width = 0, height = 0;
};
// Dimensions declared by an image header, reading only `head`. NotFound when the
// format's header is not parsed here (decoding then decides); Corruption when the
// header is present but damaged or cut short.
Result<ImageHeader> ProbeImageHeader(std::string_view head, const std::string& format);

// Reads a file, or its first `max_bytes`; NotFound when it is gone, IOError otherwise.
Result<std::string> ReadFileBytes(const std::string& path, size_t max_bytes = SIZE_MAX);

}  // namespace framemill
