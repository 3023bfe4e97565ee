#include "stages/registry.h"

#include "models/model_cache.h"
#include "stages/audio_sync_stage.h"
#include "stages/categorize_stage.h"
#include "stages/clips_stage.h"
#include "stages/dedup_stage.h"
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

Status AddAll(StageRegistry* registry, std::vector<std::unique_ptr<Stage>> stages) {
  for (auto& stage : stages) {
    const std::string name = stage->spec().name;
    std::string error;
    if (!registry->Add(std::move(stage), &error))
      return Status::Internal("stage " + name + " cannot be registered: " + error);
  }
  return Status::OK();
}

Result<std::unique_ptr<StageRegistry>> MakeDefaultRegistry(const StageOptions& o) {
  // URL items only (the store gives it no job on a local file); every media stage of a
  // URL item waits on it.
  fetch::FetchOptions fetch = o.fetch;
  fetch.out_dir = o.out_dir;
  // One cache for the process: stages that share a model share its opened instances.
  // Nothing is opened until a stage first runs.
  auto cache = std::make_shared<models::ModelCache>(
      o.models_dir, [precision = o.cpu_precision](const models::ModelManifest& m, gpu::ComputeBackend* device) {
        return models::OpenRunner(m, device, precision);
      });
  std::vector<std::unique_ptr<Stage>> stages;
  stages.push_back(std::make_unique<FetchStage>(fetch));
  stages.push_back(std::make_unique<LightingStage>(o.lighting));
  stages.push_back(std::make_unique<MotionStage>(o.motion, o.out_dir));
  stages.push_back(std::make_unique<ClipsStage>(o.clips, o.out_dir));
  stages.push_back(std::make_unique<CategorizeStage>(cache, o.model_frames, o.categorize));
  stages.push_back(std::make_unique<DedupStage>(o.dedup));
  stages.push_back(std::make_unique<FacesStage>(cache, o.model_frames, o.faces));
  stages.push_back(std::make_unique<FaceClustersStage>(o.face_clusters));
  stages.push_back(std::make_unique<PoseStage>(cache, o.model_frames, o.pose));
  stages.push_back(std::make_unique<SegmentStage>(cache, o.model_frames, o.segment, o.out_dir));
  stages.push_back(std::make_unique<InpaintStage>(o.inpaint, o.out_dir));
  stages.push_back(std::make_unique<AudioSyncStage>(cache, o.audio_sync, o.out_dir));
  auto r = std::make_unique<StageRegistry>();
  FM_RETURN_IF_ERROR(AddAll(r.get(), std::move(stages)));
  return r;
}

}  // namespace framemill
