// The `categorize` stage: COCO objects in an image (or a video's sampled frames) with
// CenterNet or YOLOv8 (categorize.detector; operation CATEGORIZE): boxes in image pixels, labels, scores, and the
// categories present ranked by their best score; and what curators filter on first, from
// nsfwjs (also CATEGORIZE): `content` (photo or drawing) and `nsfw` (five classes, unsafe);
// and per picture the `signature` the dedup stage groups near-duplicates by.
// Holds only configuration and the shared model cache; RunBatch is thread-safe.
#pragma once

#include <memory>

#include "stages/model_stage.h"
#include "stages/stage_options.h"

namespace framemill {

// The score from which the stage shows an object (`categories`, the report, export's
// --label): categorize.min_score, or where that is auto the detector's own, measured
// (models/catalog.cc, ModelSpec::min_score).
double ShownScore(const CategorizeOptions& options);

class CategorizeStage : public ModelStage {
 public:
  // Photo or drawing and the NSFW classes (nsfwjs's MobileNetV2 with framemill's content probe).
  static constexpr const char* kContentModel = "nsfw";

  CategorizeStage(std::shared_ptr<models::ModelCache> cache, ModelStageOptions frames,
                  CategorizeOptions options);

  // The detector (categorize.detector), then the content model.
  std::vector<std::string> Models() const override { return {options_.detector, kContentModel}; }

 protected:
  Status Analyse(const ModelBatch& batch, const StageContext& ctx,
                 std::vector<FrameResult>* results, std::string* device) override;
  void Summarise(const std::vector<nlohmann::json>& frames, nlohmann::json* result) const override;

 private:
  CategorizeOptions options_;
};

}  // namespace framemill
