// How much a worker claims (docs/ARCHITECTURE.md, "Claims sized by their work"): a claim by
// count (run.batch, a stage's own batch topped up), kept while the jobs kept are expected to
// take less than the cost target (CostModel, learnt from every worker's recent job times),
// the rest given back at once; a worker on the CPU leaves a device's stages to the device
// workers when they would finish them sooner; a batch past its target gives back what it has
// not started when nothing else is left to claim.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "scheduler/cost_model.h"
#include "scheduler/worker_options.h"
#include "stages/registry.h"
#include "storage/job_store.h"

namespace framemill {

class ClaimPlanner {
 public:
  // Borrowed: store, registry and options (the worker's) must outlive the planner.
  ClaimPlanner(JobStore* store, const StageRegistry* registry, const WorkerOptions* options);

  // Claims the next batch for a worker on a device or on the CPU, trimmed to the cost target
  // and ordered for running (TrimToTarget). Jobs given back at once add to *trimmed.
  Result<std::vector<ClaimedJob>> Claim(bool on_device, int64_t* trimmed);
  // Whether a batch that has run `elapsed_ms` should give back its unstarted jobs now: it is
  // past the cost target and nothing is left for others to claim.
  bool ShouldGiveBack(int64_t elapsed_ms);
  // How many jobs of `stage` one batch takes (its own batch, else run.batch).
  int BatchOf(const std::string& stage) const;
  // Learns from one finished job's time.
  void Observe(const JobTime& time) { costs_.Observe(time); }

 private:
  Result<std::vector<ClaimedJob>> ClaimByCount(bool on_device);
  // The stages to claim: all of this worker's, but on the CPU while the run has device
  // workers, not those a device worker would finish sooner (CostModel::StagesForTheDevice).
  std::vector<std::string> ClaimStages(bool on_device);
  // Keeps the claimed items whose jobs the cost target allows, whole, and gives the rest
  // back; at the `tail` (the claim found every due job) the longest first, within a quarter
  // of the target. Then orders the kept jobs (OrderForRunning).
  Status TrimToTarget(std::vector<ClaimedJob>* jobs, bool tail, bool on_device, int64_t* trimmed);
  // A device worker runs the kept jobs stage by stage (dependency order), so that each stage
  // runs its jobs as one device batch; a CPU worker item by item.
  void OrderForRunning(std::vector<ClaimedJob>* jobs, bool on_device) const;
  // Reads every worker's recent job times (every few seconds), and for a CPU worker the
  // run's device workers and the jobs waiting.
  void RefreshCosts(bool on_device);

  JobStore* store_;
  const StageRegistry* registry_;
  const WorkerOptions* options_;
  CostModel costs_;
  int device_workers_ = 0;        // the run's device workers (RefreshCosts)
  int64_t pending_ = 0;           // the jobs waiting for this worker's stages
  int64_t costs_loaded_at_ = -1;  // steady ms of the last RecentJobTimes read
};

}  // namespace framemill
