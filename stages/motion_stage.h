// The `motion` stage (videos; still images are skipped by the graph, with the reason):
// each video is decoded once, in order, at the analysis size, and every analysed frame
// pair's dense flow is split into camera and subject motion; cuts end shots. The result
// holds the summary; the per-pair series is a CSV artifact fenced by the lease token.
// Stateless after construction; RunBatch is thread-safe.
#pragma once

#include <string>

#include "stages/per_job_stage.h"
#include "stages/stage_options.h"

namespace framemill {

class MotionStage : public PerJobStage {
 public:
  MotionStage(MotionOptions options, const std::string& out_dir);

 protected:
  Outcome RunOne(const ClaimedJob& job, const StageContext& ctx) override;

 private:
  MotionOptions options_;
};

}  // namespace framemill
