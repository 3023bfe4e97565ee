#include "stages/model_stage.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <tbb/parallel_for.h>

#include "jobs/failure.h"
#include "media/video.h"
#include "media/video_reader.h"

namespace framemill {
namespace {

nlohmann::json VideoInfoJson(const VideoInfo& vi) {
  return {{"kind", "video"}, {"fps", vi.fps}, {"frames", vi.frames},
          {"width", vi.width}, {"height", vi.height}, {"codec", vi.codec}};
}

// The frames `reader` keeps, appended to `frames`; how many. A header that understated the
// length (0.5 s declared, 6 s there) would keep every frame: at twice video_frames, every
// other one kept goes and the rate halves, so what is kept stays an even grid over the
// stream and bounded.
Result<int64_t> ReadKept(VideoReader& reader, size_t j, const ModelStageOptions& opt,
                         std::vector<ModelFrame>* frames) {
  const double scale = static_cast<double>(reader.info().width) / reader.output_size().width;
  const size_t first = frames->size();
  VideoFrame f;
  for (;;) {
    auto more = reader.Next(&f);
    if (!more.ok()) return more.status();
    if (!*more) break;
    frames->push_back({j, f.index, std::move(f.image), f.time_s, scale});
    if (opt.video_frames <= 0 || frames->size() - first < 2 * size_t(opt.video_frames)) continue;
    size_t keep = first;
    for (size_t i = first; i < frames->size(); i += 2) (*frames)[keep++] = std::move((*frames)[i]);
    frames->erase(frames->begin() + static_cast<std::ptrdiff_t>(keep), frames->end());
    reader.set_max_fps((reader.max_fps() > 0 ? reader.max_fps() : reader.info().fps) / 2);
  }
  return static_cast<int64_t>(frames->size() - first);
}

// A video read in order (each frame decoded once), thinned to the rate that keeps at most
// video_frames over its length. A header that overstated the length (a container whose
// duration lies: 3,600 s declared, 6 s there) thins it to a frame or two: then it is read
// again at the rate the frames that decoded call for, and `declared_frames` says so.
Status ReadVideoInOrder(const ClaimedJob& job, size_t j, const ModelStageOptions& opt,
                        std::vector<ModelFrame>* frames, nlohmann::json* info) {
  VideoReaderOptions ro;
  ro.max_width = opt.video_width;
  ro.max_fps = opt.video_fps;
  ro.max_kept = opt.video_frames;
  ro.limits = opt.video_limits;
  auto reader = VideoReader::Open(job.source, ro);
  if (!reader.ok()) return reader.status();
  const size_t before = frames->size();
  auto n = ReadKept(**reader, j, opt, frames);
  if (!n.ok()) return n.status();
  const VideoInfo declared = (*reader)->info();
  const int64_t decoded = (*reader)->frames_decoded();
  const bool overstated = opt.video_frames > 0 && *n < opt.video_frames / 2 && decoded * 2 < declared.frames;
  if (overstated && declared.fps > 0) {
    const double rate = static_cast<double>(opt.video_frames) * declared.fps / static_cast<double>(decoded);
    ro.max_kept = 0;
    ro.max_fps = opt.video_fps > 0 ? std::min(opt.video_fps, rate) : rate;
    reader = VideoReader::Open(job.source, ro);
    if (!reader.ok()) return reader.status();
    frames->erase(frames->begin() + static_cast<std::ptrdiff_t>(before), frames->end());
    n = ReadKept(**reader, j, opt, frames);
    if (!n.ok()) return n.status();
  }
  if (*n == 0) return Status::Corruption(job.source + ": no video frame could be decoded");
  *info = VideoInfoJson(declared);
  (*info)["frames_analysed"] = *n;
  const int64_t counted = (*reader)->frames_decoded();  // the whole stream: ReadKept reads to its end
  if (declared.frames > 0 && counted < opt.video_limits.max_frames &&
      std::abs(counted - declared.frames) > std::max<int64_t>(2, counted / 20)) {
    (*info)["frames"] = counted;
    (*info)["declared_frames"] = declared.frames;
  }
  if ((*reader)->damaged_packets() > 0) (*info)["damaged_packets"] = (*reader)->damaged_packets();
  return Status::OK();
}

// Reads one item into its frames, or says why not.
Status DecodeItem(const ClaimedJob& job, size_t j, const ModelStageOptions& opt,
                  const StageContext& ctx, std::vector<ModelFrame>* frames, nlohmann::json* info) {
  if (job.kind == MediaKind::kImage) {
    auto img = ReadPicture(ctx, job, opt.limits);
    if (!img.ok()) return img.status();
    *info = {{"kind", "image"}, {"width", img->cols}, {"height", img->rows}};
    frames->push_back({j, -1, std::move(img).value()});
    return Status::OK();
  }
  if (opt.video_fps > 0) return ReadVideoInOrder(job, j, opt, frames, info);
  auto sample = SampleVideoFrames(job.source, opt.video_frames, opt.video_limits);
  if (!sample.ok()) return sample.status();
  const VideoInfo& vi = sample->info;
  *info = VideoInfoJson(vi);
  if (sample->declared_frames > 0) (*info)["declared_frames"] = sample->declared_frames;
  for (size_t k = 0; k < sample->frames.size(); ++k) {
    const double t = vi.fps > 0 ? static_cast<double>(sample->indices[k]) / vi.fps : 0;
    frames->push_back({j, sample->indices[k], std::move(sample->frames[k]), t});
  }
  return Status::OK();
}

}  // namespace

ModelStage::ModelStage(std::string name, std::shared_ptr<models::ModelCache> cache,
                       ModelStageOptions options)
    : cache_(std::move(cache)), options_(options) {
  spec_.name = std::move(name);
}

Result<models::BatchOutputs> ModelStage::RunModel(models::ModelRunner& runner,
                                                  const std::vector<cv::Mat>& images,
                                                  const StageContext& ctx, std::string* device) {
  return models::RunModel(*cache_, runner, images, ctx.ladder, device);
}

Result<models::BatchOutputs> ModelStage::RunOnFrames(models::ModelRunner& runner,
                                                     const ModelBatch& batch,
                                                     const StageContext& ctx,
                                                     std::string* device) {
  std::vector<cv::Mat> images;
  images.reserve(batch.frames.size());
  for (const ModelFrame& f : batch.frames) images.push_back(f.bgr);
  return RunModel(runner, images, ctx, device);
}

std::vector<Outcome> ModelStage::RunBatch(const std::vector<ClaimedJob>& jobs,
                                          const StageContext& ctx) {
  if (ctx.stopped()) return {};
  std::vector<models::ModelCache::Lease> leases;
  std::vector<models::ModelRunner*> runners;
  for (const std::string& name : Models()) {
    auto lease = cache_->Borrow(name);
    if (!lease.ok()) {
      // Not one item's fault, but every item's job cannot run: each fails with the fix.
      std::vector<Outcome> out;
      for (const ClaimedJob& job : jobs) {
        if (ctx.stopped()) break;
        out.push_back(SkipIfNotApplicable(spec_, job).value_or(Outcome::Failed(lease.status())));
      }
      return out;
    }
    runners.push_back(&**lease);
    leases.push_back(std::move(lease).value());
  }
  // A batchable model takes the whole batch at once, and so does a device worker's (its
  // pictures are held for the claim anyway, decoded ahead): the frames' host work is then
  // done together, on the worker's threads at once, while a fixed-batch model still runs
  // image by image. On the CPU a fixed-batch model goes job by job, which checks ctx.stop
  // between jobs and keeps one decoded item in memory at a time.
  const bool on_device = ctx.ladder != nullptr && ctx.ladder->OnDevice(runners.front()->manifest().operation);
  if (runners.front()->batchable() || jobs.size() <= 1 || on_device) return RunChunk(jobs, runners, ctx);
  std::vector<Outcome> out;
  for (const ClaimedJob& job : jobs) {
    if (ctx.stopped()) break;
    out.push_back(std::move(RunChunk({job}, runners, ctx).front()));
  }
  return out;
}

std::vector<Outcome> ModelStage::RunChunk(const std::vector<ClaimedJob>& jobs,
                                          const std::vector<models::ModelRunner*>& runners,
                                          const StageContext& ctx) {
  std::vector<Outcome> out(jobs.size());
  std::vector<nlohmann::json> info(jobs.size());
  std::vector<ModelFrame> frames;
  const std::vector<bool> decoded = DecodeEach(
      spec_, jobs,
      [&](const ClaimedJob& job, size_t j) { return DecodeItem(job, j, options_, ctx, &frames, &info[j]); },
      &out);
  if (frames.empty()) return out;

  std::vector<FrameResult> results(frames.size());
  std::string device = "cpu";
  Status s;
  try {
    s = Analyse(ModelBatch{frames, jobs, runners}, ctx, &results, &device);
  } catch (...) {
    s = ThrownStatus("running the models");
  }
  if (s.ok() && results.size() != frames.size())
    s = Status::Internal("analysis returned " + std::to_string(results.size()) + " results for " +
                         std::to_string(frames.size()) + " frames");
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (!decoded[j]) continue;
    out[j] = s.ok() ? Assemble(j, jobs[j], frames, &results, std::move(info[j]), device)
                    : Outcome::Failed(s);
  }
  return out;
}

// One job's outcome from its frames' results: an image's result is its frame's; a
// video's lists per-frame results under "frames" (each with its "frame" number).
Outcome ModelStage::Assemble(size_t j, const ClaimedJob& job, const std::vector<ModelFrame>& frames,
                             std::vector<FrameResult>* results, nlohmann::json info,
                             const std::string& device) const {
  nlohmann::json r;
  std::vector<std::string> artifacts;
  if (job.kind == MediaKind::kImage) {
    for (size_t i = 0; i < frames.size(); ++i)
      if (frames[i].job == j) {
        r = std::move((*results)[i].result);
        artifacts = std::move((*results)[i].artifacts);
      }
  } else {
    std::vector<nlohmann::json> per;
    for (size_t i = 0; i < frames.size(); ++i) {
      if (frames[i].job != j) continue;
      nlohmann::json f = {{"frame", frames[i].index}};
      f.update((*results)[i].result);
      per.push_back(std::move(f));
      for (auto& a : (*results)[i].artifacts) artifacts.push_back(std::move(a));
    }
    r = nlohmann::json::object();
    Summarise(per, &r);
    if (!r.contains("frames")) r["frames"] = per;  // a stage may keep a compact form
  }
  r["media"] = std::move(info);
  Outcome o = Outcome::Done(std::move(r), device);
  o.artifacts = std::move(artifacts);
  return o;
}

void SummariseMean(const std::vector<nlohmann::json>& frames, const char* key,
                   const char* mean_key, nlohmann::json* r) {
  double sum = 0;
  for (const auto& f : frames) {
    sum += f[key].get<double>();
    (*r)["model"] = f["model"];
  }
  (*r)[mean_key] = frames.empty() ? 0.0 : sum / static_cast<double>(frames.size());
}

cv::Mat SquareCrop(const cv::Mat& image, cv::Point2f center, int side) {
  side = std::max(side, 1);
  cv::Mat out = cv::Mat::zeros(side, side, image.type());
  const int x0 = static_cast<int>(std::lround(center.x - side / 2.0));
  const int y0 = static_cast<int>(std::lround(center.y - side / 2.0));
  cv::Rect want(x0, y0, side, side);
  cv::Rect have = want & cv::Rect(0, 0, image.cols, image.rows);
  if (have.area() > 0) image(have).copyTo(out(have - want.tl()));
  return out;
}

Status ForEachFrame(size_t begin, size_t end, const std::function<Status(size_t)>& fn) {
  if (end <= begin) return Status::OK();
  std::vector<Status> done(end - begin);
  tbb::parallel_for(begin, end, [&](size_t i) { done[i - begin] = fn(i); });
  for (const Status& s : done) FM_RETURN_IF_ERROR(s);
  return Status::OK();
}

cv::Mat PadToSquare(const cv::Mat& image) {
  const int side = std::max(image.cols, image.rows);
  if (image.cols == image.rows) return image;
  // One pass writes the pixels and the zeros (not zeros everywhere, then the pixels).
  cv::Mat out;
  cv::copyMakeBorder(image, out, 0, side - image.rows, 0, side - image.cols, cv::BORDER_CONSTANT,
                     cv::Scalar::all(0));
  return out;
}

}  // namespace framemill
