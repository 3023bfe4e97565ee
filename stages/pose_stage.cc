#include "stages/pose_stage.h"

#include <algorithm>

#include "models/decode.h"

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

// The decoded pose as named points in image pixels, and its mean score (over the 33
// body landmarks for BlazePose).
nlohmann::json Keypoints(const std::string& model, const models::PoseDecoded& p, cv::Size image) {
  nlohmann::json out = nlohmann::json::array();
  double sum = 0;
  size_t scored = 0;
  for (size_t k = 0; k < p.keypoints.size(); ++k) {
    const models::PoseKeypoint& kp = p.keypoints[k];
    out.push_back({{"name", k < 17 ? kCoco[k] : "keypoint_" + std::to_string(k)},
                   {"x", kp.x * image.width}, {"y", kp.y * image.height}, {"score", kp.score}});
    sum += kp.score;
    ++scored;
  }
  const float fx = static_cast<float>(image.width) / p.input.width;
  const float fy = static_cast<float>(image.height) / p.input.height;
  for (size_t k = 0; k < p.landmarks.size(); ++k) {
    const models::PoseLandmark& l = p.landmarks[k];
    out.push_back({{"name", k < 33 ? kBlazePose[k] : "auxiliary_" + std::to_string(k - 33)},
                   {"x", l.x * fx}, {"y", l.y * fy}, {"z", l.z},
                   {"score", l.visibility}, {"presence", l.presence}});
    if (k < 33) {
      sum += l.visibility;
      ++scored;
    }
  }
  nlohmann::json r = {{"model", model}, {"keypoints", out},
                      {"score", scored ? sum / static_cast<double>(scored) : 0.0}};
  if (p.has_pose_score) r["pose_score"] = p.pose_score;
  return r;
}

}  // namespace

PoseStage::PoseStage(std::shared_ptr<models::ModelCache> cache, ModelStageOptions frames,
                     PoseOptions options)
    : ModelStage("pose", std::move(cache), frames), options_(std::move(options)) {}

Status PoseStage::Analyse(const ModelBatch& batch, const StageContext& ctx,
                          std::vector<FrameResult>* results, std::string* device) {
  models::ModelRunner& runner = *batch.runners.front();
  std::vector<cv::Mat> squares;
  for (const ModelFrame& f : batch.frames) squares.push_back(PadToSquare(f.bgr));
  auto outs = RunModel(runner, squares, ctx, device);
  if (!outs.ok()) return outs.status();
  for (size_t i = 0; i < batch.frames.size(); ++i) {
    auto pose = models::DecodePose(runner.manifest(), (*outs)[i]);
    if (!pose.ok()) return pose.status();
    // The padding is at the bottom and right: square pixels are image pixels.
    (*results)[i].result = Keypoints(runner.manifest().name, *pose, squares[i].size());
  }
  return Status::OK();
}

void PoseStage::Summarise(const std::vector<nlohmann::json>& frames, nlohmann::json* r) const {
  SummariseMean(frames, "score", "mean_score", r);
}

}  // namespace framemill
