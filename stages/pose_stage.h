// The `pose` stage, operation POSE: body keypoints in image pixels with scores.
// movenet-multipose (default) finds up to 6 people; on a video it reads the frames in
// order (pose.video_fps) and links the people into tracks (analysis/pose_tracks.h), with
// the camera's motion between frames taken out by the motion analyser. movenet-lightning
// (17 COCO keypoints) and blazepose-full (39 landmarks) give the main person of an image
// or of a video's sampled frames. The image is padded to a square first so the
// square-input models see it unstretched.
// Holds only configuration and the shared model cache; RunBatch is thread-safe.
#pragma once

#include <memory>
#include <string>

#include "analysis/pose_tracks.h"
#include "models/decode.h"
#include "stages/model_stage.h"
#include "stages/stage_options.h"

namespace framemill {

class PoseStage : public ModelStage {
 public:
  PoseStage(std::shared_ptr<models::ModelCache> cache, ModelStageOptions frames,
            PoseOptions options);

  std::vector<std::string> Models() const override { return {options_.model}; }

 protected:
  Status Analyse(const ModelBatch& batch, const StageContext& ctx,
                 std::vector<FrameResult>* results, std::string* device) override;
  void Summarise(const std::vector<nlohmann::json>& frames, nlohmann::json* result) const override;

 private:
  bool multi() const { return options_.model == "movenet-multipose"; }
  // One frame's result: the person (single-pose models) or the people and, on a video,
  // what the tracks need (time, source size).
  nlohmann::json FrameResultJson(const std::string& model, const models::PoseDecoded& pose,
                                 const ModelFrame& frame, cv::Size square) const;
  PoseTrackOptions TrackOptions(const std::vector<PoseFrame>& frames) const;
  // Per analysed frame of a video: the camera's motion from the frame before.
  void AddCamera(const ModelBatch& batch, std::vector<FrameResult>* results) const;

  PoseOptions options_;
};

}  // namespace framemill
