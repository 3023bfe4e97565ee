// The `motion` stage (videos; still images are skipped by the graph, with the reason):
// each video is decoded once, in order, at the analysis size, and every analysed frame
// pair's dense flow is split into camera and subject motion; cuts end shots. The result
// holds the summary; the per-pair series is a CSV artifact fenced by the lease token.
// Stateless after construction; RunBatch is thread-safe.
#pragma once

#include <string>

#include "media/video_reader.h"
#include "stages/per_job_stage.h"
#include "stages/stage_options.h"

namespace framemill {

// How the motion stage reads a video: frames at most options.analysis_width wide and
// options.max_fps a second, handing over the frames it leaves out too (each cut on its exact
// source frame); and the rate it analyses a video of `fps` frames a second at.
// bench/shot_replay reads the labelled set the same way.
VideoReaderOptions MotionReaderOptions(const MotionOptions& options);
double AnalysedFps(const MotionOptions& options, double fps);

class MotionStage : public PerJobStage {
 public:
  MotionStage(MotionOptions options, const std::string& out_dir);

 protected:
  Outcome RunOne(const ClaimedJob& job, const StageContext& ctx) override;

 private:
  MotionOptions options_;
};

}  // namespace framemill
