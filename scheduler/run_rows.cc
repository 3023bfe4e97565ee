// The run's settings: db, workers and run.* bound to their fields of RunOptions (the
// supervisor's) and WorkerOptions (each worker's).
#include "scheduler/supervisor.h"

namespace framemill {

void AddRunRows(RunOptions* o, OptionRows* rows) {
  rows->push_back(TextRow("db", "FRAMEMILL_DB", "--db", &o->db));
  rows->push_back(IntRow("workers", "FRAMEMILL_WORKERS", "--workers", {&o->workers}, 1, 1024));
  WorkerOptions& w = o->worker;
  rows->push_back(IntRow("run.batch", "FRAMEMILL_BATCH", "--batch", {&w.batch}, 1, 4096));
  rows->push_back(IntRow("run.lease_ms", "FRAMEMILL_LEASE_MS", "", {&w.lease_ms}, 200,
                         86'400'000));
  rows->push_back(IntRow("run.poll_ms", "", "", {&w.poll_ms}, 10, 60'000));
  rows->push_back(IntRow("run.claim_target_ms", "FRAMEMILL_CLAIM_TARGET_MS", "", {&w.claim_target_ms}, 0,
                         86'400'000));
  rows->push_back(IntRow("run.retry_base_ms", "FRAMEMILL_RETRY_BASE_MS", "",
                         {&w.retry.base_delay_ms}, 0, 3'600'000));
  rows->push_back(IntRow("run.retry_max_ms", "", "", {&w.retry.max_delay_ms}, 0, 86'400'000));
  rows->push_back(IntRow("run.max_respawns", "", "", {&o->max_respawns}, 0, 1'000'000));
  OptionRow metrics = OptionalTextRow("run.metrics", "FRAMEMILL_METRICS", &o->metrics);
  metrics.flag = "--metrics";
  rows->push_back(std::move(metrics));
  rows->push_back(IntRow("run.stop_grace_ms", "FRAMEMILL_STOP_GRACE_MS", "", {&o->stop_grace_ms}, 0,
                         3'600'000));
  rows->push_back(IntRow("run.horizon_ms", "FRAMEMILL_HORIZON_MS", "", {&w.horizon_ms}, 0,
                         365LL * 86'400'000));
  rows->push_back(IntRow("run.batch_budget_ms", "FRAMEMILL_BATCH_BUDGET_MS", "",
                         {&w.budget.batch_ms}, 0, 86'400'000));
  rows->push_back(IntRow("run.job_budget_ms", "FRAMEMILL_JOB_BUDGET_MS", "", {&w.budget.job_ms},
                         0, 86'400'000));
  rows->push_back(IntRow("run.job_budget_per_mb_ms", "FRAMEMILL_JOB_BUDGET_PER_MB_MS", "",
                         {&w.budget.per_mb_ms}, 0, 3'600'000));
  rows->push_back(IntRow("run.decode_threads", "FRAMEMILL_DECODE_THREADS", "", {&w.decode_threads},
                         0, 256));
  rows->push_back(IntRow("run.picture_cache_mb", "FRAMEMILL_PICTURE_CACHE_MB", "",
                         {&w.pictures.budget_mb}, 0, 1 << 20));
}

}  // namespace framemill
