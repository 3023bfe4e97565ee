#include "stages/registry.h"

#include "models/model_cache.h"
#include "stages/audio_sync_stage.h"
#include "stages/categorize_stage.h"
#include "stages/face_clusters_stage.h"
#include "stages/faces_stage.h"
#include "stages/fetch_stage.h"
#include "stages/inpaint_stage.h"
#include "stages/lighting_stage.h"
#include "stages/motion_stage.h"
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

std::unique_ptr<StageRegistry> MakeDefaultRegistry(const StageOptions& o) {
  auto r = std::make_unique<StageRegistry>();
  std::string error;
  // URL items only (the store gives it no job on a local file); every media stage of a
  // URL item waits on it.
  fetch::FetchOptions fetch = o.fetch;
  fetch.out_dir = o.out_dir;
  r->Add(std::make_unique<FetchStage>(fetch), &error);
  r->Add(std::make_unique<LightingStage>(o.lighting), &error);
  r->Add(std::make_unique<MotionStage>(o.motion, o.out_dir), &error);
  // One cache for the process: stages that share a model share its opened instances.
  // Nothing is opened until a stage first runs.
  auto cache = std::make_shared<models::ModelCache>(o.models_dir);
  r->Add(std::make_unique<CategorizeStage>(cache, o.model_frames, o.categorize), &error);
  r->Add(std::make_unique<FacesStage>(cache, o.model_frames, o.faces), &error);
  r->Add(std::make_unique<FaceClustersStage>(o.face_clusters), &error);
  r->Add(std::make_unique<PoseStage>(cache, o.model_frames, o.pose), &error);
  r->Add(std::make_unique<SegmentStage>(cache, o.model_frames, o.segment, o.out_dir), &error);
  r->Add(std::make_unique<InpaintStage>(o.inpaint, o.out_dir), &error);
  r->Add(std::make_unique<AudioSyncStage>(cache, o.audio_sync, o.out_dir), &error);
  return r;
}

}  // namespace framemill
