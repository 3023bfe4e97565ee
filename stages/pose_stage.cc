#include "stages/pose_stage.h"

#include <algorithm>

#include "models/decode.h"
#include "stages/model_device.h"

namespace framemill {
namespace {

const char* const kCoco[17] = {
    "nose",          "left_eye",       "right_eye",      "left_ear",   "right_ear",
    "left_shoulder", "right_shoulder", "left_elbow",     "right_elbow", "left_wrist",
    "right_wrist",   "left_hip",       "right_hip",      "left_knee",  "right_knee",
    "left_ankle",    "right_ankle"};

// BlazePose's 33 body landmarks; the model's last 6 are auxiliary (ROI, not body parts).
const char* const kBlazePose[33] = {
    "nose", "left_eye_inner", "left_eye", "left_eye_outer", "right_eye_inner", "right_eye",
    "right_eye_outer", "left_ear", "right_ear", "mouth_left", "mouth_right", "left_shoulder",
    "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_pinky",
    "right_pinky", "left_index", "right_index", "left_thumb", "right_thumb", "left_hip",
    "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle", "left_heel",
    "right_heel", "left_foot_index", "right_foot_index"};

// The decoder's keypoints (image pixels under "px") as named points.
Result<nlohmann::json> Keypoints(const std::string& model, const nlohmann::json& decoded) {
  nlohmann::json out = nlohmann::json::array();
  double sum = 0;
  if (decoded.contains("keypoints")) {
    const auto& kps = decoded["keypoints"];
    for (size_t k = 0; k < kps.size(); ++k) {
      const double s = kps[k]["score"].get<double>();
      out.push_back({{"name", k < 17 ? kCoco[k] : "keypoint_" + std::to_string(k)},
                     {"x", kps[k]["px"][0]}, {"y", kps[k]["px"][1]}, {"score", s}});
      sum += s;
    }
  } else if (decoded.contains("landmarks")) {
    const auto& lms = decoded["landmarks"];
    for (size_t k = 0; k < lms.size(); ++k) {
      const double s = lms[k]["visibility"].get<double>();
      out.push_back({{"name", k < 33 ? kBlazePose[k] : "auxiliary_" + std::to_string(k - 33)},
                     {"x", lms[k]["px"][0]}, {"y", lms[k]["px"][1]}, {"z", lms[k]["z"]},
                     {"score", s}, {"presence", lms[k]["presence"]}});
      if (k < 33) sum += s;
    }
  } else {
    return Status::Corruption("model " + model + ": decoder gave no keypoints");
  }
  const size_t n = std::min<size_t>(out.size(), decoded.contains("landmarks") ? 33 : out.size());
  nlohmann::json r = {{"model", model}, {"keypoints", out}, {"score", n ? sum / n : 0.0}};
  if (decoded.contains("pose_score")) r["pose_score"] = decoded["pose_score"];
  return r;
}

}  // namespace

PoseStage::PoseStage(std::shared_ptr<ModelPool> pool, MediaConfig media, PoseConfig config)
    : pool_(std::move(pool)), media_(media), config_(std::move(config)) {
  spec_.name = "pose";
}

StageOutput PoseStage::Run(const ClaimedJob& job) { return RunBatch({job}, StageContext{}).front(); }

std::vector<StageOutput> PoseStage::RunBatch(const std::vector<ClaimedJob>& jobs,
                                             const StageContext& ctx) {
  auto model = pool_->Borrow(config_.model);
  if (!model.ok()) return FailAll(jobs, ctx, model.status());
  ModelRunner& runner = **model;

  auto analyse = [&](const std::vector<ModelFrame>& frames, const std::vector<ClaimedJob>&,
                     std::vector<FrameResult>* results, std::string* device) -> Status {
    std::vector<cv::Mat> squares;
    for (const ModelFrame& f : frames) squares.push_back(PadToSquare(f.bgr));
    auto outs = RunModel(runner, squares, ctx, device);
    if (!outs.ok()) return outs.status();
    for (size_t i = 0; i < frames.size(); ++i) {
      // The padding is at the bottom and right: square pixels are image pixels.
      auto decoded = models::DecodeOutputs(runner.manifest(), (*outs)[i], squares[i].size());
      if (!decoded.ok()) return decoded.status();
      auto r = Keypoints(runner.manifest().name, *decoded);
      if (!r.ok()) return r.status();
      (*results)[i].result = std::move(r).value();
    }
    return Status::OK();
  };
  auto summarise = [](const std::vector<nlohmann::json>& frames, nlohmann::json* r) {
    double sum = 0;
    for (const auto& f : frames) {
      sum += f["score"].get<double>();
      (*r)["model"] = f["model"];
    }
    (*r)["mean_score"] = frames.empty() ? 0.0 : sum / frames.size();
  };
  ModelStageOptions o;
  o.video_frames = media_.model_frames;
  o.together = runner.batchable();
  return RunModelStage(jobs, ctx, media_, o, analyse, summarise);
}

}  // namespace framemill
