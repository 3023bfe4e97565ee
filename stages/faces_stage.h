// The `faces` stage: faces found by BlazeFace (operation FACE_DETECTION) on the whole
// image and, with the default detector blazeface-tiled, on overlapping tiles so that
// small faces are found too (models/face_tiles.h); each face is described by an
// embedding of its crop (FACE_EMBEDDING): faceres (1024-d plus age and gender, default)
// or mobilefacenet (192-d).
// Holds only configuration and the shared model cache; RunBatch is thread-safe.
#pragma once

#include <memory>
#include <string>

#include <opencv2/core.hpp>

#include "models/decode.h"
#include "models/face_tiles.h"
#include "stages/model_stage.h"
#include "stages/stage_options.h"

namespace framemill {

class FacesStage : public ModelStage {
 public:
  static constexpr const char* kDetector = "blazeface";  // the model of both detectors
  static constexpr const char* kTiled = "blazeface-tiled";
  // A weaker face whose box lies this much inside a stronger one is the same face
  // (on close-ups BlazeFace also boxes the eyes-and-nose region, at 0.55-0.7).
  static constexpr float kContainment = 0.5f;
  // Every tile is another chance of a false face, so a face from a tile needs more than
  // the whole frame's 0.5. On opencv-doc's photos without faces, tiles found 0.61-0.68 on
  // a chessboard, a squirrel, an orange, Starry Night; the Solvay photo's 29 faces score
  // 0.72 and up.
  static constexpr float kTileMinScore = 0.7f;
  static constexpr size_t kTilesPerRun = 64;

  FacesStage(std::shared_ptr<models::ModelCache> cache, ModelStageOptions frames,
             FacesOptions options);

  std::vector<std::string> Models() const override {
    return {kDetector, options_.embedding_model};
  }

 protected:
  Status Analyse(const ModelBatch& batch, const StageContext& ctx,
                 std::vector<FrameResult>* results, std::string* device) override;
  void Summarise(const std::vector<nlohmann::json>& frames, nlohmann::json* result) const override;

 private:
  struct FrameFaces {
    models::TilePlan plan;               // empty for the whole-frame detector
    std::vector<models::FaceBox> faces;  // merged, frame pixels
  };
  // Each frame's tiles, their pixels appended to `tiles` (views into the frames).
  std::vector<FrameFaces> PlanFrames(const ModelBatch& batch, int input_side,
                                     std::vector<cv::Mat>* tiles) const;
  // Decodes the whole-frame and tile runs and merges them into each frame's faces.
  Status Detect(const models::ModelManifest& m, const ModelBatch& batch,
                const models::BatchOutputs& whole, const models::BatchOutputs& tiled,
                std::vector<FrameFaces>* frames) const;

  FacesOptions options_;
};

// The crop an embedding model sees for a detected face: a square around the box's
// centre, its side the box's longer side times `scale` (human enlarges its detector
// boxes the same way), zero-padded where it leaves the image.
constexpr float kFaceCropScale = 1.4f;
cv::Mat FaceCrop(const cv::Mat& image, const models::FaceBox& face, float scale = kFaceCropScale);

}  // namespace framemill
