#include "stages/registry.h"

#include "stages/lighting_stage.h"

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
  r->Add(std::make_unique<LightingStage>(config.media), &error);
  return r;
}

}  // namespace framemill
