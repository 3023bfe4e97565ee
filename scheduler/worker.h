// One worker's loop: claim a batch, run each job's stage, record every outcome in
// one fenced transaction, repeat until nothing is outstanding (or forever). A
// heartbeat thread keeps the leases of in-flight jobs alive on its own connection.
// A Worker is used by one thread; the heartbeat thread only touches `heartbeat_store`.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "base/clock.h"
#include "base/time_split.h"
#include "media/picture_cache.h"
#include "scheduler/claim_planner.h"
#include "scheduler/worker_device.h"
#include "scheduler/worker_options.h"
#include "stages/registry.h"
#include "storage/job_store.h"

namespace framemill {

class Worker {
 public:
  // Borrowed: store, heartbeat_store (a second connection, or null for none),
  // registry, clock and stop must outlive the worker. `stop` is set from a signal
  // handler or another thread: the worker then finishes the job in hand, records
  // what is done, releases the rest of its batch and returns Aborted.
  Worker(JobStore* store, JobStore* heartbeat_store, const StageRegistry* registry,
         const Clock* clock, WorkerOptions options, const std::atomic<bool>* stop);
  Worker(const Worker&) = delete;  // its planner and device point at its options
  Worker& operator=(const Worker&) = delete;

  // OK when nothing is left to do; Aborted when stopped; other errors are the store's.
  Status Run();
  const WorkerStats& stats() const { return stats_; }

 private:
  // docs/ARCHITECTURE.md's loop: claim (ClaimPlanner), run (RunBatch -> RunStages ->
  // CallStage), decide (Finish), record (Record), until nothing is left or stopped.
  Status Loop();
  // Nothing was claimed: OK to end the run, or how long to wait before looking again.
  Result<std::optional<int64_t>> NothingClaimed();
  // Maps each claimed item's path to this machine's (path_map); an item file it cannot
  // read fails at once with class file_missing (`retry --failed --class file_missing`
  // once the storage is mounted), and leaves the batch.
  Status Localize(std::vector<ClaimedJob>* jobs);
  Status RunBatch(std::vector<ClaimedJob> jobs);
  // Runs the batch's stages, a run of equal stages at a time, until done or stopped:
  // the finished prefix of `jobs`, each with its retry decision.
  std::vector<FinishedJob> RunStages(const std::vector<ClaimedJob>& jobs);
  // Runs one group of equal stages; appends what finished to *finished. False when it
  // stopped inside the group.
  bool RunGroup(const std::vector<ClaimedJob>& group, const StageContext& ctx,
                std::vector<FinishedJob>* finished);
  // The one exception boundary between the worker and a stage (below).
  std::vector<Outcome> CallStage(Stage* stage, const std::vector<ClaimedJob>& group,
                                 const StageContext& ctx);
  FinishedJob Finish(const ClaimedJob& job, Outcome outcome);
  void PostDeadline(int64_t budget_ms);
  Status Record(const std::vector<FinishedJob>& finished);
  void RemoveStaleArtifacts(const std::vector<FinishedJob>& finished,
                            const std::vector<int64_t>& stale);
  Status ReleaseRest(const std::vector<ClaimedJob>& jobs, size_t finished);
  void SleepFor(int64_t ms);
  // A fresh cache for the claims' pictures, with decoding threads on a device; its counts
  // add to those of the cache before it.
  void NewPictureCache();
  // Starts decoding the claim's pictures (the image jobs of stages that read them) ahead.
  void PrefetchPictures(const std::vector<ClaimedJob>& jobs);
  // Stamps each job of a group its share of the group's time and of where it went
  // (`spent`, this thread's time split over the call), and learns from it.
  void Time(std::vector<FinishedJob>* finished, size_t from, int64_t start,
            const TimeTally& spent, const std::vector<ClaimedJob>& group);

  JobStore* store_;
  JobStore* heartbeat_store_;
  const StageRegistry* registry_;
  const Clock* clock_;
  WorkerOptions options_;
  const std::atomic<bool>* stop_;
  WorkerStats stats_;
  std::mt19937_64 rng_;  // retry jitter
  WorkerDevice device_;
  ClaimPlanner planner_;
  std::unique_ptr<PictureCache> pictures_;
  int64_t pictures_decoded_before_ = 0, pictures_reused_before_ = 0;  // by an earlier cache
};

}  // namespace framemill
