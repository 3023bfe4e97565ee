#include "media/video.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <opencv2/videoio.hpp>

#include "base/time_split.h"
#include "media/av_decoder.h"
#include "media/sniff.h"

namespace framemill {

Result<Sniffed> SniffVideoFile(const std::string& path) {
  auto head = ReadFileBytes(path, 512);
  if (!head.ok()) return head.status();
  if (head->empty()) return Status::Corruption("empty file (0 bytes)");
  auto sniffed = SniffMedia(*head);
  if (!sniffed || sniffed->kind != MediaKind::kVideo)
    return Status::Unsupported("not a video: content is " +
                               (sniffed ? sniffed->format + " image" : DescribeContent(*head)));
  return *sniffed;
}

Status CheckVideoFrameSize(const std::string& format, int width, int height,
                           const VideoLimits& limits) {
  if (width <= 0 || height <= 0) return Status::Corruption(format + " video declares an empty frame");
  const int64_t px = int64_t{width} * height;  // ints: no overflow in int64
  if (px <= limits.max_pixels) return Status::OK();
  char msg[256];
  std::snprintf(msg, sizeof msg,
                "%s video declares %dx%d frames (%.1f MP), over the limit of %.1f MP "
                "(media.max_video_pixels); not decoded",
                format.c_str(), width, height, px / 1e6,
                static_cast<double>(limits.max_pixels) / 1e6);
  return Status::TooLarge(msg);
}

namespace {

Status OpenCapture(const std::string& path, const std::string& format, cv::VideoCapture* cap) {
  try {
    cap->open(path, cv::CAP_FFMPEG);
  } catch (const cv::Exception& e) {
    return Status::Corruption(std::string("could not open video: ") + e.what());
  }
  if (!cap->isOpened()) return Status::Corruption("could not open " + format + " video (damaged or truncated)");
  return Status::OK();
}

// The frames at the centres of `count` equal parts of [0, span): the first and last frames
// are avoided, since fades and black leaders there say little about the footage.
Status ReadCentres(cv::VideoCapture& cap, int64_t span, int count, int64_t declared, VideoSample* out) {
  out->indices.clear();
  out->frames.clear();
  for (int k = 0; k < count; ++k) {
    const auto idx = static_cast<int64_t>((k + 0.5) * static_cast<double>(span) / count);
    cv::Mat frame;
    const bool ok = cap.set(cv::CAP_PROP_POS_FRAMES, static_cast<double>(idx)) && cap.read(frame);
    if (!ok || frame.empty())
      return Status::Corruption("video truncated or damaged: frame " + std::to_string(idx) + " of " +
                                std::to_string(declared) + " unreadable");
    out->indices.push_back(idx);
    out->frames.push_back(frame);
  }
  return Status::OK();
}

// The frames that decode from the start (at most `max_frames`), and whether the file ended
// broken (cut off, or damaged) rather than cleanly.
struct Decodable {
  int64_t frames = 0;
  bool broken = true;
};
Decodable CountDecodable(const std::string& path, const std::string& format, int64_t max_frames) {
  AvDecoder av;
  if (!av.Open(path, format, AVMEDIA_TYPE_VIDEO, 1).ok()) return {};
  Decodable d;
  while (d.frames < max_frames) {
    auto more = av.Next();
    if (!more.ok() || !*more) break;
    ++d.frames;
  }
  d.broken = av.ended_broken();
  return d;
}

}  // namespace

Result<VideoSample> SampleVideoFrames(const std::string& path, int count,
                                      const VideoLimits& limits) {
  TimeSpent decoding(TimePart::kDecode);
  auto sniffed = SniffVideoFile(path);
  if (!sniffed.ok()) return sniffed.status();
  cv::VideoCapture cap;
  FM_RETURN_IF_ERROR(OpenCapture(path, sniffed->format, &cap));
  VideoSample out;
  out.info.fps = cap.get(cv::CAP_PROP_FPS);
  out.info.frames = static_cast<int64_t>(cap.get(cv::CAP_PROP_FRAME_COUNT));
  out.info.width = static_cast<int>(cap.get(cv::CAP_PROP_FRAME_WIDTH));
  out.info.height = static_cast<int>(cap.get(cv::CAP_PROP_FRAME_HEIGHT));
  int fourcc = static_cast<int>(cap.get(cv::CAP_PROP_FOURCC));
  for (int i = 0; i < 4; ++i) {
    char c = static_cast<char>((fourcc >> (8 * i)) & 0xFF);
    if (std::isprint(uint8_t(c))) out.info.codec += c;
  }
  if (out.info.frames <= 0) return Status::Corruption("video reports no frames");
  FM_RETURN_IF_ERROR(CheckVideoFrameSize(sniffed->format, out.info.width, out.info.height, limits));
  // A header may declare any number of frames: sample within the first max_frames.
  const int64_t span = std::min(out.info.frames, std::max<int64_t>(1, limits.max_frames));
  Status read = ReadCentres(cap, span, static_cast<int>(std::min<int64_t>(count, span)), out.info.frames, &out);
  if (read.ok()) return out;
  // A missing frame: a truncated or damaged file (it fails), or a file that ends cleanly
  // before the length its header states (sampled over what there is).
  const Decodable d = CountDecodable(path, sniffed->format, span);
  if (d.broken || d.frames <= 0 || d.frames >= span) return read;
  const int64_t real = d.frames;
  out.declared_frames = out.info.frames;
  out.info.frames = real;
  cv::VideoCapture again;
  FM_RETURN_IF_ERROR(OpenCapture(path, sniffed->format, &again));
  FM_RETURN_IF_ERROR(ReadCentres(again, real, static_cast<int>(std::min<int64_t>(count, real)), real, &out));
  return out;
}

}  // namespace framemill
