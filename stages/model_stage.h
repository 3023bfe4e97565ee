// What the neural stages (categorize, faces, pose, segment) share: borrowing their models
// from the process's model cache, decoding a claimed batch into the frames the models see
// (an image, or sampled frames of a video), and assembling one outcome per job from the
// per-frame results a subclass computes. A subclass names its models and says how to
// analyse frames and how to sum up a video; the loop is written once, here.
// Not a PerJobStage (stages/per_job_stage.h): a batchable model takes the frames of many
// jobs in one run, which is what a device is for, so a subclass analyses frames, not a job.
// Jobs of a kind the spec does not take are skipped by the same check (SkipIfNotApplicable).
// Subclasses hold only configuration and the shared cache: RunBatch is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include "models/model_cache.h"
#include "models/run_model.h"
#include "stages/stage.h"
#include "stages/stage_options.h"

namespace framemill {

// One image the models see: a still image, or one sampled frame of a video.
struct ModelFrame {
  size_t job;      // index into the batch
  int64_t index;   // video frame number; -1 for a still image
  cv::Mat bgr;     // 8-bit BGR, full resolution unless scaled below
  double time_s = 0;   // video: presentation time
  double scale = 1;    // source pixels per bgr pixel (ModelStageOptions::video_width)
};

// What a stage's analysis gives for one frame.
struct FrameResult {
  nlohmann::json result = nlohmann::json::object();
  std::vector<std::string> artifacts;
};

// A chunk of a claimed batch, decoded, with the stage's models borrowed for it.
struct ModelBatch {
  const std::vector<ModelFrame>& frames;
  const std::vector<ClaimedJob>& jobs;
  const std::vector<models::ModelRunner*>& runners;  // the stage's Models(), in order
};

class ModelStage : public Stage {
 public:
  const StageSpec& spec() const override { return spec_; }
  std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>& jobs,
                                const StageContext& ctx) final;
  // The models this stage runs, borrowed for each batch; a model that cannot be opened
  // fails every job of the batch with its reason (how to install it).
  std::vector<std::string> Models() const override = 0;
  bool ReadsPictures() const override { return true; }

 protected:
  ModelStage(std::string name, std::shared_ptr<models::ModelCache> cache,
             ModelStageOptions options);

  // Fills one result per frame and the device that ran them. An error fails every job
  // with a frame in the chunk (a model error is not one item's fault).
  virtual Status Analyse(const ModelBatch& batch, const StageContext& ctx,
                         std::vector<FrameResult>* results, std::string* device) = 0;
  // A video's result from its frames' results (which go under "frames" afterwards unless it
  // sets "frames" itself).
  virtual void Summarise(const std::vector<nlohmann::json>& frames, nlohmann::json* result) const = 0;

  // Runs `runner` on `images` on the device ctx.ladder picks (models::RunModel).
  Result<models::BatchOutputs> RunModel(models::ModelRunner& runner,
                                        const std::vector<cv::Mat>& images,
                                        const StageContext& ctx, std::string* device);
  // The same on the batch's frames as they are.
  Result<models::BatchOutputs> RunOnFrames(models::ModelRunner& runner, const ModelBatch& batch,
                                           const StageContext& ctx, std::string* device);

 private:
  std::vector<Outcome> RunChunk(const std::vector<ClaimedJob>& jobs,
                                const std::vector<models::ModelRunner*>& runners,
                                const StageContext& ctx);
  Outcome Assemble(size_t j, const ClaimedJob& job, const std::vector<ModelFrame>& frames,
                   std::vector<FrameResult>* results, nlohmann::json info,
                   const std::string& device) const;

  std::shared_ptr<models::ModelCache> cache_;
  ModelStageOptions options_;
  StageSpec spec_;
};

// A video's "model" and the mean of each frame's `key` as `mean_key`: how the pose and
// segment stages sum up a video.
void SummariseMean(const std::vector<nlohmann::json>& frames, const char* key,
                   const char* mean_key, nlohmann::json* result);

// The square, `side` pixels, centred on `center`, from `image`, with zero (black)
// padding where it leaves the image (as tf.image.cropAndResize extrapolates).
cv::Mat SquareCrop(const cv::Mat& image, cv::Point2f center, int side);
// The image padded (zeros, bottom and right) to a square, so a square-input model does
// not see it stretched. Coordinates in the padded image equal the original's.
cv::Mat PadToSquare(const cv::Mat& image);

// The host's work on each frame of a batch, `fn(i)` for i in [begin, end), on the worker's
// threads at once (a device waits for it meanwhile). Every frame runs; the first failure in
// frame order is returned, else OK.
Status ForEachFrame(size_t begin, size_t end, const std::function<Status(size_t)>& fn);

}  // namespace framemill
