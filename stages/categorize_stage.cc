#include "stages/categorize_stage.h"

#include <algorithm>
#include <map>

#include "cluster/near_duplicates.h"
#include "jobs/stage_names.h"
#include "models/catalog.h"
#include "models/decode.h"

namespace framemill {
namespace {

// Labels by their best score, highest first.
nlohmann::json Categories(const std::map<std::string, std::pair<double, int>>& best,
                          const char* count_key) {
  std::vector<std::pair<std::string, std::pair<double, int>>> v(best.begin(), best.end());
  std::stable_sort(v.begin(), v.end(),
                   [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [label, sc] : v)
    out.push_back({{"label", label}, {"score", sc.first}, {count_key, sc.second}});
  return out;
}

// One frame's objects (boxes clamped to the image) and categories: the objects scoring
// below `shown` are kept, marked, and left out of the categories.
nlohmann::json FrameResultOf(const std::string& model, const std::vector<models::Detection>& dets,
                             cv::Size image, double shown) {
  nlohmann::json objects = nlohmann::json::array();
  std::map<std::string, std::pair<double, int>> best;
  const float W = static_cast<float>(image.width), H = static_cast<float>(image.height);
  for (const auto& d : dets) {
    const std::string label = models::CocoLabel(d.class_id);
    nlohmann::json o = {{"label", label}, {"class", d.class_id}, {"score", d.score},
                        {"box", {std::clamp(d.x1, 0.f, W), std::clamp(d.y1, 0.f, H),
                                 std::clamp(d.x2, 0.f, W), std::clamp(d.y2, 0.f, H)}}};
    const bool below = d.score < shown;
    if (below) o["below_threshold"] = true;
    objects.push_back(std::move(o));
    if (below) continue;
    auto& b = best[label];
    b.first = std::max<double>(b.first, d.score);
    ++b.second;
  }
  return {{"model", model}, {"objects", objects}, {"categories", Categories(best, "count")}};
}

// What the dedup stage compares a picture by (cluster/near_duplicates.h): pHash, the content
// model's pooled features, size and sharpness, and the file the stage read (for the check
// on the pixels that confirms a pair).
nlohmann::json Signature(const ModelFrame& frame, const ClaimedJob& job,
                         const std::vector<models::OutputTensor>& outs, const std::string& features) {
  std::vector<float> embedding;
  for (const auto& o : outs)
    if (o.name == features) embedding = o.data;
  cluster::PictureSignature s = cluster::MakeSignature(frame.bgr, embedding);
  s.bytes = job.size;
  nlohmann::json j = cluster::ToJson(s);
  j["file"] = job.source;
  return j;
}

// A video's content and NSFW figures: the frames' mean probabilities; `unsafe` is the worst
// frame's, since one unsafe frame makes the video unsafe.
void SummariseContent(const std::vector<nlohmann::json>& frames, nlohmann::json* r) {
  double photo = 0, unsafe = 0;
  std::map<std::string, double> classes;
  size_t n = 0;
  for (const auto& f : frames) {
    if (!f.contains("content") || !f.contains("nsfw")) continue;
    const auto& c = f["content"];
    photo += c["type"] == "photo" ? c["p"].get<double>() : 1 - c["p"].get<double>();
    for (const char* k : models::kNsfwClasses) classes[k] += f["nsfw"][k].get<double>();
    unsafe = std::max(unsafe, f["nsfw"]["unsafe"].get<double>());
    ++n;
  }
  if (n == 0) return;
  photo /= static_cast<double>(n);
  const bool is_photo = photo >= 0.5;
  (*r)["content"] = {{"type", is_photo ? "photo" : "drawing"}, {"p", is_photo ? photo : 1 - photo}};
  nlohmann::json nsfw = nlohmann::json::object();
  for (const auto& [k, v] : classes) nsfw[k] = v / static_cast<double>(n);
  nsfw["unsafe"] = unsafe;
  (*r)["nsfw"] = std::move(nsfw);
}

}  // namespace

double ShownScore(const CategorizeOptions& options) {
  if (options.min_score) return *options.min_score;
  const models::ModelSpec* spec = models::FindModel(options.detector);
  // A detector outside the catalog has no measured score: its objects stay in `objects`,
  // below the threshold, and none is shown.
  return spec != nullptr && spec->min_score > 0 ? spec->min_score : 1.0;
}

CategorizeStage::CategorizeStage(std::shared_ptr<models::ModelCache> cache,
                                 ModelStageOptions frames, CategorizeOptions options)
    : ModelStage(stage_names::kCategorize, std::move(cache), frames), options_(options) {}

Status CategorizeStage::Analyse(const ModelBatch& batch, const StageContext& ctx,
                                std::vector<FrameResult>* results, std::string* device) {
  models::ModelRunner& runner = *batch.runners.front();
  auto outs = RunOnFrames(runner, batch, ctx, device);
  if (!outs.ok()) return outs.status();
  const double shown = ShownScore(options_);
  const models::DetectionOptions opt =
      models::DetectionDefaults(runner.manifest(), static_cast<float>(std::min(options_.floor, shown)));
  models::ModelRunner& content = *batch.runners[1];
  std::string content_device;
  auto couts = RunOnFrames(content, batch, ctx, &content_device);
  if (!couts.ok()) return couts.status();
  // Each frame's objects, content and signature, on the worker's threads at once (the device
  // waits for the host meanwhile).
  return ForEachFrame(0, batch.frames.size(), [&](size_t i) -> Status {
    const cv::Size image = batch.frames[i].bgr.size();
    auto dets = models::DecodeObjects(runner.manifest(), (*outs)[i], image, opt);
    if (!dets.ok()) return dets.status();
    auto c = models::DecodeContent(content.manifest(), (*couts)[i]);
    if (!c.ok()) return c.status();
    nlohmann::json r = FrameResultOf(runner.manifest().name, *dets, image, shown);
    r.update(models::ToJson(*c));
    r["signature"] = Signature(batch.frames[i], batch.jobs[batch.frames[i].job], (*couts)[i],
                               content.manifest().content_probe.output);
    (*results)[i].result = std::move(r);
    return Status::OK();
  });
}

// A video's categories: each label's best score over the frames, and in how many.
void CategorizeStage::Summarise(const std::vector<nlohmann::json>& frames,
                                nlohmann::json* r) const {
  std::map<std::string, std::pair<double, int>> best;
  for (const auto& f : frames) {
    if (f.contains("model")) (*r)["model"] = f["model"];
    for (const auto& c : f["categories"]) {
      auto& b = best[c["label"].get<std::string>()];
      b.first = std::max(b.first, c["score"].get<double>());
      ++b.second;
    }
  }
  (*r)["categories"] = Categories(best, "frames");
  SummariseContent(frames, r);
}

}  // namespace framemill
