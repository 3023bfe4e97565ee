// The `lighting` stage: exposure, contrast, clipping, dynamic range, colour
// temperature and light direction of an image, or of a video's sampled frames. The
// pixel statistics (operation LIGHTING) run on the device the GPU policy chose.
// Stateless after construction; RunBatch is thread-safe.
#pragma once

#include "stages/stage.h"
#include "stages/stage_options.h"

namespace framemill {

class LightingStage : public Stage {
 public:
  explicit LightingStage(LightingOptions options);
  const StageSpec& spec() const override { return spec_; }
  std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>& jobs,
                                const StageContext& ctx) override;

 private:
  // Decodes every job, then takes all frames' statistics in one ladder run.
  std::vector<Outcome> RunTogether(const std::vector<ClaimedJob>& jobs, gpu::OomLadder& ladder);
  LightingOptions options_;
  StageSpec spec_;
};

}  // namespace framemill
