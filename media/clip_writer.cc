#include "media/clip_writer.h"

#include "media/clip_pass.h"

namespace framemill {

namespace clips {

Status Source::OpenVideo(AvDecoder* av, int threads) const {
  Status s = av->Open(path, format, AVMEDIA_TYPE_VIDEO, threads);
  if (s.IsNotFound()) return Status::Corruption(s.message());  // a "video" without one
  FM_RETURN_IF_ERROR(s);
  const AVCodecParameters* par = av->stream()->codecpar;
  return CheckVideoFrameSize(format, par->width, par->height, limits);
}

FrameClock::FrameClock(const AVStream* stream, double fps, int64_t start_pts)
    : time_base_(stream->time_base),
      start_pts_(start_pts != AV_NOPTS_VALUE ? start_pts : stream->start_time),
      fps_(fps) {}

double FrameClock::TimeOf(int64_t pts) {
  if (pts == AV_NOPTS_VALUE) {  // no timestamp: one frame after the last
    last_ = last_ < 0 ? 0 : last_ + FrameSeconds();
    return last_;
  }
  if (start_pts_ == AV_NOPTS_VALUE) start_pts_ = pts;
  last_ = double(pts - start_pts_) * av_q2d(time_base_);
  return last_;
}

double FrameClock::start_s() const {
  return start_pts_ == AV_NOPTS_VALUE ? 0 : double(start_pts_) * av_q2d(time_base_);
}

}  // namespace clips

Result<std::vector<ClipOutcome>> WriteClips(const std::string& source,
                                            const std::vector<ClipSpan>& spans,
                                            const ClipWriteOptions& options,
                                            const std::function<std::string(size_t)>& path_for) {
  for (size_t k = 0; k < spans.size(); ++k) {
    const bool after = k == 0 || spans[k].start_frame >= spans[k - 1].end_frame;
    if (spans[k].start_frame < 0 || spans[k].end_frame <= spans[k].start_frame || !after)
      return Status::InvalidArgument("clip spans must be sorted, disjoint and non-empty");
  }
  auto sniffed = SniffVideoFile(source);
  if (!sniffed.ok()) return sniffed.status();
  clips::Source src{source, sniffed->format, 0, options.limits};
  {
    AvDecoder probe;  // the rate and the limits, before any clip is opened
    FM_RETURN_IF_ERROR(src.OpenVideo(&probe, 1));
    const AVRational rate = av_guess_frame_rate(probe.format(), probe.stream(), nullptr);
    src.fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0;
  }
  std::vector<ClipOutcome> outcomes(spans.size());
  if (spans.empty()) return outcomes;
  Status s = options.encoding.mode == ClipMode::kCopy
                 ? clips::CopyPass(src, spans, options, path_for, &outcomes)
                 : clips::EncodePass(src, spans, options, path_for, &outcomes);
  if (!s.ok()) return s;
  return outcomes;
}

}  // namespace framemill
