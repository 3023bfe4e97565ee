#include "media/video.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <opencv2/videoio.hpp>

#include "base/time_split.h"
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

Result<VideoSample> SampleVideoFrames(const std::string& path, int count,
                                      const VideoLimits& limits) {
  TimeSpent decoding(TimePart::kDecode);
  auto sniffed = SniffVideoFile(path);
  if (!sniffed.ok()) return sniffed.status();
  cv::VideoCapture cap;
  try {
    cap.open(path, cv::CAP_FFMPEG);
  } catch (const cv::Exception& e) {
    return Status::Corruption(std::string("could not open video: ") + e.what());
  }
  if (!cap.isOpened())
    return Status::Corruption("could not open " + sniffed->format + " video (damaged or truncated)");
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
  count = static_cast<int>(std::min<int64_t>(count, span));
  for (int k = 0; k < count; ++k) {
    // Centres of `count` equal spans: the first and last frames are avoided, since
    // fades and black leaders there say little about the footage.
    int64_t idx = static_cast<int64_t>((k + 0.5) * static_cast<double>(span) / count);
    cv::Mat frame;
    bool ok = cap.set(cv::CAP_PROP_POS_FRAMES, static_cast<double>(idx)) && cap.read(frame);
    if (!ok || frame.empty()) {
      return Status::Corruption("video truncated or damaged: frame " + std::to_string(idx) +
                                " of " + std::to_string(out.info.frames) + " unreadable");
    }
    out.indices.push_back(idx);
    out.frames.push_back(frame);
  }
  return out;
}

}  // namespace framemill
