#include "media/audio_reader.h"

#include <algorithm>
#include <memory>

extern "C" {
#include <libavutil/channel_layout.h>
#include <libswresample/swresample.h>
}

#include "base/time_split.h"
#include "media/av_decoder.h"
#include "media/video.h"

namespace framemill {
namespace {

struct SwrFree {
  void operator()(SwrContext* s) const { swr_free(&s); }
};

// Seconds from the first video frame's time to `audio_pts` (the first decoded audio
// frame's, which is after an encoder's priming samples), 0 when either is unknown or
// there is no video.
double StartOffset(AVFormatContext* fmt, const AVStream* audio, int64_t audio_pts) {
  const int v = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  if (v < 0 || audio_pts == AV_NOPTS_VALUE) return 0;
  const AVStream* video = fmt->streams[v];
  if (video->start_time == AV_NOPTS_VALUE) return 0;
  return audio_pts * av_q2d(audio->time_base) - video->start_time * av_q2d(video->time_base);
}

Result<std::unique_ptr<SwrContext, SwrFree>> Resampler(AVCodecContext* dec, int rate) {
  SwrContext* raw = nullptr;
  AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
  int rc = swr_alloc_set_opts2(&raw, &mono, AV_SAMPLE_FMT_FLT, rate, &dec->ch_layout,
                               dec->sample_fmt, dec->sample_rate, 0, nullptr);
  std::unique_ptr<SwrContext, SwrFree> swr(raw);
  if (rc < 0 || (rc = swr_init(swr.get())) < 0)
    return Status::Unsupported("audio resampler: " + AvError(rc));
  return swr;
}

}  // namespace

Result<AudioTrack> ReadAudio(const std::string& path, const AudioReadOptions& opt) {
  TimeSpent decoding(TimePart::kDecode);
  auto sniffed = SniffVideoFile(path);
  if (!sniffed.ok()) return sniffed.status();
  AvDecoder av;
  FM_RETURN_IF_ERROR(av.Open(path, sniffed->format, AVMEDIA_TYPE_AUDIO, 1));
  AudioTrack t;
  t.sample_rate = opt.sample_rate;
  t.codec = avcodec_get_name(av.stream()->codecpar->codec_id);
  t.source_rate = av.codec()->sample_rate;
  t.source_channels = av.codec()->ch_layout.nb_channels;
  if (t.source_rate <= 0 || t.source_channels <= 0)
    return Status::Corruption(t.codec + " audio declares no sample rate or channels");
  auto swr = Resampler(av.codec(), opt.sample_rate);
  if (!swr.ok()) return swr.status();
  const size_t cap = static_cast<size_t>(opt.max_seconds * opt.sample_rate);
  std::vector<float> chunk;
  for (;;) {
    auto more = av.Next();
    if (!more.ok()) return more.status();
    const AVFrame* f = av.frame();
    if (*more && av.decoded() == 1)
      t.start_offset_s = StartOffset(av.format(), av.stream(), f->best_effort_timestamp);
    // At the end, flush what the resampler holds (a null input).
    const int in = *more ? f->nb_samples : 0;
    const int room = swr_get_out_samples(swr->get(), in);
    chunk.resize(static_cast<size_t>(std::max(room, 0)));
    uint8_t* out[1] = {reinterpret_cast<uint8_t*>(chunk.data())};
    const int got = swr_convert(swr->get(), out, room, *more ? const_cast<const uint8_t**>(f->extended_data) : nullptr, in);
    if (got > 0) t.samples.insert(t.samples.end(), chunk.begin(), chunk.begin() + got);
    if (!*more || t.samples.size() >= cap) break;
  }
  if (t.samples.size() > cap) t.samples.resize(cap);
  t.damaged_packets = av.damaged_packets();
  if (av.decoded() == 0) return Status::Corruption(t.codec + " audio: no frame could be decoded");
  return t;
}

}  // namespace framemill
