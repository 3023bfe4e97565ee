#include "stages/model_pool.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "stages/media.h"

namespace framemill {
namespace {

class CpuRunner : public ModelRunner {
 public:
  explicit CpuRunner(std::unique_ptr<models::DnnModel> m) : model_(std::move(m)) {}
  const models::ModelManifest& manifest() const override { return model_->manifest(); }
  std::string device() const override { return "cpu"; }
  Result<std::vector<std::vector<models::OutputTensor>>> Run(
      const std::vector<cv::Mat>& bgr) override {
    try {
      return model_->Run(bgr);
    } catch (const cv::Exception& e) {
      return Status::Internal("model " + manifest().name + ": " + e.what());
    }
  }
  bool batchable() const override { return model_->batched(); }

 private:
  std::unique_ptr<models::DnnModel> model_;
};

}  // namespace

Result<std::unique_ptr<ModelRunner>> OpenCpuRunner(const models::ModelManifest& manifest) {
  auto m = models::DnnModel::Open(manifest);
  if (!m.ok()) return m.status();
  return std::unique_ptr<ModelRunner>(new CpuRunner(std::move(m).value()));
}

ModelPool::Lease::~Lease() {
  if (pool_ != nullptr && runner_ != nullptr) pool_->Return(name_, std::move(runner_));
}

ModelPool::ModelPool(std::string models_dir, RunnerFactory factory,
                     std::chrono::milliseconds recheck)
    : store_(models_dir), factory_(std::move(factory)), recheck_(recheck) {}

Result<ModelPool::Lease> ModelPool::Borrow(const std::string& name) {
  models::ModelManifest manifest;
  {
    std::lock_guard<std::mutex> l(mu_);
    Entry& e = entries_[name];
    const auto now = std::chrono::steady_clock::now();
    if (e.resolved && !e.status.ok() && now - e.failed_at < recheck_) return e.status;
    if (!e.idle.empty()) {
      std::unique_ptr<ModelRunner> r = std::move(e.idle.back());
      e.idle.pop_back();
      return Lease(this, name, std::move(r));
    }
    if (e.resolved && e.status.ok()) manifest = e.manifest;
  }
  // Opening reads and parses the ONNX file (tens of ms): outside the lock, so other
  // models and other borrowers of idle runners are not held up.
  if (manifest.name.empty()) {
    auto m = store_.Open(name);
    if (!m.ok()) {
      std::lock_guard<std::mutex> l(mu_);
      Entry& e = entries_[name];
      e.resolved = true;
      e.status = m.status();
      e.failed_at = std::chrono::steady_clock::now();
      return m.status();
    }
    manifest = std::move(m).value();
  }
  auto r = factory_(manifest);
  std::lock_guard<std::mutex> l(mu_);
  Entry& e = entries_[name];
  e.resolved = true;
  if (!r.ok()) {
    e.status = r.status();
    e.failed_at = std::chrono::steady_clock::now();
    return r.status();
  }
  e.status = Status::OK();
  e.manifest = manifest;
  ++e.created;
  return Lease(this, name, std::move(r).value());
}

void ModelPool::Return(const std::string& name, std::unique_ptr<ModelRunner> r) {
  std::lock_guard<std::mutex> l(mu_);
  entries_[name].idle.push_back(std::move(r));
}

int ModelPool::Created(const std::string& name) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find(name);
  return it == entries_.end() ? 0 : it->second.created;
}

// ---------------------------------------------------------------- the stage loop

namespace {

// Reads one item into its frames, or says why not.
Status DecodeItem(const ClaimedJob& job, size_t j, const MediaConfig& media, int video_frames,
                  std::vector<ModelFrame>* frames, nlohmann::json* info) {
  if (job.kind == MediaKind::kImage) {
    auto img = DecodeImageFile(job.source, media);
    if (!img.ok()) return img.status();
    *info = {{"kind", "image"}, {"width", img->cols}, {"height", img->rows}};
    frames->push_back({j, -1, std::move(img).value()});
    return Status::OK();
  }
  auto sample = SampleVideoFrames(job.source, video_frames);
  if (!sample.ok()) return sample.status();
  const VideoInfo& vi = sample->info;
  *info = {{"kind", "video"}, {"fps", vi.fps}, {"frames", vi.frames},
           {"width", vi.width}, {"height", vi.height}, {"codec", vi.codec}};
  for (size_t k = 0; k < sample->frames.size(); ++k)
    frames->push_back({j, sample->indices[k], std::move(sample->frames[k])});
  return Status::OK();
}

// One chunk of the batch: decode, analyse, assemble. `out` has one slot per chunk job.
std::vector<StageOutput> RunChunk(const std::vector<ClaimedJob>& jobs, const MediaConfig& media,
                                  const ModelStageOptions& opt, const AnalyseFn& analyse,
                                  const SummariseFn& summarise) {
  std::vector<StageOutput> out(jobs.size());
  std::vector<nlohmann::json> info(jobs.size());
  std::vector<bool> decoded(jobs.size(), false);
  std::vector<ModelFrame> frames;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const ClaimedJob& job = jobs[j];
    if (job.kind != MediaKind::kImage && job.kind != MediaKind::kVideo) {
      out[j] = StageOutput::Skipped(job.stage + " applies to images and videos");
      continue;
    }
    try {
      Status s = DecodeItem(job, j, media, opt.video_frames, &frames, &info[j]);
      if (!s.ok()) {
        out[j] = StageOutput::Failed(s);
        continue;
      }
      decoded[j] = true;
    } catch (const std::bad_alloc&) {
      out[j] = StageOutput::Failed(Status::OutOfMemory("out of host memory decoding " + job.source));
    } catch (const std::exception& e) {
      // OpenCV throws on inputs it cannot handle: this item's failure.
      out[j] = StageOutput::Failed(Status::Corruption(std::string("decoding failed: ") + e.what()));
    }
  }
  if (frames.empty()) return out;

  std::vector<FrameResult> results(frames.size());
  std::string device = "cpu";
  Status s;
  try {
    s = analyse(frames, jobs, &results, &device);
  } catch (const std::bad_alloc&) {
    s = Status::OutOfMemory("out of host memory running the models");
  } catch (const std::exception& e) {
    s = Status::Internal(std::string("analysis failed: ") + e.what());
  }
  if (s.ok() && results.size() != frames.size())
    s = Status::Internal("analysis returned " + std::to_string(results.size()) + " results for " +
                         std::to_string(frames.size()) + " frames");
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (!decoded[j]) continue;
    if (!s.ok()) {
      out[j] = StageOutput::Failed(s);
      continue;
    }
    nlohmann::json r;
    std::vector<std::string> artifacts;
    if (jobs[j].kind == MediaKind::kImage) {
      for (size_t i = 0; i < frames.size(); ++i)
        if (frames[i].job == j) {
          r = std::move(results[i].result);
          artifacts = std::move(results[i].artifacts);
        }
    } else {
      std::vector<nlohmann::json> per;
      for (size_t i = 0; i < frames.size(); ++i) {
        if (frames[i].job != j) continue;
        nlohmann::json f = {{"frame", frames[i].index}};
        f.update(results[i].result);
        per.push_back(std::move(f));
        for (auto& a : results[i].artifacts) artifacts.push_back(std::move(a));
      }
      r = nlohmann::json::object();
      if (summarise) summarise(per, &r);
      r["frames"] = per;
    }
    r["media"] = std::move(info[j]);
    out[j] = StageOutput::Done(std::move(r), device);
    out[j].artifacts = std::move(artifacts);
  }
  return out;
}

}  // namespace

std::vector<StageOutput> RunModelStage(const std::vector<ClaimedJob>& jobs,
                                       const StageContext& ctx, const MediaConfig& media,
                                       const ModelStageOptions& options, const AnalyseFn& analyse,
                                       const SummariseFn& summarise) {
  auto stopped = [&] { return ctx.stop != nullptr && ctx.stop->load(); };
  if (stopped()) return {};
  if (options.together || jobs.size() <= 1) return RunChunk(jobs, media, options, analyse, summarise);
  std::vector<StageOutput> out;
  for (const ClaimedJob& job : jobs) {
    if (stopped()) break;
    out.push_back(std::move(RunChunk({job}, media, options, analyse, summarise).front()));
  }
  return out;
}

std::vector<StageOutput> FailAll(const std::vector<ClaimedJob>& jobs, const StageContext& ctx,
                                 const Status& s) {
  std::vector<StageOutput> out;
  for (const ClaimedJob& job : jobs) {
    if (ctx.stop != nullptr && ctx.stop->load()) break;
    out.push_back(job.kind == MediaKind::kImage || job.kind == MediaKind::kVideo
                      ? StageOutput::Failed(s)
                      : StageOutput::Skipped(job.stage + " applies to images and videos"));
  }
  return out;
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

cv::Mat PadToSquare(const cv::Mat& image) {
  const int side = std::max(image.cols, image.rows);
  if (image.cols == image.rows) return image;
  cv::Mat out = cv::Mat::zeros(side, side, image.type());
  image.copyTo(out(cv::Rect(0, 0, image.cols, image.rows)));
  return out;
}

}  // namespace framemill
