// `dedup`: one dataset-level job, after categorize, that groups near-duplicate items (copies
// resized, re-compressed, cropped, turned or re-lit; a video's sampled frames take part as
// pictures of their video) from the signatures categorize wrote (cluster/near_duplicates.h).
// A group is a set of items: an item is in at most one group, whichever of its frames tied it. A pair the
// perceptual hash proposes is joined; one only the embedding proposes is joined when the
// pixels agree (analysis/same_picture.h). Each group names a representative (the largest,
// then the sharpest) and its members with their cosine and the signal that joined them;
// items in no group are unique. Re-armed by new items, as face_clusters is. Reads upstream
// results through StageContext::results; holds only configuration; RunBatch is thread-safe.
#pragma once

#include <vector>

#include "jobs/stage_names.h"
#include "stages/stage.h"
#include "stages/stage_options.h"

namespace framemill {

class DedupStage : public Stage {
 public:
  static constexpr const char* kName = stage_names::kDedup;
  explicit DedupStage(DedupOptions options);
  const StageSpec& spec() const override { return spec_; }
  std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>& jobs, const StageContext& ctx) override;

 private:
  Outcome RunOne(const StageContext& ctx) const;
  StageSpec spec_;
  DedupOptions options_;
};

}  // namespace framemill
