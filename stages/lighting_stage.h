// The `lighting` stage: exposure, contrast, clipping, dynamic range, colour
// temperature and light direction of an image, or of a video's sampled frames.
// Stateless after construction; Run is thread-safe.
#pragma once

#include "configs/config.h"
#include "stages/stage.h"

namespace framemill {

class LightingStage : public Stage {
 public:
  explicit LightingStage(MediaConfig media);
  const StageSpec& spec() const override { return spec_; }
  StageOutput Run(const ClaimedJob& job) override;

 private:
  MediaConfig media_;
  StageSpec spec_;
};

}  // namespace framemill
