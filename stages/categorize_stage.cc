#include "stages/categorize_stage.h"

#include <algorithm>
#include <map>

#include "models/decode.h"
#include "stages/model_device.h"

namespace framemill {
namespace {

const models::OutputTensor* Head(const std::vector<models::OutputTensor>& outs, const char* name,
                                 int64_t last_dim) {
  for (const auto& o : outs)
    if (o.name == name) return &o;
  for (const auto& o : outs)
    if (o.shape.size() == 4 && o.shape.back() == last_dim) return &o;
  return nullptr;
}

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

}  // namespace

CategorizeStage::CategorizeStage(std::shared_ptr<ModelPool> pool, MediaConfig media,
                                 CategorizeConfig config)
    : pool_(std::move(pool)), media_(media), config_(config) {
  spec_.name = "categorize";
}

StageOutput CategorizeStage::Run(const ClaimedJob& job) {
  return RunBatch({job}, StageContext{}).front();
}

std::vector<StageOutput> CategorizeStage::RunBatch(const std::vector<ClaimedJob>& jobs,
                                                   const StageContext& ctx) {
  auto model = pool_->Borrow(kModel);
  if (!model.ok()) return FailAll(jobs, ctx, model.status());
  ModelRunner& runner = **model;
  models::DetectionOptions opt;
  opt.min_score = static_cast<float>(config_.min_score);
  opt.max_detections = 20;

  auto analyse = [&](const std::vector<ModelFrame>& frames, const std::vector<ClaimedJob>&,
                     std::vector<FrameResult>* results, std::string* device) -> Status {
    std::vector<cv::Mat> images;
    for (const ModelFrame& f : frames) images.push_back(f.bgr);
    auto outs = RunModel(runner, images, ctx, device);
    if (!outs.ok()) return outs.status();
    const models::ModelManifest& m = runner.manifest();
    const cv::Size input(m.preprocess.width, m.preprocess.height);
    for (size_t i = 0; i < frames.size(); ++i) {
      const auto* heat = Head((*outs)[i], "keypoints", 80);
      const auto* wh = Head((*outs)[i], "wh", 4);
      if (heat == nullptr || wh == nullptr)
        return Status::Corruption("model " + m.name + ": no keypoints [..,80] / wh [..,4] heads");
      const int h = static_cast<int>(heat->shape[1]), w = static_cast<int>(heat->shape[2]);
      if (wh->data.size() != static_cast<size_t>(h) * w * 4 ||
          heat->data.size() != static_cast<size_t>(h) * w * 80)
        return Status::Corruption("model " + m.name + ": head sizes disagree");
      auto raw = models::CenterNetTopK(heat->data.data(), wh->data.data(), h, w, 80, 100,
                                       static_cast<float>(input.width) / w);
      const cv::Mat& img = frames[i].bgr;
      auto dets = models::FilterDetections(raw, input, img.size(), opt);
      nlohmann::json objects = nlohmann::json::array();
      std::map<std::string, std::pair<double, int>> best;
      for (const auto& d : dets) {
        const std::string label = models::CocoLabel(d.class_id);
        const float W = static_cast<float>(img.cols), H = static_cast<float>(img.rows);
        objects.push_back({{"label", label}, {"class", d.class_id}, {"score", d.score},
                           {"box", {std::clamp(d.x1, 0.f, W), std::clamp(d.y1, 0.f, H),
                                    std::clamp(d.x2, 0.f, W), std::clamp(d.y2, 0.f, H)}}});
        auto& b = best[label];
        b.first = std::max<double>(b.first, d.score);
        ++b.second;
      }
      (*results)[i].result = {{"model", m.name}, {"objects", objects},
                              {"categories", Categories(best, "count")}};
    }
    return Status::OK();
  };
  // A video's categories: each label's best score over the frames, and in how many.
  auto summarise = [](const std::vector<nlohmann::json>& frames, nlohmann::json* r) {
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
  };
  ModelStageOptions o;
  o.video_frames = media_.model_frames;
  o.together = runner.batchable();
  return RunModelStage(jobs, ctx, media_, o, analyse, summarise);
}

}  // namespace framemill
