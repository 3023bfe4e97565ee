#include "stages/lighting_stage.h"


#include "analysis/lighting_analysis.h"
#include "base/clock.h"
#include "gpu/compute_backend.h"
#include "jobs/failure.h"
#include "jobs/stage_names.h"
#include "media/image.h"
#include "media/video.h"

namespace framemill {
namespace {

// One decoded frame on its way through the batch: an image is one frame, a video
// its sampled frames.
struct Frame {
  size_t job;
  int64_t index;  // video frame number, -1 for an image
  cv::Mat working;
  int width, height;
};

// Reads one item (an image, or a video: the spec takes no other kind) into its working
// frames, or explains why not.
Status Decode(const ClaimedJob& job, const LightingOptions& opt, std::vector<Frame>* frames,
              size_t j, nlohmann::json* media_info) {
  if (job.kind == MediaKind::kImage) {
    auto img = DecodeImageFileScaled(job.source, opt.limits, opt.decode_min_side);
    if (!img.ok()) return img.status();
    frames->push_back({j, -1, lighting::WorkingImage(img->image), img->source.width, img->source.height});
    *media_info = {{"kind", "image"}};
    return Status::OK();
  }
  auto sample = SampleVideoFrames(job.source, opt.video_frames, opt.video_limits);
  if (!sample.ok()) return sample.status();
  for (size_t k = 0; k < sample->frames.size(); ++k) {
    const cv::Mat& f = sample->frames[k];
    frames->push_back({j, sample->indices[k], lighting::WorkingImage(f), f.cols, f.rows});
  }
  const VideoInfo& vi = sample->info;
  *media_info = {{"kind", "video"}, {"fps", vi.fps}, {"frames", vi.frames},
                 {"width", vi.width}, {"height", vi.height}, {"codec", vi.codec}};
  if (sample->declared_frames > 0) (*media_info)["declared_frames"] = sample->declared_frames;
  return Status::OK();
}

// The pixel statistics of every frame of a batch, on the device the ladder picks.
Status StatsOf(const std::vector<Frame>& frames, gpu::OomLadder& ladder,
               std::vector<gpu::LumaStats>* stats, std::vector<std::string>* device_of) {
  std::vector<cv::Mat> mats;
  int64_t pixels = 0;
  for (const Frame& f : frames) {
    mats.push_back(f.working);
    pixels += static_cast<int64_t>(f.working.total());
  }
  stats->assign(frames.size(), {});
  return ladder.Run(
      "LIGHTING", mats.size(), pixels / static_cast<int64_t>(mats.size()),
      gpu::LumaStatsBytesPerItem(mats.front()),
      [&](gpu::ComputeBackend& backend, size_t begin, size_t end) -> Status {
        std::vector<cv::Mat> slice(mats.begin() + static_cast<long>(begin),
                                   mats.begin() + static_cast<long>(end));
        auto r = backend.LumaStatsBatch(slice);
        if (!r.ok()) return r.status();
        for (size_t k = begin; k < end; ++k) (*stats)[k] = std::move((*r)[k - begin]);
        return Status::OK();
      },
      device_of);
}

// One item's result from its frames (`mine`, indices into `frames`): an image's statistics,
// or a video's aggregate with each sampled frame's; the device is the one every frame ran on.
Outcome ItemResult(const ClaimedJob& job, const std::vector<Frame>& frames,
                   const std::vector<size_t>& mine, const std::vector<gpu::LumaStats>& stats,
                   const std::vector<std::string>& device_of, nlohmann::json media) {
  std::vector<lighting::LightingStats> per;
  std::vector<std::string> devices;
  for (size_t i : mine) {
    const Frame& f = frames[i];
    per.push_back(lighting::FromLumaStats(stats[i], f.working, f.width, f.height));
    devices.push_back(device_of[i]);
  }
  nlohmann::json r;
  if (job.kind == MediaKind::kImage) {
    r = lighting::ToJson(per.front());
  } else {
    r = lighting::ToJson(lighting::Aggregate(per));
    nlohmann::json indices = nlohmann::json::array(), each = nlohmann::json::array();
    for (size_t k = 0; k < mine.size(); ++k) {
      const Frame& f = frames[mine[k]];
      indices.push_back(f.index);
      each.push_back({{"frame", f.index},
                      {"exposure_ev", per[k].exposure_ev},
                      {"color_temperature_k", per[k].cct_kelvin},
                      {"device", device_of[mine[k]]}});
    }
    r["frames_sampled"] = std::move(indices);
    r["per_frame"] = std::move(each);
  }
  r["media"] = std::move(media);
  return Outcome::Done(std::move(r), gpu::OneDevice(devices));
}

}  // namespace

LightingStage::LightingStage(LightingOptions options)
    : PerJobStage(MakeSpec(stage_names::kLighting, Takes::kImagesAndVideos)),
      options_(options) {}

bool LightingStage::RunsJobsTogether(const StageContext& ctx) const {
  return ctx.ladder != nullptr && ctx.ladder->OnDevice("LIGHTING");
}

std::vector<Outcome> LightingStage::RunBatch(const std::vector<ClaimedJob>& jobs,
                                             const StageContext& ctx) {
  if (ctx.ladder == nullptr) {
    gpu::CpuLadder cpu(SystemClock());
    return RunBatch(jobs, StageContext{cpu.get(), ctx.stop, ctx.results});
  }
  if (ctx.ladder->OnDevice("LIGHTING") && jobs.size() > 1) return RunTogether(jobs, *ctx.ladder);
  // On the CPU, batching buys nothing and costs cache: each decoded image would be
  // evicted before its statistics are taken. One item at a time instead.
  return PerJobStage::RunBatch(jobs, ctx);
}

Outcome LightingStage::RunOne(const ClaimedJob& job, const StageContext& ctx) {
  return std::move(RunTogether({job}, *ctx.ladder).front());  // RunBatch lent a ladder
}

std::vector<Outcome> LightingStage::RunTogether(const std::vector<ClaimedJob>& jobs,
                                                gpu::OomLadder& ladder) {
  std::vector<Outcome> out(jobs.size());
  std::vector<nlohmann::json> media(jobs.size());
  std::vector<Frame> frames;
  // A device batch comes here straight from RunBatch, not through the base's loop.
  DecodeEach(
      spec(), jobs,
      [&](const ClaimedJob& job, size_t j) { return Decode(job, options_, &frames, j, &media[j]); },
      &out);
  if (frames.empty()) return out;
  std::vector<gpu::LumaStats> stats;
  std::vector<std::string> device_of;
  if (Status s = StatsOf(frames, ladder, &stats, &device_of); !s.ok()) {
    for (const Frame& f : frames) out[f.job] = Outcome::Failed(s);
    return out;
  }
  // Per item: frames back into one result, with the device that produced it.
  std::vector<std::vector<size_t>> of_job(jobs.size());
  for (size_t i = 0; i < frames.size(); ++i) of_job[frames[i].job].push_back(i);
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (of_job[j].empty()) continue;
    try {
      out[j] = ItemResult(jobs[j], frames, of_job[j], stats, device_of, std::move(media[j]));
    } catch (...) {
      out[j] = FailedByThrow("analysing " + jobs[j].source);
    }
  }
  return out;
}

}  // namespace framemill
