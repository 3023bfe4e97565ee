// The `faces` stage: faces found by BlazeFace on the whole image (operation
// FACE_DETECTION), each described by an embedding of its crop (FACE_EMBEDDING):
// faceres (1024-d plus age and gender, default) or mobilefacenet (192-d).
// Holds only configuration and the shared model pool; Run/RunBatch are thread-safe.
#pragma once

#include <memory>

#include <opencv2/core.hpp>

#include "configs/config.h"
#include "models/decode.h"
#include "stages/model_pool.h"
#include "stages/stage.h"

namespace framemill {

class FacesStage : public Stage {
 public:
  static constexpr const char* kDetector = "blazeface";

  FacesStage(std::shared_ptr<ModelPool> pool, MediaConfig media, FacesConfig config);
  const StageSpec& spec() const override { return spec_; }
  StageOutput Run(const ClaimedJob& job) override;
  std::vector<StageOutput> RunBatch(const std::vector<ClaimedJob>& jobs,
                                    const StageContext& ctx) override;

 private:
  std::shared_ptr<ModelPool> pool_;
  MediaConfig media_;
  FacesConfig config_;
  StageSpec spec_;
};

// The crop an embedding model sees for a detected face: a square around the box's
// centre, its side the box's longer side times `scale` (human enlarges its detector
// boxes the same way), zero-padded where it leaves the image.
constexpr float kFaceCropScale = 1.4f;
cv::Mat FaceCrop(const cv::Mat& image, const models::FaceBox& face, float scale = kFaceCropScale);

// BlazeFace's rows (anchors x 17: logit, box, 6 keypoints) from the model's score and
// regressor heads, the 512 stride-16 anchors first.
Result<std::vector<float>> BlazeFaceRows(const std::vector<models::OutputTensor>& outs);

}  // namespace framemill
