#include "stages/stage.h"

#include <cmath>

#include "base/clock.h"
#include "jobs/failure.h"

namespace framemill {

Outcome Stage::Run(const ClaimedJob& job) {
  gpu::CpuLadder cpu(SystemClock());
  std::vector<Outcome> out = RunBatch({job}, StageContext{cpu.get(), nullptr});
  if (out.empty()) return Outcome::Failed(Status::Internal(spec().name + " gave no outcome"));
  return std::move(out.front());
}

std::optional<Outcome> SkipIfNotApplicable(const StageSpec& spec, const ClaimedJob& job) {
  if (spec.AppliesTo(job.kind)) return std::nullopt;
  const char* what = spec.dataset_level              ? "the dataset only"
                     : spec.images && spec.videos    ? "images and videos"
                     : spec.images                   ? "images only"
                     : spec.videos                   ? "videos only"
                                                     : "no media";
  return Outcome::Skipped(spec.name + " applies to " + what);
}

std::vector<bool> DecodeEach(const StageSpec& spec, const std::vector<ClaimedJob>& jobs,
                             const std::function<Status(const ClaimedJob&, size_t)>& decode,
                             std::vector<Outcome>* out) {
  std::vector<bool> decoded(jobs.size(), false);
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (std::optional<Outcome> skip = SkipIfNotApplicable(spec, jobs[j])) {
      (*out)[j] = std::move(*skip);
      continue;
    }
    try {
      Status s = decode(jobs[j], j);
      if (s.ok()) decoded[j] = true;
      else (*out)[j] = Outcome::Failed(s);
    } catch (...) {
      (*out)[j] = FailedByThrow("decoding " + jobs[j].source);
    }
  }
  return decoded;
}

Result<cv::Mat> ReadPicture(const StageContext& ctx, const ClaimedJob& job, const ImageLimits& limits) {
  if (ctx.pictures != nullptr) return ctx.pictures->Get(job.source, limits);
  return DecodeImageFile(job.source, limits);
}

double Rounded(double v, int decimals) {
  const double f = std::pow(10.0, decimals);
  return std::round(v * f) / f;
}

}  // namespace framemill
