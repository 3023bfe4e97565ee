#include "media/video_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/log.h>
#include <libswscale/swscale.h>
}

namespace framemill {

namespace {

std::string AvError(int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {0};
  av_strerror(code, buf, sizeof buf);
  return buf;
}

// Even sizes: chroma-subsampled sources scale cleanly, and encoders downstream accept them.
cv::Size OutputSize(int width, int height, int max_width) {
  if (max_width <= 0 || width <= max_width) return {width, height};
  const int w = std::max(2, max_width & ~1);
  const int h = std::max(2, static_cast<int>(std::lround(double(height) * w / width)) & ~1);
  return {w, h};
}

}  // namespace

struct VideoReader::Impl {
  VideoReaderOptions options;
  VideoInfo info;
  cv::Size out_size;
  AVFormatContext* fmt = nullptr;
  AVCodecContext* dec = nullptr;
  AVPacket* packet = nullptr;
  AVFrame* frame = nullptr;
  SwsContext* sws = nullptr;
  int stream = -1;
  AVRational time_base{1, 1};
  int64_t start_pts = AV_NOPTS_VALUE;
  double last_time_s = -1;
  double next_keep_s = -std::numeric_limits<double>::infinity();
  int64_t decoded = 0, damaged = 0;
  bool draining = false, finished = false;

  ~Impl() {
    sws_freeContext(sws);
    av_frame_free(&frame);
    av_packet_free(&packet);
    avcodec_free_context(&dec);
    avformat_close_input(&fmt);
  }

  Status OpenStream(const std::string& path, const std::string& format);
  double FrameTime();
  bool Keep(double time_s);
  void Convert(cv::Mat* out);
  // Feeds the decoder one packet of our stream; false when the file is exhausted.
  Result<bool> Feed();
};

Status VideoReader::Impl::OpenStream(const std::string& path, const std::string& format) {
  int rc = avformat_open_input(&fmt, path.c_str(), nullptr, nullptr);
  if (rc < 0) return Status::Corruption("could not open " + format + " video: " + AvError(rc));
  if ((rc = avformat_find_stream_info(fmt, nullptr)) < 0)
    return Status::Corruption(format + " video: no stream information: " + AvError(rc));
  const AVCodec* codec = nullptr;
  stream = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
  if (stream < 0 || codec == nullptr)
    return Status::Corruption(format + " file holds no decodable video stream");
  AVStream* st = fmt->streams[stream];
  info.width = st->codecpar->width;
  info.height = st->codecpar->height;
  info.codec = avcodec_get_name(st->codecpar->codec_id);
  FM_RETURN_IF_ERROR(CheckVideoFrameSize(format, info.width, info.height, options.limits));
  const AVRational rate = av_guess_frame_rate(fmt, st, nullptr);
  info.fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0;
  info.frames = st->nb_frames;
  if (info.frames <= 0 && fmt->duration > 0 && info.fps > 0)
    info.frames = std::llround(fmt->duration / double(AV_TIME_BASE) * info.fps);
  time_base = st->time_base;
  start_pts = st->start_time;
  dec = avcodec_alloc_context3(codec);
  if (dec == nullptr || avcodec_parameters_to_context(dec, st->codecpar) < 0)
    return Status::Internal("could not set up the " + info.codec + " decoder");
  dec->thread_count = std::max(1, options.threads);
  if ((rc = avcodec_open2(dec, codec, nullptr)) < 0)
    return Status::Corruption("could not open the " + info.codec + " decoder: " + AvError(rc));
  packet = av_packet_alloc();
  frame = av_frame_alloc();
  if (packet == nullptr || frame == nullptr) return Status::OutOfMemory("av_packet/frame_alloc");
  out_size = OutputSize(info.width, info.height, options.max_width);
  return Status::OK();
}

double VideoReader::Impl::FrameTime() {
  const int64_t pts = frame->best_effort_timestamp;
  if (pts == AV_NOPTS_VALUE) {  // no timestamp: one frame after the last
    const double step = info.fps > 0 ? 1.0 / info.fps : 0.04;
    return last_time_s < 0 ? 0 : last_time_s + step;
  }
  if (start_pts == AV_NOPTS_VALUE) start_pts = pts;
  return double(pts - start_pts) * av_q2d(time_base);
}

bool VideoReader::Impl::Keep(double time_s) {
  if (options.max_fps <= 0) return true;
  const double period = 1.0 / options.max_fps;
  const double slack = info.fps > 0 ? 0.5 / info.fps : 0;  // a frame that is nearly due is due
  if (time_s + slack < next_keep_s) return false;
  // Kept frames follow a grid of `period`; after a gap in the stream the grid restarts
  // at this frame rather than catching up with a burst.
  next_keep_s = time_s - next_keep_s > period ? time_s + period : next_keep_s + period;
  return true;
}

void VideoReader::Impl::Convert(cv::Mat* out) {
  const auto dst_format = options.gray ? AV_PIX_FMT_GRAY8 : AV_PIX_FMT_BGR24;
  sws = sws_getCachedContext(sws, frame->width, frame->height,
                             static_cast<AVPixelFormat>(frame->format), out_size.width,
                             out_size.height, dst_format, SWS_AREA, nullptr, nullptr, nullptr);
  out->create(out_size, options.gray ? CV_8UC1 : CV_8UC3);
  uint8_t* dst[1] = {out->data};
  int dst_stride[1] = {static_cast<int>(out->step)};
  sws_scale(sws, frame->data, frame->linesize, 0, frame->height, dst, dst_stride);
}

Result<bool> VideoReader::Impl::Feed() {
  for (;;) {
    const int rc = av_read_frame(fmt, packet);
    if (rc < 0) {
      if (rc != AVERROR_EOF && decoded == 0)
        return Status::Corruption("video unreadable before its first frame: " + AvError(rc));
      avcodec_send_packet(dec, nullptr);  // drain what the decoder holds
      draining = true;
      return false;
    }
    if (packet->stream_index != stream) {
      av_packet_unref(packet);
      continue;
    }
    const int sent = avcodec_send_packet(dec, packet);
    av_packet_unref(packet);
    if (sent < 0 && sent != AVERROR(EAGAIN)) ++damaged;
    return true;
  }
}

VideoReader::VideoReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VideoReader::~VideoReader() = default;

Result<std::unique_ptr<VideoReader>> VideoReader::Open(const std::string& path,
                                                       const VideoReaderOptions& options) {
  // Damaged files make libav print per packet; the reader reports damage as values. (Set
  // on every open: OpenCV's own FFmpeg reader sets the level when it first opens a file.)
  av_log_set_level(AV_LOG_QUIET);
  auto sniffed = SniffVideoFile(path);
  if (!sniffed.ok()) return sniffed.status();
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  FM_RETURN_IF_ERROR(impl->OpenStream(path, sniffed->format));
  const VideoInfo& vi = impl->info;
  const double seconds =
      vi.fps > 0 ? static_cast<double>(std::min(vi.frames, options.limits.max_frames)) / vi.fps : 0;
  if (options.max_kept > 0 && seconds > 0) {
    const double rate = static_cast<double>(options.max_kept) / seconds;
    if (impl->options.max_fps <= 0 || rate < impl->options.max_fps) impl->options.max_fps = rate;
  }
  return std::unique_ptr<VideoReader>(new VideoReader(std::move(impl)));
}

const VideoInfo& VideoReader::info() const { return impl_->info; }
cv::Size VideoReader::output_size() const { return impl_->out_size; }
int64_t VideoReader::frames_decoded() const { return impl_->decoded; }
int64_t VideoReader::damaged_packets() const { return impl_->damaged; }

Result<bool> VideoReader::Next(VideoFrame* out) {
  Impl& m = *impl_;
  while (!m.finished) {
    const int rc = avcodec_receive_frame(m.dec, m.frame);
    if (rc == AVERROR(EAGAIN)) {
      if (m.draining) break;
      auto fed = m.Feed();
      if (!fed.ok()) return fed.status();
      continue;
    }
    if (rc < 0) break;  // end of stream, or a decoder that cannot go on
    if (m.decoded >= m.options.limits.max_frames) break;
    const int64_t index = m.decoded++;
    const double time_s = m.FrameTime();
    m.last_time_s = time_s;
    if (!m.Keep(time_s)) continue;
    out->index = index;
    out->time_s = time_s;
    m.Convert(&out->image);
    return true;
  }
  m.finished = true;
  if (m.decoded == 0)
    return Status::Corruption(m.info.codec + " video: no frame could be decoded (damaged or truncated)");
  return false;
}

}  // namespace framemill
