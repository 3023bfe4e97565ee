// The `motion` stage (videos; still images are skipped by the graph, with the reason):
// each video is decoded once, in order, at the analysis size, and every analysed frame
// pair's dense flow is split into camera and subject motion; cuts end shots. The result
// holds the summary; the per-pair series is a CSV artifact fenced by the lease token.
// Stateless after construction; RunBatch is thread-safe.
#pragma once

#include <string>

#include "stages/stage.h"
#include "stages/stage_options.h"

namespace framemill {

class MotionStage : public Stage {
 public:
  MotionStage(MotionOptions options, const std::string& out_dir);
  const StageSpec& spec() const override { return spec_; }
  std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>& jobs,
                                const StageContext& ctx) override;

 private:
  Outcome RunOne(const ClaimedJob& job, const StageContext& ctx) const;
  std::string SeriesPath(const ClaimedJob& job) const;
  MotionOptions options_;
  std::string series_dir_;
  StageSpec spec_;
};

}  // namespace framemill
