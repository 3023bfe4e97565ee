// `framemill run`: forks the worker processes, shows progress, replaces workers
// that crash, and turns SIGINT/SIGTERM into a graceful stop (a second one stops at
// once). Runs in the main thread of the CLI process.
#pragma once

#include <string>
#include <vector>

#include "base/exit_code.h"
#include "gpu/policy.h"
#include "scheduler/worker.h"
#include "stages/registry.h"
#include "storage/job_store.h"

namespace framemill {

// Everything a run needs; the CLI fills it from the configuration.
struct RunOptions {
  std::string db = "./framemill.db";  // the job store (OpenJobStore)
  StoreOptions store{.connect_wait_ms = 60'000};
  int workers = 1;        // worker processes
  int max_respawns = 100;  // crashed workers replaced per run before giving up
  // After SIGINT/SIGTERM the workers finish the stage batch in hand and give their other
  // claimed jobs back; a worker still busy after this long is killed and its jobs go back
  // with no attempt spent (a stop is nobody's failure). 3 s: with the store's commit and the
  // supervisor's own exit a run ends within 5 s (issue 40, measured in the stop test).
  int64_t stop_grace_ms = 3'000;
  // run.metrics / FRAMEMILL_METRICS / --metrics: HOST:PORT (or :PORT) where the run serves
  // Prometheus's text at /metrics (scheduler/metrics_server.h); empty: none.
  std::string metrics;
  // Each worker's options: stages, batches, leases, retry policy, forever. `id` and
  // `ladder` are set per worker process.
  WorkerOptions worker;
  gpu::GpuOptions gpu;  // each worker makes its own devices from these, after fork
};

// The rows of db, workers and the run.* settings the workers consume (batch, leases,
// retries, budgets), bound to `o` (scheduler/run_rows.cc). The GPU's are AddGpuRows'.
void AddRunRows(RunOptions* o, OptionRows* rows);

// Works until nothing claimable is left (or forever). Returns the contract's exit code:
// kOk all done, kSomeFailed some jobs failed permanently, kInterrupted on a graceful
// stop, kStoreFailed when the store failed or workers stopped with work outstanding.
ExitCode RunWorkers(const RunOptions& options, const StageRegistry& registry);

}  // namespace framemill
