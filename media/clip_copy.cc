// WriteClips in copy mode: the source's packets into each clip as they are. A clip starts
// at the first keyframe inside its span (a decoder needs one) and ends at the span's end,
// or, where B-frames at the end need a frame past it, before those B-frames. Frames are
// numbered from their presentation times at the stream's frame rate.
#include <cmath>
#include <memory>
#include <optional>

#include "media/av_decoder.h"
#include "media/clip_pass.h"

namespace framemill::clips {

namespace {

// One stream's packets of a file, in file order, with one packet of lookahead.
class PacketReader {
 public:
  ~PacketReader() {
    av_packet_free(&held_);
    avformat_close_input(&fmt_);
  }
  // NotFound when the file has no stream of `type`.
  Status Open(const std::string& path, AVMediaType type) {
    int rc = avformat_open_input(&fmt_, path.c_str(), nullptr, nullptr);
    if (rc < 0) return Status::Corruption("could not open the video: " + AvError(rc));
    // Presentation times for packets that carry none (an AVI's, B-frames packed): the
    // parser works them out, so frames are numbered in the order they show.
    fmt_->flags |= AVFMT_FLAG_GENPTS;
    if ((rc = avformat_find_stream_info(fmt_, nullptr)) < 0)
      return Status::Corruption("no stream information: " + AvError(rc));
    stream_ = av_find_best_stream(fmt_, type, -1, -1, nullptr, 0);
    if (stream_ < 0) return Status::NotFound("no such stream");
    held_ = av_packet_alloc();
    return held_ == nullptr ? Status::OutOfMemory("packet") : Status::OK();
  }
  AVStream* stream() const { return fmt_->streams[stream_]; }
  // The next packet, left in place until Take; null at the end.
  AVPacket* Peek() {
    while (!has_ && !ended_) {
      const int rc = av_read_frame(fmt_, held_);
      if (rc < 0) {
        ended_ = true;
        break;
      }
      if (held_->stream_index == stream_ && held_->pts != AV_NOPTS_VALUE) {
        has_ = true;
      } else {
        av_packet_unref(held_);
      }
    }
    return has_ ? held_ : nullptr;
  }
  void Drop() {
    av_packet_unref(held_);
    has_ = false;
  }

 private:
  AVFormatContext* fmt_ = nullptr;
  AVPacket* held_ = nullptr;
  int stream_ = -1;
  bool has_ = false, ended_ = false;
};

// The clip in hand: its output, and the offsets that start its times at zero.
struct CopyClip {
  size_t k = 0;
  std::unique_ptr<ClipOutput> out;
  int video = -1, audio = -1;
  int64_t dts_offset = 0;      // the first packet's dts: the clip's times start at 0
  double start_s = 0, end_s = 0;
  double audio_from_s = 0;     // source time (container clock) that the clip's 0 is
  ClipFile file;
  int64_t last_index = -1;
  bool past_end = false;  // a packet of a frame at or past the span's end came
};

bool Mp4Takes(AVCodecID id) {
  return avformat_query_codec(av_guess_format("mp4", nullptr, nullptr), id, FF_COMPLIANCE_NORMAL) == 1;
}

}  // namespace

namespace {

// Why no span of `src` can be copied, or "" when they can.
std::string CannotCopy(const Source& src, const AVStream* vs) {
  if (!Mp4Takes(vs->codecpar->codec_id))
    return "copy: " + std::string(avcodec_get_name(vs->codecpar->codec_id)) +
           " video cannot be stored in MP4 as it is (clips.mode encode re-encodes it)";
  // DivX-style AVIs pack a B-frame into the packet of the frame after it: packets are not
  // frames, and a cut between them shows the wrong picture (Megamind.avi's last frame).
  if (vs->codecpar->codec_id == AV_CODEC_ID_MPEG4 && vs->codecpar->video_delay > 0 && src.format == "avi")
    return "copy: MPEG-4 video with B-frames packed as in an AVI cannot be cut without "
           "decoding (clips.mode encode cuts it exactly)";
  return "";
}

// The copy pass over one source: video packets in file order, each span's into its clip,
// the sound's packets of the same times beside them.
class CopyWriter {
 public:
  CopyWriter(const Source& src, const std::vector<ClipSpan>& spans, const ClipWriteOptions& options,
             const std::function<std::string(size_t)>& path_for, std::vector<ClipOutcome>* outcomes)
      : src_(src), spans_(spans), options_(options), path_for_(path_for), outcomes_(outcomes) {}

  Status Run() {
    if (src_.fps <= 0) return Status::Unsupported("copy: the video declares no frame rate to number its frames by");
    FM_RETURN_IF_ERROR(video_.Open(src_.path, AVMEDIA_TYPE_VIDEO));
    vs_ = video_.stream();
    if (const std::string why = CannotCopy(src_, vs_); !why.empty()) {
      for (ClipOutcome& o : *outcomes_) o.reason = why;
      return Status::OK();
    }
    has_audio_ = audio_.Open(src_.path, AVMEDIA_TYPE_AUDIO).ok() && Mp4Takes(audio_.stream()->codecpar->codec_id);
    vtb_ = vs_->time_base;
    frame_ticks_ = std::max<int64_t>(1, std::llround(1.0 / (src_.fps * av_q2d(vtb_))));
    // Frames count from the first packet's time (a stream whose times were made up starts
    // its first frame at its reorder delay); the sound keeps the container's clock.
    const AVPacket* first = video_.Peek();
    clock_.emplace(vs_, src_.fps, first != nullptr ? first->pts : AV_NOPTS_VALUE);
    audio_zero_s_ = vs_->start_time != AV_NOPTS_VALUE ? vs_->start_time * av_q2d(vtb_) : 0;
    for (AVPacket* p = video_.Peek(); p != nullptr && k_ < spans_.size(); p = video_.Peek()) {
      const double t = clock_->TimeOf(p->pts);
      const int64_t index = std::llround(t * src_.fps);
      if (index >= options_.limits.max_frames) break;
      FM_RETURN_IF_ERROR(OnPacket(p, index, t));
      video_.Drop();
    }
    if (clip_) FM_RETURN_IF_ERROR(Close());
    for (; k_ < spans_.size(); ++k_)
      if ((*outcomes_)[k_].reason.empty() && !(*outcomes_)[k_].file)
        (*outcomes_)[k_].reason = "copy: no keyframe inside the span, or the video ends before it";
    return Status::OK();
  }

 private:
  Status OnPacket(AVPacket* p, int64_t index, double t) {
    const double decode_t = p->dts != AV_NOPTS_VALUE ? clock_->TimeOf(p->dts) : t;
    // Every later packet decodes at or after this one's time, and shows no earlier than it
    // decodes: once one decodes at the span's end, the clip is whole.
    if (clip_ && decode_t + 0.5 / src_.fps >= clip_->end_s) FM_RETURN_IF_ERROR(Close());
    if (!clip_) FM_RETURN_IF_ERROR(MaybeOpen(p, index, t));
    if (!clip_) return CopyAudio(t);
    // A frame at or past the end, in decoding order before frames inside the span, is a
    // reference those frames (B-frames) need: without it they would not decode as they
    // should, and with it the clip would show a frame of the next shot. The clip ends
    // before them instead, at the last frame it holds whole (the span it really got).
    if (index >= spans_[clip_->k].end_frame) clip_->past_end = true;
    if (clip_->past_end || index < clip_->file.span.start_frame) return Status::OK();
    p->pts -= clip_->dts_offset;
    if (p->dts != AV_NOPTS_VALUE) p->dts -= clip_->dts_offset;
    // A packet of no duration (an AVI's) lasts a frame: the MP4 muxer ends the track at
    // the last packet's end, and a last frame of no length is one players drop.
    if (p->duration <= 0) p->duration = frame_ticks_;
    clip_->last_index = std::max(clip_->last_index, index);
    ++clip_->file.frames;
    FM_RETURN_IF_ERROR(clip_->out->Write(p, clip_->video, vtb_));
    return CopyAudio(t);
  }

  // A keyframe starts the clip of the span it is inside; spans it has passed have none.
  Status MaybeOpen(const AVPacket* p, int64_t index, double t) {
    if ((p->flags & AV_PKT_FLAG_KEY) == 0) return Status::OK();
    for (; k_ < spans_.size() && index >= spans_[k_].end_frame; ++k_)
      (*outcomes_)[k_].reason = "copy: no keyframe inside the span (clips.mode encode cuts it exactly)";
    if (k_ >= spans_.size() || index < spans_[k_].start_frame) return Status::OK();
    FM_RETURN_IF_ERROR(CopyAudio(t));  // audio before the clip: let go
    return Open(p, index);
  }

  // Audio packets before `until_s` (source time) into the clip; earlier ones than its start dropped.
  Status CopyAudio(double until_s) {
    if (!has_audio_) return Status::OK();
    const AVRational atb = audio_.stream()->time_base;
    for (AVPacket* p = audio_.Peek(); p != nullptr; p = audio_.Peek()) {
      const double t = p->pts * av_q2d(atb) - audio_zero_s_;
      if (t >= until_s) break;
      if (clip_ && t >= clip_->start_s) {
        const int64_t shift = std::llround(clip_->audio_from_s / av_q2d(atb));
        p->pts -= shift;
        if (p->dts != AV_NOPTS_VALUE) p->dts -= shift;
        FM_RETURN_IF_ERROR(clip_->out->Write(p, clip_->audio, atb));
      }
      audio_.Drop();
    }
    return Status::OK();
  }

  Status Open(const AVPacket* key, int64_t index) {
    CopyClip c;
    c.k = k_;
    auto out = ClipOutput::Open(path_for_(k_));
    if (!out.ok()) return out.status();
    c.out = std::move(out).value();
    auto v = c.out->AddStream(vs_->codecpar, vtb_);
    if (!v.ok()) return v.status();
    c.video = *v;
    FM_RETURN_IF_ERROR(c.out->CopyDisplayMatrix(c.video, vs_));
    if (has_audio_) {
      auto a = c.out->AddStream(audio_.stream()->codecpar, audio_.stream()->time_base);
      if (!a.ok()) return a.status();
      c.audio = *a;
    }
    FM_RETURN_IF_ERROR(c.out->Start());
    c.dts_offset = key->dts != AV_NOPTS_VALUE ? key->dts : key->pts;
    c.start_s = double(index) / src_.fps;
    c.end_s = double(spans_[k_].end_frame) / src_.fps;
    // The clip's time 0 is its first packet's decoding time: audio is shifted as much.
    c.audio_from_s = c.dts_offset * av_q2d(vtb_) - clock_->start_s() + audio_zero_s_;
    c.file = ClipFile{{index, spans_[k_].end_frame}, c.start_s, 0, 0, src_.fps, vs_->codecpar->width,
                      vs_->codecpar->height, avcodec_get_name(vs_->codecpar->codec_id), has_audio_, 0,
                      path_for_(k_)};
    clip_ = std::move(c);
    return Status::OK();
  }

  Status Close() {
    CopyClip& c = *clip_;
    FM_RETURN_IF_ERROR(CopyAudio(c.end_s));
    auto bytes = c.out->Finish();
    if (!bytes.ok()) return bytes.status();
    c.file.span.end_frame = c.last_index + 1;
    c.file.end_s = double(c.last_index + 1) / src_.fps;
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
  PacketReader video_, audio_;
  AVStream* vs_ = nullptr;
  bool has_audio_ = false;
  AVRational vtb_{1, 1};
  int64_t frame_ticks_ = 1;
  std::optional<FrameClock> clock_;
  double audio_zero_s_ = 0;
  std::optional<CopyClip> clip_;
  size_t k_ = 0;  // the span in hand, or next
};

}  // namespace

Status CopyPass(const Source& src, const std::vector<ClipSpan>& spans,
                const ClipWriteOptions& options, const std::function<std::string(size_t)>& path_for,
                std::vector<ClipOutcome>* outcomes) {
  return CopyWriter(src, spans, options, path_for, outcomes).Run();
}

}  // namespace framemill::clips
