// The `segment` stage: the foreground mask of an image (or a video's sampled frames),
// operation SEGMENTATION: selfie (person, default) or isnet (salient object; about 7 s
// per image on a CPU). Each mask is written as an 8-bit PNG (255 = foreground) at the
// image's resolution under <out>/segment/, listed in the output's artifacts; the
// result gives coverage (foreground fraction) and bbox [x, y, w, h].
// Holds only configuration and the shared model pool; Run/RunBatch are thread-safe.
#pragma once

#include <memory>
#include <string>

#include "configs/config.h"
#include "stages/model_pool.h"
#include "stages/stage.h"

namespace framemill {

class SegmentStage : public Stage {
 public:
  // out_dir: the artifact directory (config `out`, FRAMEMILL_OUT); made absolute here.
  SegmentStage(std::shared_ptr<ModelPool> pool, MediaConfig media, SegmentConfig config,
               const std::string& out_dir);
  const StageSpec& spec() const override { return spec_; }
  StageOutput Run(const ClaimedJob& job) override;
  std::vector<StageOutput> RunBatch(const std::vector<ClaimedJob>& jobs,
                                    const StageContext& ctx) override;

  // Where the mask of `item_id` (frame -1 for an image) goes.
  std::string MaskPath(int64_t item_id, int64_t frame) const;

 private:
  std::shared_ptr<ModelPool> pool_;
  MediaConfig media_;
  SegmentConfig config_;
  std::string mask_dir_;
  StageSpec spec_;
};

}  // namespace framemill
