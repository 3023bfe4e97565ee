// The `inpaint` stage (images; a video is skipped with the reason): fills a hole and
// writes the filled image as a PNG under <out>/inpaint/. The hole is the segment stage's
// mask grown by `margin` (the default: the stage then depends on segment), or the user's:
// a folder holding a mask per item, matched by file stem, or one mask file for every
// item (a watermark), scaled to each image when sizes differ. Mask pixels > 127 are
// filled; an empty mask, or one over max_coverage, is skipped with the reason. The method
// is the configured one, or (auto) the one measured best for the hole's size
// (ChooseInpaintMethod), or the user's ONNX network. Exemplar fills search patches on
// the device the ladder chose for INPAINTING. Pixels outside the hole stay byte-identical.
// Holds configuration and, once opened, the user's network behind a mutex; RunBatch is
// thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "stages/per_job_stage.h"
#include "stages/stage_options.h"

namespace framemill {

class InpaintStage : public PerJobStage {
 public:
  // out_dir: the artifact directory (`out`); it and the mask and model paths are made
  // absolute here.
  InpaintStage(InpaintOptions options, const std::string& out_dir);
  ~InpaintStage() override;
  // inpaint.masks and inpaint.model must name what is there.
  Status CheckSettings() const override;

 protected:
  Outcome RunOne(const ClaimedJob& job, const StageContext& ctx) override;

 private:
  struct Hole;
  struct Network;  // the user's ONNX network, opened on first use
  Result<Hole> FindHole(const ClaimedJob& job, const StageContext& ctx, cv::Size size) const;
  Result<cv::Mat> RunModel(const cv::Mat& bgr, const cv::Mat& hole);

  InpaintOptions options_;
  std::mutex model_mu_;  // guards model_: an engine runs one call at a time
  std::unique_ptr<Network> model_;
};

}  // namespace framemill
