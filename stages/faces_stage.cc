#include "stages/faces_stage.h"
#include "stages/model_device.h"

#include <algorithm>
#include <cmath>

namespace framemill {
namespace {

// BlazeFace's keypoints, in the model's order (MediaPipe's face detection).
const char* const kKeypoints[6] = {"right_eye", "left_eye", "nose", "mouth", "right_ear",
                                   "left_ear"};

const models::OutputTensor* ByName(const std::vector<models::OutputTensor>& outs,
                                   const std::string& name) {
  for (const auto& o : outs)
    if (o.name == name) return &o;
  return nullptr;
}

}  // namespace

cv::Mat FaceCrop(const cv::Mat& image, const models::FaceBox& f, float scale) {
  const float side = std::max(f.x2 - f.x1, f.y2 - f.y1) * scale;
  return SquareCrop(image, {(f.x1 + f.x2) / 2, (f.y1 + f.y2) / 2},
                    static_cast<int>(std::lround(side)));
}

Result<std::vector<float>> BlazeFaceRows(const std::vector<models::OutputTensor>& outs) {
  // Score heads end in 1, regressor heads in 16; pair them by anchor count, larger first.
  std::vector<const models::OutputTensor*> sc, rg;
  for (const auto& o : outs) {
    if (o.shape.empty()) continue;
    if (o.shape.back() == 1) sc.push_back(&o);
    if (o.shape.back() == 16) rg.push_back(&o);
  }
  if (sc.empty() || sc.size() != rg.size())
    return Status::Corruption("blazeface: expected score [..,1] and regressor [..,16] heads in pairs");
  auto larger = [](const models::OutputTensor* a, const models::OutputTensor* b) {
    return a->data.size() > b->data.size();
  };
  std::stable_sort(sc.begin(), sc.end(), larger);
  std::stable_sort(rg.begin(), rg.end(), larger);
  std::vector<float> rows;
  for (size_t g = 0; g < sc.size(); ++g) {
    const size_t n = sc[g]->data.size();
    if (rg[g]->data.size() != n * 16) return Status::Corruption("blazeface: heads do not pair up");
    for (size_t i = 0; i < n; ++i) {
      rows.push_back(sc[g]->data[i]);
      rows.insert(rows.end(), rg[g]->data.begin() + static_cast<long>(i * 16),
                  rg[g]->data.begin() + static_cast<long>(i * 16 + 16));
    }
  }
  return rows;
}

FacesStage::FacesStage(std::shared_ptr<ModelPool> pool, MediaConfig media, FacesConfig config)
    : pool_(std::move(pool)), media_(media), config_(std::move(config)) {
  spec_.name = "faces";
}

StageOutput FacesStage::Run(const ClaimedJob& job) {
  return RunBatch({job}, StageContext{}).front();
}

std::vector<StageOutput> FacesStage::RunBatch(const std::vector<ClaimedJob>& jobs,
                                              const StageContext& ctx) {
  auto det = pool_->Borrow(kDetector);
  if (!det.ok()) return FailAll(jobs, ctx, det.status());
  auto emb = pool_->Borrow(config_.embedding_model);
  if (!emb.ok()) return FailAll(jobs, ctx, emb.status());
  ModelRunner& detector = **det;
  ModelRunner& embedder = **emb;

  auto analyse = [&](const std::vector<ModelFrame>& frames, const std::vector<ClaimedJob>&,
                     std::vector<FrameResult>* results, std::string* device) -> Status {
    std::vector<cv::Mat> images;
    for (const ModelFrame& f : frames) images.push_back(f.bgr);
    std::string detector_device, embedder_device;
    auto heads = RunModel(detector, images, ctx, &detector_device);
    if (!heads.ok()) return heads.status();
    models::BlazeFaceOptions opt;
    opt.input_size = detector.manifest().preprocess.width;
    // Every face of every frame, then one embedding run over all their crops.
    std::vector<std::vector<models::FaceBox>> faces(frames.size());
    std::vector<cv::Mat> crops;
    for (size_t i = 0; i < frames.size(); ++i) {
      auto rows = BlazeFaceRows((*heads)[i]);
      if (!rows.ok()) return rows.status();
      faces[i] = models::DecodeBlazeFace(*rows, frames[i].bgr.size(), opt);
      for (const auto& f : faces[i]) crops.push_back(FaceCrop(frames[i].bgr, f));
    }
    std::vector<std::vector<models::OutputTensor>> described;
    if (!crops.empty()) {
      auto d = RunModel(embedder, crops, ctx, &embedder_device);
      if (!d.ok()) return d.status();
      described = std::move(d).value();
    }
    const std::string& em = embedder.manifest().name;
    size_t c = 0;
    for (size_t i = 0; i < frames.size(); ++i) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& f : faces[i]) {
        const auto& outs = described[c++];
        nlohmann::json kp = nlohmann::json::object();
        for (int k = 0; k < 6; ++k) kp[kKeypoints[k]] = {f.keypoints[k].x, f.keypoints[k].y};
        nlohmann::json face = {{"box", {f.x1, f.y1, f.x2, f.y2}}, {"score", f.score},
                               {"keypoints", kp}};
        const auto* e = ByName(outs, "embedding");
        if (e == nullptr && !outs.empty()) e = &outs.front();
        if (e == nullptr) return Status::Corruption("model " + em + ": no embedding output");
        const auto* age = ByName(outs, "age");
        const auto* gender = ByName(outs, "gender");
        if (age != nullptr && gender != nullptr && !gender->data.empty()) {
          models::FaceDescription d = models::DecodeFaceRes(e->data, age->data, gender->data[0]);
          face["embedding"] = d.embedding.values;
          face["age"] = d.age;
          face["gender"] = d.gender;
          face["gender_confidence"] = d.gender_confidence;
        } else {
          face["embedding"] = models::L2Normalize(e->data).values;
        }
        list.push_back(std::move(face));
      }
      (*results)[i].result = {{"detector", detector.manifest().name}, {"embedding_model", em},
                              {"count", list.size()}, {"faces", std::move(list)}};
    }
    // Both models ran on the same kind of device; a mix would be reported as the CPU.
    if (embedder_device.empty()) embedder_device = detector_device;  // no faces to embed
    *device = detector_device == embedder_device ? detector_device : std::string("cpu");
    return Status::OK();
  };
  auto summarise = [](const std::vector<nlohmann::json>& frames, nlohmann::json* r) {
    size_t most = 0;
    for (const auto& f : frames) {
      most = std::max(most, f["count"].get<size_t>());
      (*r)["detector"] = f["detector"];
      (*r)["embedding_model"] = f["embedding_model"];
    }
    (*r)["max_faces"] = most;
  };
  ModelStageOptions o;
  o.video_frames = media_.model_frames;
  o.together = detector.batchable();
  return RunModelStage(jobs, ctx, media_, o, analyse, summarise);
}

}  // namespace framemill
