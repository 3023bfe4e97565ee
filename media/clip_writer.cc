#include "media/clip_writer.h"

#include "media/clip_pass.h"

#include <cmath>
#include <cstdio>

extern "C" {
#include <libavutil/display.h>
}

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

namespace {

// Clips are cut by frame index and timed at one rate: a stream whose frames come at another
// average rate than its nominal one (variable frame rate) would not keep time in them.
Status CheckConstantRate(const AVStream* st) {
  const AVRational r = st->r_frame_rate, avg = st->avg_frame_rate;
  if (r.num <= 0 || r.den <= 0 || avg.num <= 0 || avg.den <= 0) return Status::OK();
  const double nominal = av_q2d(r), average = av_q2d(avg);
  if (std::abs(average - nominal) <= 0.02 * nominal) return Status::OK();
  char why[160];
  std::snprintf(why, sizeof why, "variable frame rate (frames average %.2f fps against a nominal %.2f): "
                "clips cut by frame number would not keep time; not cut", average, nominal);
  return Status::Unsupported(why);
}

double RotationOf(const AVStream* st) {
  size_t size = 0;
  const uint8_t* m = av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, &size);
  if (m == nullptr || size < 9 * sizeof(int32_t)) return 0;
  const double deg = av_display_rotation_get(reinterpret_cast<const int32_t*>(m));
  return std::isnan(deg) ? 0 : deg;
}

}  // namespace

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
  double rotation = 0;
  {
    AvDecoder probe;  // the rate and the limits, before any clip is opened
    FM_RETURN_IF_ERROR(src.OpenVideo(&probe, 1));
    const AVRational rate = av_guess_frame_rate(probe.format(), probe.stream(), nullptr);
    src.fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0;
    FM_RETURN_IF_ERROR(CheckConstantRate(probe.stream()));
    rotation = RotationOf(probe.stream());
  }
  std::vector<ClipOutcome> outcomes(spans.size());
  if (spans.empty()) return outcomes;
  Status s = options.encoding.mode == ClipMode::kCopy
                 ? clips::CopyPass(src, spans, options, path_for, &outcomes)
                 : clips::EncodePass(src, spans, options, path_for, &outcomes);
  if (!s.ok()) return s;
  for (ClipOutcome& o : outcomes)
    if (o.file) o.file->rotation_deg = rotation;
  return outcomes;
}

}  // namespace framemill
