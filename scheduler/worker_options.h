// What a worker is told: its stages, claim sizes, leases, budgets and the devices and
// caches it borrows (WorkerOptions), with the per-batch time budget the supervisor enforces;
// and what it counts (WorkerStats).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gpu/device_ledger.h"
#include "gpu/oom_ladder.h"
#include "jobs/retry_policy.h"
#include "media/picture_cache.h"
#include "scheduler/gpu_runtime.h"
#include "scheduler/run_counters.h"
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

}  // namespace framemill
