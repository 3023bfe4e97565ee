#include "media/av_decoder.h"

#include <algorithm>

extern "C" {
#include <libavutil/log.h>
}

namespace framemill {

std::string AvError(int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {0};
  av_strerror(code, buf, sizeof buf);
  return buf;
}

AvDecoder::~AvDecoder() {
  av_frame_free(&frame_);
  av_packet_free(&packet_);
  avcodec_free_context(&dec_);
  avformat_close_input(&fmt_);
}

Status AvDecoder::Open(const std::string& path, const std::string& format, AVMediaType type,
                       int threads) {
  // Damaged files make libav print per packet; the readers report damage as values. (Set
  // on every open: OpenCV's own FFmpeg reader sets the level when it first opens a file.)
  av_log_set_level(AV_LOG_QUIET);
  kind_ = type == AVMEDIA_TYPE_AUDIO ? "audio" : "video";
  int rc = avformat_open_input(&fmt_, path.c_str(), nullptr, nullptr);
  if (rc < 0) return Status::Corruption("could not open " + format + " " + kind_ + ": " + AvError(rc));
  if ((rc = avformat_find_stream_info(fmt_, nullptr)) < 0)
    return Status::Corruption(format + " " + kind_ + ": no stream information: " + AvError(rc));
  const AVCodec* codec = nullptr;
  stream_ = av_find_best_stream(fmt_, type, -1, -1, &codec, 0);
  if (stream_ < 0 || codec == nullptr)
    return Status::NotFound(format + " file holds no decodable " + kind_ + " stream");
  const std::string name = avcodec_get_name(stream()->codecpar->codec_id);
  dec_ = avcodec_alloc_context3(codec);
  if (dec_ == nullptr || avcodec_parameters_to_context(dec_, stream()->codecpar) < 0)
    return Status::Internal("could not set up the " + name + " decoder");
  dec_->thread_count = std::max(1, threads);
  // Lets the decoder carry timestamps through what it drops (an AAC encoder's priming).
  dec_->pkt_timebase = stream()->time_base;
  if ((rc = avcodec_open2(dec_, codec, nullptr)) < 0)
    return Status::Corruption("could not open the " + name + " decoder: " + AvError(rc));
  packet_ = av_packet_alloc();
  frame_ = av_frame_alloc();
  if (packet_ == nullptr || frame_ == nullptr) return Status::OutOfMemory("av_packet/frame_alloc");
  return Status::OK();
}

Result<bool> AvDecoder::Feed() {
  for (;;) {
    const int rc = av_read_frame(fmt_, packet_);
    if (rc < 0) {
      read_error_ = rc != AVERROR_EOF;
      if (rc != AVERROR_EOF && decoded_ == 0)
        return Status::Corruption(kind_ + " unreadable before its first frame: " + AvError(rc));
      avcodec_send_packet(dec_, nullptr);  // drain what the decoder holds
      draining_ = true;
      return false;
    }
    if (packet_->stream_index != stream_) {
      av_packet_unref(packet_);
      continue;
    }
    if ((packet_->flags & AV_PKT_FLAG_CORRUPT) != 0) ++short_packets_;
    const int sent = avcodec_send_packet(dec_, packet_);
    av_packet_unref(packet_);
    if (sent < 0 && sent != AVERROR(EAGAIN)) ++damaged_;
    return true;
  }
}

Result<bool> AvDecoder::Next() {
  while (!finished_) {
    const int rc = avcodec_receive_frame(dec_, frame_);
    if (rc == AVERROR(EAGAIN)) {
      if (draining_) break;
      auto fed = Feed();
      if (!fed.ok()) return fed.status();
      continue;
    }
    if (rc < 0) break;  // end of stream, or a decoder that cannot go on
    ++decoded_;
    NoteDamage();
    return true;
  }
  finished_ = true;
  return false;
}

void AvDecoder::NoteDamage() {
  const int64_t index = decoded_ - 1;
  const bool flagged = (frame_->flags & AV_FRAME_FLAG_CORRUPT) != 0 || frame_->decode_error_flags != 0 ||
                       damaged_ > damaged_seen_;
  damaged_seen_ = damaged_;
  if (flagged) {
    if (!in_run_) runs_.push_back({index, index});
    in_run_ = true;
  } else if (in_run_ && frame_->key_frame) {
    in_run_ = false;
  }
  if (in_run_) runs_.back().last = index;
}

std::vector<DamagedRun> AvDecoder::damaged_runs() const { return runs_; }

}  // namespace framemill
