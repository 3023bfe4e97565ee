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

#include "analysis/face_quality.h"
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
  // Every face the detector proposes is verified by a second, independent model: facemesh's
  // face presence on the face's crop (grown kVerifyCropScale, as its input is cropped in
  // human), and kept at FacesOptions::min_presence or more. Measured (models_bench
  // --benchmarks=faces_precision, bench/README "Faces: every detection verified"): on 82 real
  // pictures without a human face the detector proposed 21 faces (text, logos, a cat, a dog,
  // a galaxy), 20 of them with presence 0.044 or less, one (a cartoon robot) 0.992; the
  // Solvay photo's 29 true faces all 1.000, messi5's and basketball's 0.999-1.000. Any cut
  // from 0.05 to 0.99 keeps the same faces there: 0.5, the model's own even odds. Its cost:
  // faces turned to profile (left06/right06, 0.004-0.005) are refused with the false ones.
  static constexpr const char* kVerifier = "facemesh";
  static constexpr float kVerifyCropScale = 1.5f;

  FacesStage(std::shared_ptr<models::ModelCache> cache, ModelStageOptions frames,
             FacesOptions options);

  std::vector<std::string> Models() const override {
    return {kDetector, options_.embedding_model, kVerifier};
  }

 protected:
  Status Analyse(const ModelBatch& batch, const StageContext& ctx,
                 std::vector<FrameResult>* results, std::string* device) override;
  void Summarise(const std::vector<nlohmann::json>& frames, nlohmann::json* result) const override;

 private:
  struct FrameFaces {
    models::TilePlan plan;               // empty for the whole-frame detector
    std::vector<models::FaceBox> faces;  // merged, frame pixels
    std::vector<float> presence;         // the verifier's, one per face
    std::vector<FaceQuality> quality;    // one per face (analysis/face_quality.h)
    // Faces the detector proposed and the verifier refused, with their presence: in the
    // result (`refused`; the presence is `verified`, the contract's key), so that what was
    // left out can be seen and the cut re-measured.
    std::vector<std::pair<models::FaceBox, float>> refused;
  };
  // Each frame's tiles, their pixels appended to `tiles` (views into the frames).
  std::vector<FrameFaces> PlanFrames(const ModelBatch& batch, int input_side,
                                     std::vector<cv::Mat>* tiles) const;
  // Each frame's result: its kept faces described by the embedder's run, and the refused.
  Status Describe(const models::ModelManifest& embedder, const std::vector<FrameFaces>& frames,
                  const models::BatchOutputs& described, std::vector<FrameResult>* results) const;
  // Keeps the faces the verifier agrees are faces (min_presence), with its presence and
  // each kept face's quality. `proposed`: the crops the verifier saw, one per face, in
  // frame order.
  Status Verify(models::ModelRunner& verifier, const ModelBatch& batch,
                const std::vector<cv::Mat>& proposed, const models::BatchOutputs& checked,
                std::vector<FrameFaces>* frames) const;
  // Decodes the whole-frame and tile runs and merges them into each frame's faces.
  Status Detect(const models::ModelManifest& m, const ModelBatch& batch,
                const models::BatchOutputs& whole, const models::BatchOutputs& tiled,
                std::vector<FrameFaces>* frames) const;
  // One frame's faces: its whole-frame heads and its tiles' (tiled[t...]), merged.
  Status DetectIn(const models::ModelManifest& m, cv::Size size,
                  const std::vector<models::OutputTensor>& whole, const models::BatchOutputs& tiled,
                  size_t t, const models::BlazeFaceOptions& opt, FrameFaces* frame) const;

  FacesOptions options_;
};

// The crop an embedding model sees for a detected face: a square around the box's
// centre, its side the box's longer side times `scale` (human enlarges its detector
// boxes the same way), zero-padded where it leaves the image.
constexpr float kFaceCropScale = 1.4f;
cv::Mat FaceCrop(const cv::Mat& image, const models::FaceBox& face, float scale = kFaceCropScale);

}  // namespace framemill
