#include "stages/faces_stage.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <opencv2/imgproc.hpp>
#include <tbb/parallel_for.h>

#include "jobs/stage_names.h"

namespace framemill {
namespace {

// BlazeFace's keypoints, in the model's order (MediaPipe's face detection).
const char* const kKeypoints[6] = {"right_eye", "left_eye", "nose", "mouth", "right_ear",
                                   "left_ear"};

nlohmann::json FaceJson(const models::FaceBox& f, float presence, const FaceQuality& q,
                        const models::FaceDescription& d) {
  nlohmann::json kp = nlohmann::json::object();
  for (int k = 0; k < 6; ++k) kp[kKeypoints[k]] = {f.keypoints[k].x, f.keypoints[k].y};
  nlohmann::json face = {{"box", {f.x1, f.y1, f.x2, f.y2}}, {"score", f.score},
                         {"verified", presence}, {"quality", q.score},
                         {"quality_parts", {{"size_px", q.size_px}, {"sharpness", q.sharpness},
                                            {"frontal", q.frontal}, {"presence", q.presence}}},
                         {"keypoints", kp}};
  face["embedding"] = d.embedding.values;
  if (d.has_attributes) {
    face["age"] = d.age;
    face["gender"] = d.gender;
    face["gender_confidence"] = d.gender_confidence;
  }
  return face;
}

// The faces the verifier refused: box, the detector's score, the verifier's presence.
nlohmann::json RefusedJson(const std::vector<std::pair<models::FaceBox, float>>& refused) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [f, presence] : refused)
    out.push_back({{"box", {f.x1, f.y1, f.x2, f.y2}}, {"score", f.score}, {"verified", presence}});
  return out;
}

// The pixels of `tile`, a square reaching past the image, already at the detector's
// input size (a tile of a large image would otherwise take gigabytes before resizing).
// `scaled` keeps the image resized per scale: a pyramid level's tiles share one resize (a
// 1.3 MP photo's edge tiles each resized the whole photo: ~5 ms of a device worker's host
// time a photo), the same pixels.
cv::Mat OnBlack(const cv::Mat& image, const cv::Rect& tile, int input_side,
                std::map<double, cv::Mat>* scaled) {
  const double scale = static_cast<double>(input_side) / tile.width;
  cv::Mat out = cv::Mat::zeros(input_side, input_side, image.type());
  cv::Mat& small = (*scaled)[scale];
  if (small.empty()) cv::resize(image, small, cv::Size(), scale, scale, cv::INTER_AREA);
  const cv::Rect at(static_cast<int>(std::lround(-tile.x * scale)),
                    static_cast<int>(std::lround(-tile.y * scale)), small.cols, small.rows);
  const cv::Rect fit = at & cv::Rect(0, 0, input_side, input_side);
  small(fit - at.tl()).copyTo(out(fit));
  return out;
}

}  // namespace

cv::Mat FaceCrop(const cv::Mat& image, const models::FaceBox& f, float scale) {
  const float side = std::max(f.x2 - f.x1, f.y2 - f.y1) * scale;
  return SquareCrop(image, {(f.x1 + f.x2) / 2, (f.y1 + f.y2) / 2},
                    static_cast<int>(std::lround(side)));
}

FacesStage::FacesStage(std::shared_ptr<models::ModelCache> cache, ModelStageOptions frames,
                       FacesOptions options)
    : ModelStage(stage_names::kFaces, std::move(cache), frames), options_(std::move(options)) {}

std::vector<FacesStage::FrameFaces> FacesStage::PlanFrames(const ModelBatch& batch,
                                                          int input_side,
                                                          std::vector<cv::Mat>* tiles) const {
  std::vector<FrameFaces> frames(batch.frames.size());
  if (options_.detector != kTiled) return frames;
  models::TileOptions t = options_.tiles;
  // Each frame's tiles on the worker's threads at once, then in frame order.
  std::vector<std::vector<cv::Mat>> per_frame(frames.size());
  tbb::parallel_for(size_t{0}, frames.size(), [&](size_t i) {
    const cv::Mat& image = batch.frames[i].bgr;
    frames[i].plan = models::PlanFaceTiles(image.size(), t);
    const cv::Rect inside(0, 0, image.cols, image.rows);
    std::map<double, cv::Mat> scaled;
    for (const cv::Rect& r : frames[i].plan.tiles)
      per_frame[i].push_back((r & inside) == r ? image(r) : OnBlack(image, r, input_side, &scaled));
  });
  for (auto& f : per_frame)
    for (cv::Mat& m : f) tiles->push_back(std::move(m));
  return frames;
}

Status FacesStage::Detect(const models::ModelManifest& m, const ModelBatch& batch,
                          const models::BatchOutputs& whole, const models::BatchOutputs& tiled,
                          std::vector<FrameFaces>* frames) const {
  models::BlazeFaceOptions opt;
  // Each frame on the worker's threads at once; its tiles' heads start at first[i].
  std::vector<size_t> first(frames->size(), 0);
  for (size_t i = 1; i < frames->size(); ++i) first[i] = first[i - 1] + (*frames)[i - 1].plan.tiles.size();
  return ForEachFrame(0, frames->size(), [&](size_t i) {
    return DetectIn(m, batch.frames[i].bgr.size(), whole[i], tiled, first[i], opt, &(*frames)[i]);
  });
}

Status FacesStage::DetectIn(const models::ModelManifest& m, cv::Size size,
                            const std::vector<models::OutputTensor>& whole,
                            const models::BatchOutputs& tiled, size_t t,
                            const models::BlazeFaceOptions& opt, FrameFaces* frame) const {
  auto found = models::DecodeFaceCandidates(m, whole, size, opt);
  if (!found.ok()) return found.status();
  std::vector<models::FaceBox> candidates = std::move(found).value();
  for (const cv::Rect& tile : frame->plan.tiles) {
    auto in_tile = models::DecodeFaceCandidates(m, tiled[t++], tile.size(), opt);
    if (!in_tile.ok()) return in_tile.status();
    // Two input pixels of margin: a face cut by the tile's edge ends about there.
    const float margin = 2.f * tile.width / m.preprocess.width;
    for (const auto& f : *in_tile) {
      models::FaceBox g = models::FromTile(f, tile);
      if (f.score > kTileMinScore && models::WholeInTile(g, tile, size, margin))
        candidates.push_back(g);
    }
  }
  frame->faces = models::MergeFaces(std::move(candidates), opt.iou_threshold, kContainment,
                                    options_.max_faces);
  return Status::OK();
}

Status FacesStage::Verify(models::ModelRunner& verifier, const ModelBatch& batch,
                          const std::vector<cv::Mat>& proposed, const models::BatchOutputs& checked,
                          std::vector<FrameFaces>* frames) const {
  size_t c = 0;
  for (size_t i = 0; i < frames->size(); ++i) {
    FrameFaces& frame = (*frames)[i];
    std::vector<models::FaceBox> kept;
    for (const models::FaceBox& f : frame.faces) {
      auto mesh = models::DecodeFaceMesh(verifier.manifest(), checked[c], proposed[c].size());
      ++c;
      if (!mesh.ok()) return mesh.status();
      if (mesh->presence < options_.min_presence) {
        frame.refused.emplace_back(f, mesh->presence);
        continue;
      }
      kept.push_back(f);
      frame.presence.push_back(mesh->presence);
      const double side = std::min(f.x2 - f.x1, f.y2 - f.y1);
      frame.quality.push_back(ScoreFaceQuality(side, FaceSharpness(FaceCrop(batch.frames[i].bgr, f, 1.0f)),
                                               models::FaceFrontalness(*mesh), mesh->presence));
    }
    frame.faces = std::move(kept);
  }
  return Status::OK();
}

Status FacesStage::Describe(const models::ModelManifest& embedder,
                            const std::vector<FrameFaces>& frames,
                            const models::BatchOutputs& described,
                            std::vector<FrameResult>* results) const {
  size_t c = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    nlohmann::json list = nlohmann::json::array();
    for (size_t k = 0; k < frames[i].faces.size(); ++k) {
      auto d = models::DecodeFaceDescription(embedder, described[c++]);
      if (!d.ok()) return d.status();
      list.push_back(FaceJson(frames[i].faces[k], frames[i].presence[k], frames[i].quality[k], *d));
    }
    nlohmann::json& r = (*results)[i].result;
    r = {{"detector", options_.detector}, {"embedding_model", embedder.name},
         {"count", list.size()}, {"faces", std::move(list)},
         {"unverified", frames[i].refused.size()}, {"refused", RefusedJson(frames[i].refused)}};
    if (options_.detector == kTiled) {
      r["tiles"] = frames[i].plan.tiles.size();
      r["min_face_px"] = frames[i].plan.min_face_px;
    }
  }
  return Status::OK();
}

Status FacesStage::Analyse(const ModelBatch& batch, const StageContext& ctx,
                           std::vector<FrameResult>* results, std::string* device) {
  models::ModelRunner& detector = *batch.runners[0];
  models::ModelRunner& embedder = *batch.runners[1];
  models::ModelRunner& verifier = *batch.runners[2];
  std::vector<std::string> devices;
  auto run = [&](models::ModelRunner& r, const std::vector<cv::Mat>& images)
      -> Result<models::BatchOutputs> {
    if (images.empty()) return models::BatchOutputs{};
    std::string d;
    auto out = RunModel(r, images, ctx, &d);
    devices.push_back(d);
    return out;
  };
  std::vector<cv::Mat> whole, tiles, crops;
  for (const ModelFrame& f : batch.frames) whole.push_back(f.bgr);
  std::vector<FrameFaces> frames = PlanFrames(batch, detector.manifest().preprocess.width, &tiles);
  auto heads = run(detector, whole);
  if (!heads.ok()) return heads.status();
  // Tiles in runs of kTilesPerRun: a batch of large photos holds hundreds of them, and one
  // run would hold every tile's input tensor at once (0.75 MiB each).
  models::BatchOutputs tile_heads;
  for (size_t b = 0; b < tiles.size(); b += kTilesPerRun) {
    const size_t e = std::min(tiles.size(), b + kTilesPerRun);
    auto part = run(detector, std::vector<cv::Mat>(tiles.begin() + b, tiles.begin() + e));
    if (!part.ok()) return part.status();
    for (auto& o : *part) tile_heads.push_back(std::move(o));
  }
  Status found = Detect(detector.manifest(), batch, *heads, tile_heads, &frames);
  if (!found.ok()) return found;
  // One verifier run over every proposed face, then one embedding run over those kept.
  std::vector<cv::Mat> proposed;
  for (size_t i = 0; i < frames.size(); ++i)
    for (const auto& f : frames[i].faces)
      proposed.push_back(FaceCrop(batch.frames[i].bgr, f, kVerifyCropScale));
  auto checked = run(verifier, proposed);
  if (!checked.ok()) return checked.status();
  if (Status v = Verify(verifier, batch, proposed, *checked, &frames); !v.ok()) return v;
  for (size_t i = 0; i < frames.size(); ++i)
    for (const auto& f : frames[i].faces) crops.push_back(FaceCrop(batch.frames[i].bgr, f));
  auto described = run(embedder, crops);
  if (!described.ok()) return described.status();
  if (Status s = Describe(embedder.manifest(), frames, *described, results); !s.ok()) return s;
  *device = gpu::OneDevice(devices);
  return Status::OK();
}

void FacesStage::Summarise(const std::vector<nlohmann::json>& frames, nlohmann::json* r) const {
  size_t most = 0;
  int unverified = 0;
  for (const auto& f : frames) {
    most = std::max(most, f["count"].get<size_t>());
    unverified += f.value("unverified", 0);
    (*r)["detector"] = f["detector"];
    (*r)["embedding_model"] = f["embedding_model"];
  }
  (*r)["max_faces"] = most;
  (*r)["unverified"] = unverified;
}

}  // namespace framemill
