// What the neural stages (categorize, faces, pose, segment) share: a per-process pool
// of opened models, the runner interface a device implementation plugs into, and the
// decode-run-assemble loop over a claimed batch.
// ModelPool is thread-safe; a ModelRunner is used by one thread at a time (a Lease
// hands it to exactly one borrower). The free functions are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include "configs/config.h"
#include "models/dnn_model.h"
#include "models/manifest.h"
#include "models/model_store.h"
#include "stages/stage.h"
#include "storage/status.h"

namespace framemill {

// Runs one model on a batch of images. The CPU one wraps models::DnnModel; a device
// engine slots in as another implementation (ModelPool's factory).
class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const models::ModelManifest& manifest() const = 0;
  virtual std::string device() const = 0;  // "cpu", "cuda:0": goes into StageOutput.device
  // result[b][i] = manifest().outputs[i] of image b (8-bit BGR, any size).
  virtual Result<std::vector<std::vector<models::OutputTensor>>> Run(
      const std::vector<cv::Mat>& bgr) = 0;
  // One forward for a whole batch (false: the runner goes image by image anyway).
  virtual bool batchable() const { return manifest().batchable; }
};

using RunnerFactory =
    std::function<Result<std::unique_ptr<ModelRunner>>(const models::ModelManifest&)>;
// cv::dnn on the CPU.
Result<std::unique_ptr<ModelRunner>> OpenCpuRunner(const models::ModelManifest& manifest);

// Opened models of one process, by name. Opening is lazy (constructing a pool reads
// nothing), so commands that never run a model pay nothing. A borrower gets a runner of
// its own for as long as it holds the Lease; runners are reused, never shared. A model
// that cannot be opened (not installed, damaged) yields the same status on every borrow
// without touching the disk again until `recheck` has passed (so `framemill models
// fetch` run beside a --forever worker is picked up).
class ModelPool {
 public:
  class Lease {
   public:
    Lease(Lease&& o) noexcept : pool_(o.pool_), name_(std::move(o.name_)), runner_(std::move(o.runner_)) {
      o.pool_ = nullptr;
    }
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease();
    ModelRunner* operator->() const { return runner_.get(); }
    ModelRunner& operator*() const { return *runner_; }

   private:
    friend class ModelPool;
    Lease(ModelPool* pool, std::string name, std::unique_ptr<ModelRunner> r)
        : pool_(pool), name_(std::move(name)), runner_(std::move(r)) {}
    ModelPool* pool_;
    std::string name_;
    std::unique_ptr<ModelRunner> runner_;
  };

  explicit ModelPool(std::string models_dir, RunnerFactory factory = OpenCpuRunner,
                     std::chrono::milliseconds recheck = std::chrono::seconds(10));
  ModelPool(const ModelPool&) = delete;
  ModelPool& operator=(const ModelPool&) = delete;

  // A runner of `name`, or why there is none: the ModelStore's status (NotFound names
  // `framemill models fetch` and FRAMEMILL_MODELS), or the runner's Corruption.
  Result<Lease> Borrow(const std::string& name);

  const std::string& dir() const { return store_.dir(); }
  // Runners ever created for `name` (tests: reuse and per-borrower instances).
  int Created(const std::string& name) const;

 private:
  struct Entry {
    bool resolved = false;
    Status status;  // why the model cannot be used, when not ok
    std::chrono::steady_clock::time_point failed_at;
    models::ModelManifest manifest;
    std::vector<std::unique_ptr<ModelRunner>> idle;
    int created = 0;
  };
  void Return(const std::string& name, std::unique_ptr<ModelRunner> r);

  models::ModelStore store_;
  RunnerFactory factory_;
  std::chrono::milliseconds recheck_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

// ---- the loop every neural stage runs

// One image the models see: a still image, or one sampled frame of a video.
struct ModelFrame {
  size_t job;      // index into the batch
  int64_t index;   // video frame number; -1 for a still image
  cv::Mat bgr;     // 8-bit BGR, full resolution
};

// What a stage's analysis gives for one frame.
struct FrameResult {
  nlohmann::json result = nlohmann::json::object();
  std::vector<std::string> artifacts;
};

// Analyses every frame of a chunk: fills results (one per frame) and the device that
// ran them. An error fails every job with a frame in the chunk (a model error is not
// one item's fault).
using AnalyseFn = std::function<Status(const std::vector<ModelFrame>& frames,
                                       const std::vector<ClaimedJob>& jobs,
                                       std::vector<FrameResult>* results, std::string* device)>;
// A video's result from its frames' results (already under "frames").
using SummariseFn = std::function<void(const std::vector<nlohmann::json>& frames,
                                       nlohmann::json* result)>;

struct ModelStageOptions {
  int video_frames = 4;
  // All of the batch at once (the model batches); otherwise job by job, which checks
  // ctx.stop between jobs and keeps one decoded item in memory at a time.
  bool together = true;
};

// Decodes each job (an image, or `video_frames` sampled frames of a video), runs
// `analyse`, and assembles per-job outputs: an image's result is its frame's; a video's
// lists per-frame results under "frames" (each with its "frame" number) and what
// `summarise` adds. Each result gains "media". Undecodable items fail on their own
// (Corruption, TooLarge... as media.h says), kinds other than image/video are skipped.
// Returns outputs for a prefix of jobs: all unless ctx.stop was set.
std::vector<StageOutput> RunModelStage(const std::vector<ClaimedJob>& jobs,
                                       const StageContext& ctx, const MediaConfig& media,
                                       const ModelStageOptions& options, const AnalyseFn& analyse,
                                       const SummariseFn& summarise);

// Every job failed with `s` (a model that cannot be opened), up to ctx.stop.
std::vector<StageOutput> FailAll(const std::vector<ClaimedJob>& jobs, const StageContext& ctx,
                                 const Status& s);

// The square, `side` pixels, centred on `center`, from `image`, with zero (black)
// padding where it leaves the image (as tf.image.cropAndResize extrapolates).
cv::Mat SquareCrop(const cv::Mat& image, cv::Point2f center, int side);
// The image padded (zeros, bottom and right) to a square, so a square-input model does
// not see it stretched. Coordinates in the padded image equal the original's.
cv::Mat PadToSquare(const cv::Mat& image);

}  // namespace framemill
