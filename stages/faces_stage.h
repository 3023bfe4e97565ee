// The `faces` stage: faces found by BlazeFace on the whole image (operation
// FACE_DETECTION), each described by an embedding of its crop (FACE_EMBEDDING):
// faceres (1024-d plus age and gender, default) or mobilefacenet (192-d).
// Holds only configuration and the shared model cache; RunBatch is thread-safe.
#pragma once

#include <memory>
#include <string>

#include <opencv2/core.hpp>

#include "models/decode.h"
#include "stages/model_stage.h"
#include "stages/stage_options.h"

namespace framemill {

class FacesStage : public ModelStage {
 public:
  static constexpr const char* kDetector = "blazeface";

  FacesStage(std::shared_ptr<models::ModelCache> cache, ModelStageOptions frames,
             FacesOptions options);

 protected:
  std::vector<std::string> Models() const override {
    return {kDetector, options_.embedding_model};
  }
  Status Analyse(const ModelBatch& batch, const StageContext& ctx,
                 std::vector<FrameResult>* results, std::string* device) override;
  void Summarise(const std::vector<nlohmann::json>& frames, nlohmann::json* result) const override;

 private:
  FacesOptions options_;
};

// The crop an embedding model sees for a detected face: a square around the box's
// centre, its side the box's longer side times `scale` (human enlarges its detector
// boxes the same way), zero-padded where it leaves the image.
constexpr float kFaceCropScale = 1.4f;
cv::Mat FaceCrop(const cv::Mat& image, const models::FaceBox& face, float scale = kFaceCropScale);

}  // namespace framemill
