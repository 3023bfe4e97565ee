// The `pose` stage: body keypoints of the main person in an image (or a video's sampled
// frames), operation POSE: movenet-lightning (17 COCO keypoints, default) or
// blazepose-full (39 landmarks), in image pixels with scores. The image is padded to a
// square first so the square-input models see it unstretched.
// Holds only configuration and the shared model pool; Run/RunBatch are thread-safe.
#pragma once

#include <memory>

#include "configs/config.h"
#include "stages/model_pool.h"
#include "stages/stage.h"

namespace framemill {

class PoseStage : public Stage {
 public:
  PoseStage(std::shared_ptr<ModelPool> pool, MediaConfig media, PoseConfig config);
  const StageSpec& spec() const override { return spec_; }
  StageOutput Run(const ClaimedJob& job) override;
  std::vector<StageOutput> RunBatch(const std::vector<ClaimedJob>& jobs,
                                    const StageContext& ctx) override;

 private:
  std::shared_ptr<ModelPool> pool_;
  MediaConfig media_;
  PoseConfig config_;
  StageSpec spec_;
};

}  // namespace framemill
