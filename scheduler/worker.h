// One worker's loop: claim a batch, run each job's stage, record every outcome in
// one fenced transaction, repeat until nothing is outstanding (or forever). A
// heartbeat thread keeps the leases of in-flight jobs alive on its own connection.
// A Worker is used by one thread; the heartbeat thread only touches `heartbeat_store`.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/oom_ladder.h"
#include "stages/registry.h"
#include "storage/clock.h"
#include "storage/job_store.h"

namespace framemill {

struct WorkerOptions {
  std::string id;                   // unique per process start: host:pid:ms
  std::vector<std::string> stages;  // what this worker claims
  int batch = 16;
  // Stages whose jobs are claimed and run in batches of their own size (the fetch
  // stage's transfers overlap only within one batch); others use `batch`.
  std::map<std::string, int> batch_by_stage;
  int64_t lease_ms = 30'000;
  int64_t poll_ms = 500;
  bool forever = false;             // keep polling when nothing is left
  // Device operations go through this ladder (borrowed); null: a CPU-only one.
  gpu::OomLadder* ladder = nullptr;
};

struct WorkerStats {
  int64_t done = 0, failed = 0, retried = 0, skipped = 0, stale = 0, released = 0, batches = 0;
  int64_t oom_events = 0, cpu_fallbacks = 0;
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
  Result<std::vector<ClaimedJob>> ClaimBatch();
  int BatchOf(const std::string& stage) const;
  Status RunBatch(std::vector<ClaimedJob> jobs);
  void SleepFor(int64_t ms);

  JobStore* store_;
  JobStore* heartbeat_store_;
  const StageRegistry* registry_;
  const Clock* clock_;
  WorkerOptions options_;
  const std::atomic<bool>* stop_;
  WorkerStats stats_;
  gpu::OomLadder* ladder_ = nullptr;
  std::unique_ptr<gpu::ComputeBackend> own_cpu_;
  std::unique_ptr<gpu::BatchTuner> own_tuner_;
  std::unique_ptr<gpu::OomLadder> own_ladder_;
};

}  // namespace framemill
