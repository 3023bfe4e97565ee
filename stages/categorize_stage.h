// The `categorize` stage: COCO objects in an image (or a video's sampled frames) with
// CenterNet (operation CATEGORIZE): boxes in image pixels, labels, scores, and the
// categories present ranked by their best score.
// Holds only configuration and the shared model pool; Run/RunBatch are thread-safe.
#pragma once

#include <memory>

#include "configs/config.h"
#include "stages/model_pool.h"
#include "stages/stage.h"

namespace framemill {

class CategorizeStage : public Stage {
 public:
  static constexpr const char* kModel = "centernet";

  CategorizeStage(std::shared_ptr<ModelPool> pool, MediaConfig media, CategorizeConfig config);
  const StageSpec& spec() const override { return spec_; }
  StageOutput Run(const ClaimedJob& job) override;
  std::vector<StageOutput> RunBatch(const std::vector<ClaimedJob>& jobs,
                                    const StageContext& ctx) override;

 private:
  std::shared_ptr<ModelPool> pool_;
  MediaConfig media_;
  CategorizeConfig config_;
  StageSpec spec_;
};

}  // namespace framemill
