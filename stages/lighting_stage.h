// The `lighting` stage: exposure, contrast, clipping, dynamic range, colour
// temperature and light direction of an image, or of a video's sampled frames. The
// pixel statistics (operation LIGHTING) run on the device the GPU policy chose.
// Stateless after construction; RunBatch is thread-safe.
#pragma once

#include "media/image.h"
#include "stages/stage.h"

namespace framemill {

struct LightingOptions {
  ImageLimits limits;
  int video_frames = 8;  // frames sampled from each video (media.video_sample_frames)

  bool operator==(const LightingOptions&) const = default;
};

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
