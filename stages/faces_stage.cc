#include "stages/faces_stage.h"

#include <algorithm>
#include <cmath>

namespace framemill {
namespace {

// BlazeFace's keypoints, in the model's order (MediaPipe's face detection).
const char* const kKeypoints[6] = {"right_eye", "left_eye", "nose", "mouth", "right_ear",
                                   "left_ear"};

nlohmann::json FaceJson(const models::FaceBox& f, const models::FaceDescription& d) {
  nlohmann::json kp = nlohmann::json::object();
  for (int k = 0; k < 6; ++k) kp[kKeypoints[k]] = {f.keypoints[k].x, f.keypoints[k].y};
  nlohmann::json face = {{"box", {f.x1, f.y1, f.x2, f.y2}}, {"score", f.score}, {"keypoints", kp}};
  face["embedding"] = d.embedding.values;
  if (d.has_attributes) {
    face["age"] = d.age;
    face["gender"] = d.gender;
    face["gender_confidence"] = d.gender_confidence;
  }
  return face;
}

}  // namespace

cv::Mat FaceCrop(const cv::Mat& image, const models::FaceBox& f, float scale) {
  const float side = std::max(f.x2 - f.x1, f.y2 - f.y1) * scale;
  return SquareCrop(image, {(f.x1 + f.x2) / 2, (f.y1 + f.y2) / 2},
                    static_cast<int>(std::lround(side)));
}

FacesStage::FacesStage(std::shared_ptr<models::ModelCache> cache, ModelStageOptions frames,
                       FacesOptions options)
    : ModelStage("faces", std::move(cache), frames), options_(std::move(options)) {}

Status FacesStage::Analyse(const ModelBatch& batch, const StageContext& ctx,
                           std::vector<FrameResult>* results, std::string* device) {
  models::ModelRunner& detector = *batch.runners[0];
  models::ModelRunner& embedder = *batch.runners[1];
  std::string detector_device, embedder_device;
  auto heads = RunOnFrames(detector, batch, ctx, &detector_device);
  if (!heads.ok()) return heads.status();
  // Every face of every frame, then one embedding run over all their crops.
  std::vector<std::vector<models::FaceBox>> faces(batch.frames.size());
  std::vector<cv::Mat> crops;
  for (size_t i = 0; i < batch.frames.size(); ++i) {
    const cv::Mat& image = batch.frames[i].bgr;
    auto found = models::DecodeFaceDetections(detector.manifest(), (*heads)[i], image.size());
    if (!found.ok()) return found.status();
    faces[i] = std::move(found).value();
    for (const auto& f : faces[i]) crops.push_back(FaceCrop(image, f));
  }
  models::BatchOutputs described;
  if (!crops.empty()) {
    auto d = RunModel(embedder, crops, ctx, &embedder_device);
    if (!d.ok()) return d.status();
    described = std::move(d).value();
  }
  const std::string& em = embedder.manifest().name;
  size_t c = 0;
  for (size_t i = 0; i < batch.frames.size(); ++i) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& f : faces[i]) {
      auto d = models::DecodeFaceDescription(embedder.manifest(), described[c++]);
      if (!d.ok()) return d.status();
      list.push_back(FaceJson(f, *d));
    }
    (*results)[i].result = {{"detector", detector.manifest().name}, {"embedding_model", em},
                            {"count", list.size()}, {"faces", std::move(list)}};
  }
  // Both models ran on the same kind of device; a mix would be reported as the CPU.
  if (embedder_device.empty()) embedder_device = detector_device;  // no faces to embed
  *device = detector_device == embedder_device ? detector_device : std::string("cpu");
  return Status::OK();
}

void FacesStage::Summarise(const std::vector<nlohmann::json>& frames, nlohmann::json* r) const {
  size_t most = 0;
  for (const auto& f : frames) {
    most = std::max(most, f["count"].get<size_t>());
    (*r)["detector"] = f["detector"];
    (*r)["embedding_model"] = f["embedding_model"];
  }
  (*r)["max_faces"] = most;
}

}  // namespace framemill
