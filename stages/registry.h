// The stages this build really runs, and the DAG they form. Only working stages
// are registered: `--stages` naming anything else is a usage error.
// Built once per process; read-only afterwards.
#pragma once

#include <memory>
#include <string>
#include <vector>

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

// Every stage of this build. The neural stages share one model cache.
std::unique_ptr<StageRegistry> MakeDefaultRegistry(const StageOptions& options);

}  // namespace framemill
