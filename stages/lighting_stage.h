// The `lighting` stage: exposure, contrast, clipping, dynamic range, colour
// temperature and light direction of an image, or of a video's sampled frames. The
// pixel statistics (operation LIGHTING) run on the device the GPU policy chose: on a
// device, a whole batch's frames in one ladder run; on the CPU, job by job.
// Stateless after construction; RunBatch is thread-safe.
#pragma once

#include "stages/per_job_stage.h"
#include "stages/stage_options.h"

namespace framemill {

class LightingStage : public PerJobStage {
 public:
  explicit LightingStage(LightingOptions options);
  // Batches when LIGHTING runs on a device; otherwise the base's loop, job by job.
  std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>& jobs,
                                const StageContext& ctx) override;
  // On a device a batch's frames go in one ladder run.
  bool RunsJobsTogether(const StageContext& ctx) const override;

 protected:
  Outcome RunOne(const ClaimedJob& job, const StageContext& ctx) override;

 private:
  // Decodes every job, then takes all frames' statistics in one ladder run.
  std::vector<Outcome> RunTogether(const std::vector<ClaimedJob>& jobs, gpu::OomLadder& ladder);
  LightingOptions options_;
};

}  // namespace framemill
