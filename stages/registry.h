// The stages this build really runs, and the DAG they form. Only working stages
// are registered: `--stages` naming anything else is a usage error.
// Built once per process; read-only afterwards.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "jobs/stage_graph.h"
#include "stages/stage.h"
#include "stages/stage_options.h"

namespace framemill {

class StageRegistry {
 public:
  // Adds `stage` to the graph; false (with error) on a bad name or dependency.
  bool Add(std::unique_ptr<Stage> stage, std::string* error);
  Stage* Find(const std::string& name) const;
  const StageGraph& graph() const { return graph_; }

 private:
  StageGraph graph_;
  std::vector<std::unique_ptr<Stage>> stages_;
};

// Adds each stage in order (a dependency before the stages that need it). The first that
// cannot be added stops it: an error naming that stage and why.
Status AddAll(StageRegistry* registry, std::vector<std::unique_ptr<Stage>> stages);

// Every stage of this build. The neural stages share one model cache. A stage that cannot
// be registered is a broken build: start-up stops with the reason (it used to be left out
// silently, so `--stages` then called it unknown).
Result<std::unique_ptr<StageRegistry>> MakeDefaultRegistry(const StageOptions& options);

}  // namespace framemill
