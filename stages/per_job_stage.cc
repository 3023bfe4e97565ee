#include "stages/per_job_stage.h"

#include "jobs/failure.h"
#include "stages/artifact.h"

namespace framemill {

StageSpec PerJobStage::MakeSpec(std::string name, Takes takes, std::vector<std::string> deps) {
  StageSpec spec;
  spec.name = std::move(name);
  spec.images = takes != Takes::kVideos;
  spec.videos = takes != Takes::kImages;
  spec.deps = std::move(deps);
  return spec;
}

PerJobStage::PerJobStage(StageSpec spec) : spec_(std::move(spec)) {}

PerJobStage::PerJobStage(StageSpec spec, const std::string& out_dir)
    : spec_(std::move(spec)), artifact_dir_(ArtifactDir(out_dir, spec_.name)) {}

std::vector<Outcome> PerJobStage::RunBatch(const std::vector<ClaimedJob>& jobs,
                                           const StageContext& ctx) {
  std::vector<Outcome> out;
  for (const ClaimedJob& job : jobs) {
    if (ctx.stopped()) break;
    if (std::optional<Outcome> skip = SkipIfNotApplicable(spec_, job)) {
      out.push_back(std::move(*skip));
      continue;
    }
    try {
      out.push_back(RunOne(job, ctx));
    } catch (...) {
      out.push_back(FailedByThrow(spec_.name));
    }
  }
  return out;
}

Outcome PerJobStage::DoneWithArtifact(const ClaimedJob& job, const std::string& ext,
                                      std::string_view bytes, const char* key,
                                      nlohmann::json result, std::string device) const {
  if (!artifact_dir_)
    return Outcome::Failed(Status::Internal(spec_.name + " was made without an artifact directory"));
  const std::string path = ArtifactPath(*artifact_dir_, job, -1, ext);
  if (Status s = WriteArtifact(path, bytes); !s.ok()) return Outcome::Failed(s);
  result[key] = path;
  Outcome o = Outcome::Done(std::move(result), std::move(device));
  o.artifacts.push_back(path);
  return o;
}

}  // namespace framemill
