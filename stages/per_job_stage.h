// The base of a stage that analyses its claimed jobs one at a time (motion, audio_sync,
// inpaint, lighting). It owns what those stages used to write each for themselves: the
// spec, the artifact directory, and the loop. For each job, until ctx says stop:
//  - a job whose kind the spec does not take is skipped with the reason
//    (SkipIfNotApplicable: "motion applies to videos only");
//  - any other goes to RunOne, the one thing a subclass writes; an exception out of it
//    (OpenCV throws on input it cannot handle) fails that job alone as Corruption, prefixed
//    with the stage's name, and the loop goes on.
// docs/ADDING_A_STAGE.md is the recipe for a new stage on it.
//
// Not on this base, on purpose (each a Stage of its own): ModelStage (categorize, faces,
// pose, segment: one model run takes the frames of many jobs), FetchStage (one FetchAll for
// the whole batch: the transfers overlap), FaceClustersStage (one dataset-level job over the
// whole store; see its header).
// Thread-safety: RunBatch is thread-safe when the subclass's RunOne is.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "stages/stage.h"

namespace framemill {

// The media kinds a per-job stage takes.
enum class Takes { kImages, kVideos, kImagesAndVideos };

class PerJobStage : public Stage {
 public:
  const StageSpec& spec() const final { return spec_; }
  // The loop above. A subclass may override it to batch on some path (LightingStage on a
  // device) and hand the rest back to it.
  std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>& jobs,
                                const StageContext& ctx) override;
  bool RunsJobsTogether(const StageContext&) const override { return false; }

 protected:
  // The spec of a per-job stage: its name (jobs/stage_names.h), the media kinds it takes,
  // and the stages of the same item that must be done first.
  static StageSpec MakeSpec(std::string name, Takes takes, std::vector<std::string> deps = {});

  // A stage that writes no files.
  explicit PerJobStage(StageSpec spec);
  // A stage that writes files: out_dir is where a run's artifacts go (`out`); this stage's
  // are under <out_dir>/<name>/, made absolute here.
  PerJobStage(StageSpec spec, const std::string& out_dir);

  // One job of a kind the spec takes, with ctx.ladder for its device operations. Bad input
  // is a failed or skipped outcome with the reason. Called from several threads at once.
  virtual Outcome RunOne(const ClaimedJob& job, const StageContext& ctx) = 0;

  // Writes `bytes` as this job's artifact, <out_dir>/<name>/<item>-<lease token>.<ext>
  // (stages/artifact.h: whole or absent), and returns Done with `result`, the file's path
  // under result[key] and among the outcome's artifacts, and `device`; Failed with the
  // reason when it cannot be written.
  Outcome DoneWithArtifact(const ClaimedJob& job, const std::string& ext, std::string_view bytes,
                           const char* key, nlohmann::json result, std::string device) const;

 private:
  StageSpec spec_;
  std::optional<std::string> artifact_dir_;  // none: the stage writes no files
};

}  // namespace framemill
