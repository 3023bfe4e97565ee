#include "stages/registry.h"

#include "stages/categorize_stage.h"
#include "stages/faces_stage.h"
#include "stages/fetch_stage.h"
#include "stages/lighting_stage.h"
#include "stages/model_pool.h"
#include "stages/pose_stage.h"
#include "stages/segment_stage.h"

namespace framemill {

bool StageRegistry::Add(std::unique_ptr<Stage> stage, std::string* error) {
  if (!graph_.Add(stage->spec(), error)) return false;
  stages_.push_back(std::move(stage));
  return true;
}

Stage* StageRegistry::Find(const std::string& name) const {
  for (const auto& s : stages_)
    if (s->spec().name == name) return s.get();
  return nullptr;
}

std::unique_ptr<StageRegistry> MakeDefaultRegistry(const Config& config) {
  auto r = std::make_unique<StageRegistry>();
  std::string error;
  // URL items only (the store gives it no job on a local file); every media stage of a
  // URL item waits on it.
  r->Add(std::make_unique<FetchStage>(config.fetch, config.out), &error);
  r->Add(std::make_unique<LightingStage>(config.media), &error);
  // One pool for the process: stages that share a model share its opened instances.
  // Nothing is opened until a stage first runs.
  auto pool = std::make_shared<ModelPool>(config.models);
  r->Add(std::make_unique<CategorizeStage>(pool, config.media, config.categorize), &error);
  r->Add(std::make_unique<FacesStage>(pool, config.media, config.faces), &error);
  r->Add(std::make_unique<PoseStage>(pool, config.media, config.pose), &error);
  r->Add(std::make_unique<SegmentStage>(pool, config.media, config.segment, config.out), &error);
  return r;
}

}  // namespace framemill
