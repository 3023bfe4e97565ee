// The `segment` stage: the foreground mask of an image (or a video's sampled frames),
// operation SEGMENTATION: selfie (person, default) or isnet (salient object; about 7 s
// per image on a CPU). Each mask is written as an 8-bit PNG (255 = foreground) at the
// image's resolution under <out>/segment/, listed in the outcome's artifacts; the
// result gives coverage (foreground fraction) and bbox [x, y, w, h].
// Holds only configuration and the shared model cache; RunBatch is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "stages/model_stage.h"
#include "stages/stage_options.h"

namespace framemill {

class SegmentStage : public ModelStage {
 public:
  // out_dir: the artifact directory (`out`, FRAMEMILL_OUT); made absolute here.
  SegmentStage(std::shared_ptr<models::ModelCache> cache, ModelStageOptions frames,
               SegmentOptions options, const std::string& out_dir);

  // Where the mask of `job`'s item (frame -1 for an image) goes under this claim.
  std::string MaskPath(const ClaimedJob& job, int64_t frame) const;

  std::vector<std::string> Models() const override { return {options_.model}; }

 protected:
  Status Analyse(const ModelBatch& batch, const StageContext& ctx,
                 std::vector<FrameResult>* results, std::string* device) override;
  void Summarise(const std::vector<nlohmann::json>& frames, nlohmann::json* result) const override;

 private:
  SegmentOptions options_;
  std::string mask_dir_;
};

}  // namespace framemill
