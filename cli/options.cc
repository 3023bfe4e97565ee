#include "cli/options.h"

#include "jobs/stage_names.h"

namespace framemill {

RunOptions ToRunOptions(const Settings& s, const std::vector<std::string>& stages, bool forever) {
  RunOptions o = s.run;
  WorkerOptions& w = o.worker;
  w.stages = stages;
  w.forever = forever;
  w.path_map = s.paths;
  // The claim's pictures are decoded with the limits every stage decodes with.
  w.pictures.limits = s.stage.model_frames.limits;
  // The fetch stage's transfers overlap only within one batch: it has a batch of its own,
  // and each transfer is bounded by the fetch timeout.
  w.batch_by_stage[stage_names::kFetch] = s.fetch_batch;
  w.budget.extra_by_stage[stage_names::kFetch] = s.stage.fetch.total_timeout_ms;
  w.budget.extra_by_stage[stage_names::kFaceClusters] = s.stage.face_clusters.budget_ms;
  return o;
}

EnqueueOptions ToEnqueueOptions(const Settings& s, const std::vector<std::string>& stages) {
  EnqueueOptions o = s.enqueue;
  o.stages = stages;
  o.path_map = s.paths;
  return o;
}

}  // namespace framemill
