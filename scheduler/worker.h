// One worker's loop: claim a batch, run each job's stage, record every outcome in
// one fenced transaction, repeat until nothing is outstanding (or forever). A
// heartbeat thread keeps the leases of in-flight jobs alive on its own connection.
// A Worker is used by one thread; the heartbeat thread only touches `heartbeat_store`.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/time_split.h"
#include "gpu/device_ledger.h"
#include "gpu/oom_ladder.h"
#include "scheduler/cost_model.h"
#include "scheduler/run_counters.h"
#include "scheduler/gpu_runtime.h"
#include "jobs/retry_policy.h"
#include "media/picture_cache.h"
#include "stages/registry.h"
#include "storage/job_store.h"

namespace framemill {

// How long a stage may take over a batch before the supervisor kills its worker as hung
// (run.batch_budget_ms + per job run.job_budget_ms + run.job_budget_per_mb_ms for each MB
// of the job's file). Generous on purpose: it catches a decoder that loops forever or a
// deadlocked model, not a slow one. 0 job_ms: no budget.
struct JobBudget {
  int64_t batch_ms = 60'000;   // once per batch: model loading, set-up
  int64_t job_ms = 60'000;
  int64_t per_mb_ms = 2'000;
  std::map<std::string, int64_t> extra_by_stage;  // e.g. fetch: its transfer timeout

  // The budget of one stage batch; 0 = unbounded.
  int64_t For(const std::vector<ClaimedJob>& group) const;
};

// Where a worker posts, for its supervisor, when the stage batch in hand is due to end
// (steady-clock ms, shared across processes); 0 = no batch in hand. Lives in memory the
// supervisor maps shared before it forks; lock-free atomics are safe across processes.
struct WorkerDeadline {
  std::atomic<int64_t> deadline_ms{0};
  std::atomic<int64_t> budget_ms{0};
};
int64_t SteadyNowMs();

struct WorkerOptions {
  std::string id;                   // unique per process start: host:pid:ms
  std::vector<std::string> stages;  // what this worker claims
  // Items a claim takes (run.batch), each with its claimable jobs of `stages`: one worker
  // runs an item's stages together and decodes its picture once (JobStore::ClaimItems).
  int batch = 16;
  // Stages whose jobs are claimed and run in batches of their own size (the fetch
  // stage's transfers overlap only within one batch); others use `batch`.
  std::map<std::string, int> batch_by_stage;
  int64_t lease_ms = 30'000;
  int64_t poll_ms = 500;
  // A claim keeps jobs while those kept are expected to take less than this (CostModel),
  // and gives the rest back at once; a batch running past it gives back what it has not
  // started when nothing is left to claim, so idle workers take it (run.claim_target_ms;
  // 0: claims by count alone). bench/README "Claims sized by their work" says why 3 s.
  int64_t claim_target_ms = 3'000;
  // After giving jobs back, a worker waits this long before it claims again, so that the
  // idle workers (they look every 25 ms) take them.
  int64_t give_back_pause_ms = 100;
  RetryPolicy retry;                // when a failed job runs again, or fails for good
  bool forever = false;             // keep polling when nothing is left
  // Without `forever`, a worker stops when every job left waits for a retry due more than
  // this far ahead (run.horizon_ms): a later run picks them up.
  int64_t horizon_ms = 600'000;
  JobBudget budget;
  WorkerDeadline* deadline = nullptr;  // borrowed; null: no supervisor watches
  // Device operations go through this ladder (borrowed); null: a CPU-only one.
  gpu::OomLadder* ladder = nullptr;
  // The operations the run's GPU policy puts on a device (StageContext::device_ops), this
  // worker seated there or not.
  std::set<std::string> device_ops;
  // The ledger of the ladder's device (borrowed; null: none): its peak is recorded.
  gpu::DeviceLedger* ledger = nullptr;
  // A worker on the CPU because the device had its workers at the start: its way onto the
  // device while the device is underused (borrowed; null: it stays on the CPU).
  DeviceSeat* seat = nullptr;
  // The claim's pictures, decoded once for all their stages: the cache's budget
  // (run.picture_cache_mb) and limits (media.max_image_pixels). A worker on a device also
  // decodes them ahead, in parallel, while the device runs (run.decode_threads threads).
  PictureCacheOptions pictures;  // its `threads` are decode_threads on a device, else 0
  int decode_threads = 2;
  // Claimed items' canonical paths as this machine sees them (FRAMEMILL_PATH_MAP).
  PathMap path_map;
  // An item file this machine cannot read fails with class file_missing before its stage
  // runs (off only for tests whose stages read no files).
  bool check_files = true;
  // The run's shared counters for its metrics endpoint (run --metrics); null: none.
  RunCounters* counters = nullptr;
};

struct WorkerStats {
  int64_t done = 0, failed = 0, retried = 0, skipped = 0, stale = 0, released = 0, batches = 0;
  int64_t trimmed = 0;     // jobs a claim gave back at once: past its cost target
  int64_t given_back = 0;  // unstarted jobs given back at the end of a run, for idle workers
  int64_t oom_events = 0, cpu_fallbacks = 0;
  // The claims' pictures (media/picture_cache.h): decodes, and reads served by one.
  int64_t pictures_decoded = 0, pictures_reused = 0;
};

class Worker {
 public:
  // Borrowed: store, heartbeat_store (a second connection, or null for none),
  // registry, clock and stop must outlive the worker. `stop` is set from a signal
  // handler or another thread: the worker then finishes the job in hand, records
  // what is done, releases the rest of its batch and returns Aborted.
  Worker(JobStore* store, JobStore* heartbeat_store, const StageRegistry* registry,
         const Clock* clock, WorkerOptions options, const std::atomic<bool>* stop);

  // OK when nothing is left to do; Aborted when stopped; other errors are the store's.
  Status Run();
  const WorkerStats& stats() const { return stats_; }

 private:
  Status Loop();  // Run's loop: claim, run, record, until nothing is left or stopped
  // A claim by count (run.batch, topped up to a stage's own batch), trimmed to the cost target.
  Result<std::vector<ClaimedJob>> ClaimBatch();
  Result<std::vector<ClaimedJob>> ClaimByCount();
  // Maps each claimed item's path to this machine's (path_map); an item file it cannot
  // read fails at once with class file_missing (`retry --failed --class file_missing`
  // once the storage is mounted), and leaves the batch.
  Status Localize(std::vector<ClaimedJob>* jobs);
  int BatchOf(const std::string& stage) const;
  Status RunBatch(std::vector<ClaimedJob> jobs);
  // Runs the batch's stages, a run of equal stages at a time, until done or stopped:
  // the finished prefix of `jobs`, each with its retry decision.
  std::vector<FinishedJob> RunStages(const std::vector<ClaimedJob>& jobs);
  // The one exception boundary between the worker and a stage (below).
  std::vector<Outcome> CallStage(Stage* stage, const std::vector<ClaimedJob>& group,
                                 const StageContext& ctx);
  FinishedJob Finish(const ClaimedJob& job, Outcome outcome);
  void PostDeadline(int64_t budget_ms);
  Status Record(const std::vector<FinishedJob>& finished);
  void RemoveStaleArtifacts(const std::vector<FinishedJob>& finished,
                            const std::vector<int64_t>& stale);
  // Records the device's out-of-memory events and CPU fallbacks since `before`, its peak, and
  // its busy time when due (or `busy_now`).
  void RecordGpuEvents(const gpu::LadderStats& before, bool busy_now = false);
  Status ReleaseRest(const std::vector<ClaimedJob>& jobs, size_t finished);
  void SleepFor(int64_t ms);
  // Keeps the claimed items whose jobs the cost target allows, whole, and gives the rest
  // back; at the `tail` (the claim found every due job) the longest first, within a quarter
  // of the target. A device worker then orders the kept jobs stage by stage (dependency
  // order), so that each stage runs its jobs as one device batch; a CPU worker item by item.
  Status TrimToTarget(std::vector<ClaimedJob>* jobs, bool tail);
  // A fresh cache for the claims' pictures, with decoding threads on a device; its counts
  // add to those of the cache before it.
  void NewPictureCache();
  // Starts decoding the claim's pictures (the image jobs of stages that read them) ahead.
  void PrefetchPictures(const std::vector<ClaimedJob>& jobs);
  // The stages to claim: all of this worker's, but on the CPU while the run has device
  // workers, not those a device worker would finish sooner (CostModel::StagesForTheDevice).
  std::vector<std::string> ClaimStages();
  // A worker with a seat joins the device when it was busy under the seat's
  // join_below_busy over its window (gpu.join_window_ms) and work is waiting (between batches).
  void MaybeJoinDevice();
  // From now on this worker runs its device operations on `runtime`'s device.
  void UseDevice(std::unique_ptr<GpuRuntime> runtime);
  // Whether a batch that began at `batch_start` (clock_) should give back its unstarted
  // jobs now: it has run past the cost target and nothing is left for others to claim.
  bool ShouldGiveBack(int64_t batch_start);
  // Stamps each job of a group its share of the group's time and of where it went
  // (`spent`, this thread's time split over the call), and learns from it.
  void Time(std::vector<FinishedJob>* finished, size_t from, int64_t start,
            const TimeTally& spent, const std::vector<ClaimedJob>& group);
  void RefreshCosts();

  JobStore* store_;
  JobStore* heartbeat_store_;
  const StageRegistry* registry_;
  const Clock* clock_;
  WorkerOptions options_;
  const std::atomic<bool>* stop_;
  WorkerStats stats_;
  std::mt19937_64 rng_;  // retry jitter
  std::unique_ptr<gpu::CpuLadder> own_ladder_;  // when options.ladder is null
  gpu::OomLadder* ladder_ = nullptr;
  int64_t recorded_peak_mb_ = -1;  // the device peak last written to the store
  int64_t busy_from_ms_ = -1;      // the device's busy time when this worker joined it
  int64_t busy_recorded_at_ = -1'000'000;  // steady ms the busy time was last written
  std::unique_ptr<PictureCache> pictures_;
  int64_t pictures_decoded_before_ = 0, pictures_reused_before_ = 0;  // by an earlier cache
  std::unique_ptr<GpuRuntime> joined_;  // the device taken through options_.seat
  int64_t seat_looked_at_ = -1;         // steady ms of the last look at the device
  int64_t seat_busy_ns_ = 0;            // its busy time then
  CostModel costs_;
  // What RefreshCosts read besides the times: the run's device workers, and the jobs
  // waiting for this worker's stages (a device's queue, for ClaimStages).
  int device_workers_ = 0;
  int64_t pending_ = 0;
  int64_t costs_loaded_at_ = -1;  // steady ms of the last RecentJobTimes read
};

}  // namespace framemill
