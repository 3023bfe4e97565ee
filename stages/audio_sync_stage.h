// The `audio_sync` stage (videos with sound; a still image or a silent video is skipped
// with the reason): how far the sound is behind (positive offset_ms) or ahead of the
// picture, and how sure the estimate is. The audio gives two signals, speech probability
// (Silero VAD) and an onset envelope; the picture gives the motion of the speaker's lower
// face (faces from the faces stage's detector) and whole-frame visual onsets. Every audio
// and visual pair is cross-correlated (analysis/av_sync.h) and the clearest peak wins; shots
// (the motion analyser's cuts) get their own estimates. Offsets are on the clock a player
// uses: the container's declared offset is in them, and reported apart. The signals, on
// their common 10 ms grid, are a CSV artifact fenced by the lease token.
// Holds configuration and the shared model cache; RunBatch is thread-safe.
#pragma once

#include <memory>
#include <string>

#include "models/model_cache.h"
#include "stages/per_job_stage.h"
#include "stages/stage_options.h"

namespace framemill {

class AudioSyncStage : public PerJobStage {
 public:
  AudioSyncStage(std::shared_ptr<models::ModelCache> cache, AudioSyncOptions options,
                 const std::string& out_dir);
  std::vector<std::string> Models() const override;

 protected:
  Outcome RunOne(const ClaimedJob& job, const StageContext& ctx) override;

 private:
  std::shared_ptr<models::ModelCache> cache_;
  AudioSyncOptions options_;
};

}  // namespace framemill
