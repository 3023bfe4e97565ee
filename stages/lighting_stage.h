// The `lighting` stage: exposure, contrast, clipping, dynamic range, colour
// temperature and light direction of an image, or of a video's sampled frames. The
// pixel statistics (operation LIGHTING) run on the device the GPU policy chose.
// Stateless after construction; Run/RunBatch are thread-safe.
#pragma once

#include "configs/config.h"
#include "stages/stage.h"

namespace framemill {

class LightingStage : public Stage {
 public:
  explicit LightingStage(MediaConfig media);
  const StageSpec& spec() const override { return spec_; }
  StageOutput Run(const ClaimedJob& job) override;
  std::vector<StageOutput> RunBatch(const std::vector<ClaimedJob>& jobs,
                                    const StageContext& ctx) override;

 private:
  // Decodes every job, then takes all frames' statistics in one ladder run.
  std::vector<StageOutput> RunTogether(const std::vector<ClaimedJob>& jobs,
                                       const StageContext& ctx);
  MediaConfig media_;
  StageSpec spec_;
};

}  // namespace framemill
