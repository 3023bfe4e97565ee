// The stages this build really runs, and the DAG they form. Only working stages
// are registered: `--stages` naming anything else is a usage error.
// Built once per process; read-only afterwards.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fetch/fetcher.h"
#include "jobs/stage_graph.h"
#include "stages/categorize_stage.h"
#include "stages/faces_stage.h"
#include "stages/lighting_stage.h"
#include "stages/pose_stage.h"
#include "stages/segment_stage.h"
#include "stages/stage.h"

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

// Every stage's settings; the CLI fills them from the configuration.
struct StageOptions {
  std::string out_dir = "./framemill-out";        // artifacts (`out`)
  std::string models_dir = "./framemill-models";  // installed models (`models`)
  fetch::FetchOptions fetch;  // its out_dir is out_dir
  LightingOptions lighting;
  ModelStageOptions model_frames;
  CategorizeOptions categorize;
  FacesOptions faces;
  PoseOptions pose;
  SegmentOptions segment;

  bool operator==(const StageOptions&) const = default;
};

// Every stage of this build. The neural stages share one model cache.
std::unique_ptr<StageRegistry> MakeDefaultRegistry(const StageOptions& options);

}  // namespace framemill
