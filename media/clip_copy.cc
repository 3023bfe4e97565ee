// WriteClips in copy mode: the source's packets into each clip as they are. A clip starts
// at the first keyframe inside its span (a decoder needs one) and ends at the span's end,
// or, where B-frames at the end need a frame past it, before those B-frames. Frames are
// numbered from their presentation times at the stream's frame rate.
#include <cmath>
#include <memory>

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

Status CopyPass(const Source& src, const std::vector<ClipSpan>& spans,
                const ClipWriteOptions& options, const std::function<std::string(size_t)>& path_for,
                std::vector<ClipOutcome>* outcomes) {
  if (src.fps <= 0) return Status::Unsupported("copy: the video declares no frame rate to number its frames by");
  PacketReader video;
  FM_RETURN_IF_ERROR(video.Open(src.path, AVMEDIA_TYPE_VIDEO));
  AVStream* vs = video.stream();
  const std::string codec = avcodec_get_name(vs->codecpar->codec_id);
  if (!Mp4Takes(vs->codecpar->codec_id)) {
    for (ClipOutcome& o : *outcomes)
      o.reason = "copy: " + codec + " video cannot be stored in MP4 as it is (clips.mode encode re-encodes it)";
    return Status::OK();
  }
  // DivX-style AVIs pack a B-frame into the packet of the frame after it: packets are not
  // frames, and a cut between them shows the wrong picture (Megamind.avi's last frame).
  if (vs->codecpar->codec_id == AV_CODEC_ID_MPEG4 && vs->codecpar->video_delay > 0 && src.format == "avi") {
    for (ClipOutcome& o : *outcomes)
      o.reason = "copy: MPEG-4 video with B-frames packed as in an AVI cannot be cut without "
                 "decoding (clips.mode encode cuts it exactly)";
    return Status::OK();
  }
  PacketReader audio;
  Status as = audio.Open(src.path, AVMEDIA_TYPE_AUDIO);
  const bool has_audio = as.ok() && Mp4Takes(audio.stream()->codecpar->codec_id);
  const AVRational vtb = vs->time_base;
  const int64_t frame_ticks = std::max<int64_t>(1, std::llround(1.0 / (src.fps * av_q2d(vtb))));
  // Frames count from the first packet's time (a stream whose times were made up starts
  // its first frame at its reorder delay); the sound keeps the container's clock.
  const AVPacket* first = video.Peek();
  FrameClock clock(vs, src.fps, first != nullptr ? first->pts : AV_NOPTS_VALUE);
  const double audio_zero_s = vs->start_time != AV_NOPTS_VALUE ? vs->start_time * av_q2d(vtb) : 0;
  std::optional<CopyClip> clip;
  size_t k = 0;

  // Audio packets before `until_s` (source time) into the clip; earlier ones than its start dropped.
  auto copy_audio = [&](double until_s) -> Status {
    if (!has_audio) return Status::OK();
    const AVRational atb = audio.stream()->time_base;
    for (AVPacket* p = audio.Peek(); p != nullptr; p = audio.Peek()) {
      const double t = p->pts * av_q2d(atb) - audio_zero_s;
      if (t >= until_s) break;
      if (clip && t >= clip->start_s) {
        const int64_t shift = std::llround(clip->audio_from_s / av_q2d(atb));
        p->pts -= shift;
        if (p->dts != AV_NOPTS_VALUE) p->dts -= shift;
        FM_RETURN_IF_ERROR(clip->out->Write(p, clip->audio, atb));
      }
      audio.Drop();
    }
    return Status::OK();
  };
  auto close = [&]() -> Status {
    CopyClip& c = *clip;
    FM_RETURN_IF_ERROR(copy_audio(c.end_s));
    auto bytes = c.out->Finish();
    if (!bytes.ok()) return bytes.status();
    c.file.span.end_frame = c.last_index + 1;
    c.file.end_s = double(c.last_index + 1) / src.fps;
    c.file.bytes = *bytes;
    (*outcomes)[c.k].file = c.file;
    clip.reset();
    ++k;
    return Status::OK();
  };
  auto open = [&](const AVPacket* key, int64_t index) -> Status {
    CopyClip c;
    c.k = k;
    auto out = ClipOutput::Open(path_for(k));
    if (!out.ok()) return out.status();
    c.out = std::move(out).value();
    auto v = c.out->AddStream(vs->codecpar, vtb);
    if (!v.ok()) return v.status();
    c.video = *v;
    if (has_audio) {
      auto a = c.out->AddStream(audio.stream()->codecpar, audio.stream()->time_base);
      if (!a.ok()) return a.status();
      c.audio = *a;
    }
    FM_RETURN_IF_ERROR(c.out->Start());
    c.dts_offset = key->dts != AV_NOPTS_VALUE ? key->dts : key->pts;
    c.start_s = double(index) / src.fps;
    c.end_s = double(spans[k].end_frame) / src.fps;
    // The clip's time 0 is its first packet's decoding time: audio is shifted as much.
    c.audio_from_s = c.dts_offset * av_q2d(vtb) - clock.start_s() + audio_zero_s;
    c.file = ClipFile{{index, spans[k].end_frame}, c.start_s, 0, 0, src.fps,
                      vs->codecpar->width, vs->codecpar->height, codec, has_audio, 0, path_for(k)};
    clip = std::move(c);
    return Status::OK();
  };

  for (AVPacket* p = video.Peek(); p != nullptr && k < spans.size(); p = video.Peek()) {
    const double t = clock.TimeOf(p->pts);
    const int64_t index = std::llround(t * src.fps);
    if (index >= options.limits.max_frames) break;
    const double decode_t = p->dts != AV_NOPTS_VALUE ? clock.TimeOf(p->dts) : t;
    // Every later packet decodes at or after this one's time, and shows no earlier than it
    // decodes: once one decodes at the span's end, the clip is whole.
    if (clip && decode_t + 0.5 / src.fps >= clip->end_s) FM_RETURN_IF_ERROR(close());
    if (!clip) {
      const bool key = (p->flags & AV_PKT_FLAG_KEY) != 0;
      while (key && k < spans.size() && index >= spans[k].end_frame) {
        (*outcomes)[k].reason = "copy: no keyframe inside the span (clips.mode encode cuts it exactly)";
        ++k;
      }
      if (key && k < spans.size() && index >= spans[k].start_frame) {
        FM_RETURN_IF_ERROR(copy_audio(t));  // audio before the clip: let go
        FM_RETURN_IF_ERROR(open(p, index));
      }
    }
    // A frame at or past the end, in decoding order before frames inside the span, is a
    // reference those frames (B-frames) need: without it they would not decode as they
    // should, and with it the clip would show a frame of the next shot. The clip ends
    // before them instead, at the last frame it holds whole (the span it really got).
    if (clip && index >= spans[clip->k].end_frame) clip->past_end = true;
    if (clip && !clip->past_end && index >= clip->file.span.start_frame) {
      p->pts -= clip->dts_offset;
      if (p->dts != AV_NOPTS_VALUE) p->dts -= clip->dts_offset;
      // A packet of no duration (an AVI's) lasts a frame: the MP4 muxer ends the track at
      // the last packet's end, and a last frame of no length is one players drop.
      if (p->duration <= 0) p->duration = frame_ticks;
      clip->last_index = std::max(clip->last_index, index);
      ++clip->file.frames;
      FM_RETURN_IF_ERROR(clip->out->Write(p, clip->video, vtb));
      FM_RETURN_IF_ERROR(copy_audio(t));
    } else if (!clip) {
      FM_RETURN_IF_ERROR(copy_audio(t));
    }
    video.Drop();
  }
  if (clip) FM_RETURN_IF_ERROR(close());
  for (; k < spans.size(); ++k)
    if ((*outcomes)[k].reason.empty() && !(*outcomes)[k].file)
      (*outcomes)[k].reason = "copy: no keyframe inside the span, or the video ends before it";
  return Status::OK();
}

}  // namespace framemill::clips
