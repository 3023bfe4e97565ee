// The `clips` stage (videos, after motion): every shot motion found becomes a clip file
// (MP4), less the frames of gradual transitions; short shots are left out and long ones
// split (analysis/clip_plan.h), and the files are written in one pass over the video
// (media/clip_writer.h). Each item's clips are under <out>/clips/<item>/, named by their
// first frame and the claim's lease token; what an earlier claim of the item left there is
// removed first, so a rerun after a kill makes each clip once. Runs on the CPU.
// Stateless after construction; RunBatch is thread-safe.
#pragma once

#include <string>

#include "stages/per_job_stage.h"
#include "stages/stage_options.h"

namespace framemill {

class ClipsStage : public PerJobStage {
 public:
  ClipsStage(ClipsOptions options, const std::string& out_dir);

 protected:
  Outcome RunOne(const ClaimedJob& job, const StageContext& ctx) override;

 private:
  ClipsOptions options_;
  std::string dir_;  // <out>/clips
};

}  // namespace framemill
