// The `pose` stage: body keypoints of the main person in an image (or a video's sampled
// frames), operation POSE: movenet-lightning (17 COCO keypoints, default) or
// blazepose-full (39 landmarks), in image pixels with scores. The image is padded to a
// square first so the square-input models see it unstretched.
// Holds only configuration and the shared model cache; RunBatch is thread-safe.
#pragma once

#include <memory>
#include <string>

#include "stages/model_stage.h"
#include "stages/stage_options.h"

namespace framemill {

class PoseStage : public ModelStage {
 public:
  PoseStage(std::shared_ptr<models::ModelCache> cache, ModelStageOptions frames,
            PoseOptions options);

 protected:
  std::vector<std::string> Models() const override { return {options_.model}; }
  Status Analyse(const ModelBatch& batch, const StageContext& ctx,
                 std::vector<FrameResult>* results, std::string* device) override;
  void Summarise(const std::vector<nlohmann::json>& frames, nlohmann::json* result) const override;

 private:
  PoseOptions options_;
};

}  // namespace framemill
