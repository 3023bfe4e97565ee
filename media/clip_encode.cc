// WriteClips in encode mode: every frame of a span decoded and re-encoded (libx264), with
// the source's audio decoded once, in step with the picture, and AAC-encoded per clip.
#include <cmath>
#include <limits>
#include <memory>
#include <optional>

extern "C" {
#include <libavutil/audio_fifo.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>
}

#include "media/av_decoder.h"
#include "media/clip_pass.h"

namespace framemill::clips {

namespace {

struct CodecFree {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameFree {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketFree {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
using CodecPtr = std::unique_ptr<AVCodecContext, CodecFree>;
using FramePtr = std::unique_ptr<AVFrame, FrameFree>;
using PacketPtr = std::unique_ptr<AVPacket, PacketFree>;

// Every packet the encoder has ready (all of them once it was sent the end) into the clip.
// A packet without a duration (libx264 gives none) lasts `duration`: the MP4 muxer ends the
// track at the last packet's end, and a last frame of no length is one players drop.
Status Drain(AVCodecContext* enc, AVPacket* pkt, ClipOutput* out, int stream, int64_t duration = 0) {
  for (;;) {
    const int rc = avcodec_receive_packet(enc, pkt);
    if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return Status::OK();
    if (rc < 0) return Status::Internal(std::string(enc->codec->name) + " encoder: " + AvError(rc));
    if (pkt->duration <= 0) pkt->duration = duration;
    FM_RETURN_IF_ERROR(out->Write(pkt, stream, enc->time_base));
  }
}

Status Send(AVCodecContext* enc, const AVFrame* frame, AVPacket* pkt, ClipOutput* out, int stream,
            int64_t duration = 0) {
  const int rc = avcodec_send_frame(enc, frame);
  if (rc < 0) return Status::Internal(std::string(enc->codec->name) + " encoder refused a frame: " + AvError(rc));
  return Drain(enc, pkt, out, stream, duration);
}

// One clip's libx264 encoder, fed the source's decoded frames. 4:2:0 sources go in as they
// are; other pixel formats are converted (bit-exact) first. An odd width or height loses
// its last column or row (4:2:0 needs even sizes).
class VideoEncoder {
 public:
  static Result<std::unique_ptr<VideoEncoder>> Open(const AVFrame* first, const AVStream* source,
                                                    AVRational rate, const ClipEncoding& e,
                                                    ClipOutput* out) {
    const AVCodec* codec = avcodec_find_encoder_by_name("libx264");
    if (codec == nullptr) return Status::Unsupported("this libavcodec has no libx264 encoder");
    std::unique_ptr<VideoEncoder> v(new VideoEncoder());
    v->out_ = out;
    v->enc_.reset(avcodec_alloc_context3(codec));
    v->pkt_.reset(av_packet_alloc());
    if (!v->enc_ || !v->pkt_) return Status::OutOfMemory("libx264 context");
    AVCodecContext* c = v->enc_.get();
    c->width = first->width & ~1;
    c->height = first->height & ~1;
    if (c->width < 2 || c->height < 2) return Status::Unsupported("frames too small to encode");
    const auto src = static_cast<AVPixelFormat>(first->format);
    v->direct_ = src == AV_PIX_FMT_YUV420P || src == AV_PIX_FMT_YUVJ420P;
    c->pix_fmt = v->direct_ ? src : AV_PIX_FMT_YUV420P;
    c->time_base = source->time_base;
    c->framerate = rate;
    if (rate.num > 0 && rate.den > 0) v->frame_ticks_ = av_rescale_q(1, av_inv_q(rate), c->time_base);
    c->sample_aspect_ratio = first->sample_aspect_ratio;
    c->color_range = first->color_range;
    c->colorspace = first->colorspace;
    c->color_primaries = first->color_primaries;
    c->color_trc = first->color_trc;
    c->thread_count = std::max(1, e.threads);
    c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER | AV_CODEC_FLAG_BITEXACT;
    av_opt_set(c->priv_data, "preset", e.preset.c_str(), 0);
    av_opt_set_double(c->priv_data, "crf", e.crf, 0);
    // libx264's AVX-512 kernels made other bytes from the same frames once a process had
    // encoded a few clips (Megamind's frames 150-200, six times in one process: 2-4
    // different files on an AMD EPYC with AVX-512; valgrind, which has no AVX-512, saw no
    // uninitialised read). Without them: the same bytes every time, the same size (vtest
    // whole: 6,704,612 bytes either way) and the same speed. Every AVX-512 CPU has the rest.
    if (__builtin_cpu_supports("avx512f"))
      av_opt_set(c->priv_data, "x264-params",
                 "asm=MMX2,SSE,SSE2,SSE2Fast,SSE3,SSSE3,SSE4,SSE4.2,AVX,FMA3,BMI1,BMI2,AVX2,LZCNT,Cache64", 0);
    int rc = avcodec_open2(c, codec, nullptr);
    if (rc < 0) return Status::InvalidArgument("libx264 (preset " + e.preset + "): " + AvError(rc));
    if (!v->direct_) {
      v->sws_ = sws_getContext(first->width, first->height, src, c->width, c->height, c->pix_fmt,
                               SWS_BICUBIC | SWS_BITEXACT | SWS_ACCURATE_RND, nullptr, nullptr, nullptr);
      v->converted_.reset(av_frame_alloc());
      if (v->sws_ == nullptr || !v->converted_) return Status::Unsupported("no conversion from this pixel format");
      v->converted_->format = c->pix_fmt;
      v->converted_->width = c->width;
      v->converted_->height = c->height;
      if (av_frame_get_buffer(v->converted_.get(), 0) < 0) return Status::OutOfMemory("frame buffer");
    }
    auto stream = out->AddStream(c);
    if (!stream.ok()) return stream.status();
    v->stream_ = *stream;
    FM_RETURN_IF_ERROR(out->CopyDisplayMatrix(*stream, source));
    return v;
  }
  ~VideoEncoder() { sws_freeContext(sws_); }

  Status Encode(const AVFrame* source, int64_t pts) {
    FramePtr f(av_frame_alloc());
    if (!f) return Status::OutOfMemory("frame");
    if (direct_) {
      if (av_frame_ref(f.get(), source) < 0) return Status::OutOfMemory("frame reference");
      f->width = enc_->width;  // an odd size's last column and row are left out
      f->height = enc_->height;
    } else {
      if (av_frame_make_writable(converted_.get()) < 0) return Status::OutOfMemory("frame buffer");
      sws_scale(sws_, source->data, source->linesize, 0, source->height, converted_->data,
                converted_->linesize);
      if (av_frame_ref(f.get(), converted_.get()) < 0) return Status::OutOfMemory("frame reference");
    }
    f->pts = pts;
    f->pict_type = AV_PICTURE_TYPE_NONE;  // the encoder decides
    return Send(enc_.get(), f.get(), pkt_.get(), out_, stream_, frame_ticks_);
  }
  Status Finish() { return Send(enc_.get(), nullptr, pkt_.get(), out_, stream_, frame_ticks_); }
  int width() const { return enc_->width; }
  int height() const { return enc_->height; }

 private:
  VideoEncoder() = default;
  CodecPtr enc_;
  PacketPtr pkt_;
  SwsContext* sws_ = nullptr;
  FramePtr converted_;
  bool direct_ = true;
  int64_t frame_ticks_ = 0;  // one frame, in the encoder's time base
  ClipOutput* out_ = nullptr;
  int stream_ = -1;
};

// The source's audio, decoded once and in order into a queue of samples in the AAC
// encoder's format, and cut per clip at sample precision: a clip of source times
// [start, end) holds the samples of those times. Times are relative to the first video
// frame, as the video's are.
class AudioCutter {
 public:
  // Null when the file has no decodable audio.
  static Result<std::unique_ptr<AudioCutter>> Open(const std::string& path, const std::string& format,
                                                   double video_start_s) {
    std::unique_ptr<AudioCutter> a(new AudioCutter());
    Status s = a->dec_.Open(path, format, AVMEDIA_TYPE_AUDIO, 1);
    if (s.IsNotFound()) return std::unique_ptr<AudioCutter>();
    FM_RETURN_IF_ERROR(s);
    a->video_start_s_ = video_start_s;
    AVCodecContext* d = a->dec_.codec();
    if (d->sample_rate <= 0 || d->ch_layout.nb_channels <= 0)
      return std::unique_ptr<AudioCutter>();  // nothing to cut: the clips are silent
    a->aac_ = avcodec_find_encoder(AV_CODEC_ID_AAC);
    if (a->aac_ == nullptr) return Status::Unsupported("this libavcodec has no AAC encoder");
    a->rate_ = SupportedRate(a->aac_, d->sample_rate);
    if (d->ch_layout.nb_channels <= 2) {
      av_channel_layout_default(&a->layout_, d->ch_layout.nb_channels);
    } else {
      a->layout_ = AV_CHANNEL_LAYOUT_STEREO;  // more channels are mixed down to two
    }
    SwrContext* swr = nullptr;
    int rc = swr_alloc_set_opts2(&swr, &a->layout_, AV_SAMPLE_FMT_FLTP, a->rate_, &d->ch_layout,
                                 d->sample_fmt, d->sample_rate, 0, nullptr);
    a->swr_ = swr;
    if (rc < 0 || (rc = swr_init(swr)) < 0) return Status::Unsupported("audio resampler: " + AvError(rc));
    a->fifo_ = av_audio_fifo_alloc(AV_SAMPLE_FMT_FLTP, a->layout_.nb_channels, 4096);
    a->pkt_.reset(av_packet_alloc());
    if (a->fifo_ == nullptr || !a->pkt_) return Status::OutOfMemory("audio queue");
    return a;
  }
  ~AudioCutter() {
    swr_free(&swr_);
    if (fifo_ != nullptr) av_audio_fifo_free(fifo_);
  }

  // Opens the clip's AAC encoder and its stream on `out` (before out->Start()); false when
  // the audio has ended before `start_s` (the clip is silent).
  Result<bool> BeginClip(double start_s, int kbps, ClipOutput* out) {
    FM_RETURN_IF_ERROR(Pull(start_s));
    DropBefore(start_s);
    if (ended_ && av_audio_fifo_size(fifo_) == 0) return false;
    enc_.reset(avcodec_alloc_context3(aac_));
    if (!enc_) return Status::OutOfMemory("AAC context");
    AVCodecContext* c = enc_.get();
    c->sample_fmt = AV_SAMPLE_FMT_FLTP;
    c->sample_rate = rate_;
    if (av_channel_layout_copy(&c->ch_layout, &layout_) < 0) return Status::OutOfMemory("channel layout");
    c->bit_rate = int64_t{kbps} * 1000;
    c->time_base = AVRational{1, rate_};
    c->flags |= AV_CODEC_FLAG_GLOBAL_HEADER | AV_CODEC_FLAG_BITEXACT;
    const int rc = avcodec_open2(c, aac_, nullptr);
    if (rc < 0) return Status::Internal("AAC encoder: " + AvError(rc));
    auto stream = out->AddStream(c);
    if (!stream.ok()) return stream.status();
    stream_ = *stream;
    out_ = out;
    // Audio that starts after the clip's first frame starts as late in the clip.
    next_pts_ = std::max<int64_t>(0, std::llround((queue_start_s_ - start_s) * rate_));
    return true;
  }

  // Between clips: the audio before `t_s` is decoded and let go, so the queue never holds
  // more than the time between two frames.
  Status Skip(double t_s) {
    FM_RETURN_IF_ERROR(Pull(t_s));
    DropBefore(t_s);
    return Status::OK();
  }

  // The whole encoder frames of samples before `t_s`.
  Status EncodeUntil(double t_s) {
    if (!enc_) return Status::OK();
    FM_RETURN_IF_ERROR(Pull(t_s));
    const int frame = enc_->frame_size;
    while (SamplesBefore(t_s) >= frame) FM_RETURN_IF_ERROR(Emit(frame));
    return Status::OK();
  }

  // The rest of the samples before `end_s`, then the encoder's tail; the encoder closes.
  Status EndClip(double end_s) {
    if (!enc_) return Status::OK();
    FM_RETURN_IF_ERROR(Pull(end_s));
    const int frame = enc_->frame_size;
    for (int64_t n = SamplesBefore(end_s); n > 0; n = SamplesBefore(end_s))
      FM_RETURN_IF_ERROR(Emit(static_cast<int>(std::min<int64_t>(n, frame))));
    FM_RETURN_IF_ERROR(Send(enc_.get(), nullptr, pkt_.get(), out_, stream_));
    enc_.reset();
    return Status::OK();
  }

 private:
  AudioCutter() = default;

  static int SupportedRate(const AVCodec* codec, int rate) {
    if (codec->supported_samplerates == nullptr) return rate;
    for (const int* r = codec->supported_samplerates; *r != 0; ++r)
      if (*r == rate) return rate;
    return 48000;
  }

  double QueueEnd() const { return queue_start_s_ + double(av_audio_fifo_size(fifo_)) / rate_; }
  int64_t SamplesBefore(double t_s) const {
    const auto n = static_cast<int64_t>(std::floor((t_s - queue_start_s_) * rate_ + 1e-6));
    return std::clamp<int64_t>(n, 0, av_audio_fifo_size(fifo_));
  }
  void DropBefore(double t_s) {
    const int64_t n = SamplesBefore(t_s);
    av_audio_fifo_drain(fifo_, static_cast<int>(n));
    queue_start_s_ += double(n) / rate_;
  }

  // Decodes until the queue holds the samples of times before `until_s`, or the audio ends.
  Status Pull(double until_s) {
    while (!ended_ && (std::isnan(queue_start_s_) || QueueEnd() < until_s)) {
      auto more = dec_.Next();
      if (!more.ok()) return more.status();
      const AVFrame* f = dec_.frame();
      if (*more && std::isnan(queue_start_s_)) {
        const int64_t pts = f->best_effort_timestamp;
        queue_start_s_ = pts == AV_NOPTS_VALUE ? 0 : pts * av_q2d(dec_.stream()->time_base) - video_start_s_;
      }
      ended_ = !*more;
      const int in = *more ? f->nb_samples : 0;  // at the end, what the resampler holds
      const int room = swr_get_out_samples(swr_, in);
      if (room <= 0) continue;
      FramePtr buf(av_frame_alloc());
      if (!buf) return Status::OutOfMemory("audio buffer");
      buf->format = AV_SAMPLE_FMT_FLTP;
      buf->nb_samples = room;
      if (av_channel_layout_copy(&buf->ch_layout, &layout_) < 0 || av_frame_get_buffer(buf.get(), 0) < 0)
        return Status::OutOfMemory("audio buffer");
      const int got = swr_convert(swr_, buf->extended_data, room,
                                  *more ? const_cast<const uint8_t**>(f->extended_data) : nullptr, in);
      if (got < 0) return Status::Corruption("cannot resample the audio: " + AvError(got));
      if (got > 0 && av_audio_fifo_write(fifo_, reinterpret_cast<void**>(buf->extended_data), got) < got)
        return Status::OutOfMemory("audio queue");
    }
    if (std::isnan(queue_start_s_)) queue_start_s_ = 0;
    return Status::OK();
  }

  Status Emit(int n) {
    FramePtr f(av_frame_alloc());
    if (!f) return Status::OutOfMemory("audio frame");
    f->format = AV_SAMPLE_FMT_FLTP;
    f->sample_rate = rate_;
    f->nb_samples = n;
    if (av_channel_layout_copy(&f->ch_layout, &layout_) < 0 || av_frame_get_buffer(f.get(), 0) < 0)
      return Status::OutOfMemory("audio frame");
    av_audio_fifo_read(fifo_, reinterpret_cast<void**>(f->extended_data), n);
    queue_start_s_ += double(n) / rate_;
    f->pts = next_pts_;
    next_pts_ += n;
    return Send(enc_.get(), f.get(), pkt_.get(), out_, stream_);
  }

  AvDecoder dec_;
  const AVCodec* aac_ = nullptr;
  SwrContext* swr_ = nullptr;
  AVAudioFifo* fifo_ = nullptr;
  AVChannelLayout layout_{};
  int rate_ = 48000;
  double video_start_s_ = 0;
  double queue_start_s_ = std::numeric_limits<double>::quiet_NaN();  // the queue's first sample
  bool ended_ = false;
  CodecPtr enc_;  // the clip in hand's
  PacketPtr pkt_;
  ClipOutput* out_ = nullptr;
  int stream_ = -1;
  int64_t next_pts_ = 0;
};

// The clip in hand.
struct OpenClip {
  size_t k = 0;
  std::unique_ptr<ClipOutput> out;
  std::unique_ptr<VideoEncoder> video;
  ClipFile file;
  int64_t first_pts = AV_NOPTS_VALUE, last_pts = AV_NOPTS_VALUE;
};

// The encode pass over one source: frames decoded in order, each span's encoded into its clip.
class EncodeWriter {
 public:
  EncodeWriter(const Source& src, const std::vector<ClipSpan>& spans, const ClipWriteOptions& options,
               const std::function<std::string(size_t)>& path_for, std::vector<ClipOutcome>* outcomes)
      : src_(src), spans_(spans), options_(options), path_for_(path_for), outcomes_(outcomes) {}

  Status Run() {
    FM_RETURN_IF_ERROR(src_.OpenVideo(&av_, options_.encoding.threads));
    clock_.emplace(av_.stream(), src_.fps);
    auto audio = AudioCutter::Open(src_.path, src_.format, clock_->start_s());
    if (!audio.ok()) return audio.status();
    audio_ = std::move(audio).value();
    rate_ = av_guess_frame_rate(av_.format(), av_.stream(), nullptr);
    while (k_ < spans_.size()) {
      auto more = av_.Next();
      if (!more.ok()) return more.status();
      if (!*more || av_.decoded() > options_.limits.max_frames) break;
      FM_RETURN_IF_ERROR(OnFrame(av_.decoded() - 1, clock_->Time(av_.frame())));
    }
    // The stream ended inside a span: the clip holds what there was.
    if (clip_) FM_RETURN_IF_ERROR(Close(last_index_ + 1, last_t_ + clock_->FrameSeconds()));
    for (; k_ < spans_.size(); ++k_)
      (*outcomes_)[k_].reason = "the video ends at frame " + std::to_string(last_index_ + 1) +
                                ", before the span starts";
    return Status::OK();
  }

 private:
  Status OnFrame(int64_t index, double t) {
    if (clip_ && index >= spans_[clip_->k].end_frame) FM_RETURN_IF_ERROR(Close(index, t));
    last_index_ = index;
    last_t_ = t;
    if (k_ >= spans_.size()) return Status::OK();
    if (index < spans_[k_].start_frame) return audio_ ? audio_->Skip(t) : Status::OK();
    if (!clip_) FM_RETURN_IF_ERROR(Open(index, t));
    FM_RETURN_IF_ERROR(clip_->video->Encode(av_.frame(), ClipPts()));
    ++clip_->file.frames;
    return audio_ ? audio_->EncodeUntil(t) : Status::OK();
  }

  // The frame's time in the clip, from 0, rising.
  int64_t ClipPts() {
    int64_t pts = av_.frame()->best_effort_timestamp;
    if (clip_->first_pts == AV_NOPTS_VALUE) clip_->first_pts = pts;
    pts = pts == AV_NOPTS_VALUE ? clip_->file.frames : pts - clip_->first_pts;
    if (clip_->last_pts != AV_NOPTS_VALUE && pts <= clip_->last_pts) pts = clip_->last_pts + 1;
    clip_->last_pts = pts;
    return pts;
  }

  Status Open(int64_t index, double t) {
    OpenClip c;
    c.k = k_;
    auto out = ClipOutput::Open(path_for_(k_));
    if (!out.ok()) return out.status();
    c.out = std::move(out).value();
    auto video = VideoEncoder::Open(av_.frame(), av_.stream(), rate_, options_.encoding, c.out.get());
    if (!video.ok()) return video.status();
    c.video = std::move(video).value();
    bool has_audio = false;
    if (audio_) {
      auto began = audio_->BeginClip(t, options_.encoding.audio_kbps, c.out.get());
      if (!began.ok()) return began.status();
      has_audio = *began;
    }
    FM_RETURN_IF_ERROR(c.out->Start());
    c.file = ClipFile{{index, spans_[k_].end_frame}, t, 0, 0, src_.fps, c.video->width(),
                      c.video->height(), "h264", has_audio, 0, path_for_(k_)};
    clip_ = std::move(c);
    return Status::OK();
  }

  Status Close(int64_t end_index, double end_s) {
    OpenClip& c = *clip_;
    FM_RETURN_IF_ERROR(c.video->Finish());
    if (audio_) FM_RETURN_IF_ERROR(audio_->EndClip(end_s));
    auto bytes = c.out->Finish();
    if (!bytes.ok()) return bytes.status();
    c.file.span.end_frame = end_index;
    c.file.end_s = end_s;
    c.file.bytes = *bytes;
    (*outcomes_)[c.k].file = c.file;
    clip_.reset();
    ++k_;
    return Status::OK();
  }

  const Source& src_;
  const std::vector<ClipSpan>& spans_;
  const ClipWriteOptions& options_;
  const std::function<std::string(size_t)>& path_for_;
  std::vector<ClipOutcome>* outcomes_;
  AvDecoder av_;
  std::optional<FrameClock> clock_;
  std::unique_ptr<AudioCutter> audio_;  // null: the source is silent
  AVRational rate_{0, 1};
  std::optional<OpenClip> clip_;
  size_t k_ = 0;  // the span in hand, or next
  int64_t last_index_ = -1;
  double last_t_ = 0;
};

}  // namespace

Status EncodePass(const Source& src, const std::vector<ClipSpan>& spans,
                  const ClipWriteOptions& options, const std::function<std::string(size_t)>& path_for,
                  std::vector<ClipOutcome>* outcomes) {
  return EncodeWriter(src, spans, options, path_for, outcomes).Run();
}

}  // namespace framemill::clips
