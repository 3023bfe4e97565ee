// A stage: one analysis applied to claimed jobs (or, dataset-level, to the whole store).
// Stages are constructed once per worker process and called from that worker's
// threads; RunBatch must be thread-safe (stages keep no per-call state in members).
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpu/oom_ladder.h"
#include "jobs/job.h"
#include "jobs/outcome.h"
#include "jobs/result_reader.h"
#include "jobs/stage_graph.h"
#include "media/picture_cache.h"

namespace framemill {

// What a worker lends its stages: the out-of-memory ladder, which owns the choice of
// device and batch size for every device operation. Owned by the worker.
struct StageContext {
  gpu::OomLadder* ladder = nullptr;  // null: everything on the CPU
  const std::atomic<bool>* stop = nullptr;  // set: finish what is in hand, start nothing new
  ResultReader* results = nullptr;  // done results, for dataset-level stages; null: none
  // The claim's pictures, each decoded once for all its stages (and ahead, on a device
  // worker); null: each stage decodes its own.
  PictureCache* pictures = nullptr;
  // The operations the run puts on a device (INPAINTING, ...), whether or not this worker has
  // a seat on it: a stage whose method depends on the device picks by this, so that every
  // worker of a run gives the same result (inpaint's auto). null: none.
  const std::set<std::string>* device_ops = nullptr;
  bool stopped() const { return stop != nullptr && stop->load(); }
};

// The full-size picture of an image job, from ctx.pictures when there is one (decoded
// once for all the item's stages), else decoded now. The picture may be shared: read it only.
Result<cv::Mat> ReadPicture(const StageContext& ctx, const ClaimedJob& job, const ImageLimits& limits);

class Stage {
 public:
  virtual ~Stage() = default;
  virtual const StageSpec& spec() const = 0;
  // The one entry point: analyses a claimed batch, device operations batched through
  // ctx.ladder. Returns an outcome for each of a prefix of `jobs`, in order: all of them
  // unless ctx.stop was set, in which case the worker gives the rest back. Bad input is
  // a failed outcome with the reason, never a throw or a crash: the worker records it
  // against its job and moves on.
  virtual std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>& jobs,
                                        const StageContext& ctx) = 0;
  // Whether it reads its image jobs' full-size pictures (ReadPicture): a worker then decodes
  // each claimed item's picture once for all such stages, ahead of them on a device worker.
  virtual bool ReadsPictures() const { return false; }
  // Whether jobs gain from running together here (a model's batch, overlapping transfers,
  // a device's batch). False: the worker hands the stage one job at a time, so each job's
  // own time is measured, and a batch can give back what it has not started.
  virtual bool RunsJobsTogether(const StageContext& /*ctx*/) const { return true; }
  // One job alone, on the CPU (tests and tools).
  Outcome Run(const ClaimedJob& job);
  // The models it runs (as `framemill models list` names them): `run` checks they are
  // installed before it claims anything, rather than failing every job.
  virtual std::vector<std::string> Models() const { return {}; }
  // Settings that cannot work whatever the item (a mask folder that is not there):
  // InvalidArgument naming the key, checked by `run` before it claims anything.
  virtual Status CheckSettings() const { return Status::OK(); }
};

// Skipped with the reason when `spec` does not take `job`'s kind ("motion applies to videos
// only", "... to images only", "... to images and videos"); nullopt when it does. The store
// never makes such a job claimable (it is skipped when enqueued, or when its download
// turns out to be of that kind), so this answers callers that hand a stage any job (tests,
// tools). The stage bases check it, once each: PerJobStage, ModelStage.
std::optional<Outcome> SkipIfNotApplicable(const StageSpec& spec, const ClaimedJob& job);

// The decode loop of the stages that take a batch's media at once (ModelStage, lighting):
// `decode(job, j)` reads job j's media; a job the spec does not take gets its skip, one whose
// decode fails (or throws: jobs/failure.h) its failure in (*out)[j]. True for each job decoded.
std::vector<bool> DecodeEach(const StageSpec& spec, const std::vector<ClaimedJob>& jobs,
                             const std::function<Status(const ClaimedJob&, size_t)>& decode,
                             std::vector<Outcome>* out);

// v to `decimals` places, for results (dividing by a power of ten keeps 739.3 from
// printing as 739.3000000000001).
double Rounded(double v, int decimals);

}  // namespace framemill
