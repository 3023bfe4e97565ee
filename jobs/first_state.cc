#include "jobs/first_state.h"

namespace framemill {

FirstState DecideFirstState(const StageSpec& spec, MediaKind kind,
                            std::optional<JobState> download,
                            const std::vector<DependencyNow>& deps) {
  // A URL item's kind is known, and its download counts as done, once that job is done.
  const bool download_done = !download || *download == JobState::kDone;
  FirstState f;
  f.state = spec.deps.empty() && !download ? JobState::kPending : JobState::kWaiting;
  bool all_done = download_done;
  if (download && (*download == JobState::kSkipped || *download == JobState::kFailed)) {
    f = {JobState::kSkipped, "fetch_failed", "the fetch of this URL failed"};
  }
  for (const DependencyNow& d : deps) {
    all_done = all_done && d.state == JobState::kDone;
    if (f.state == JobState::kSkipped) continue;  // a later failed dependency does not undo it
    if (d.state == JobState::kSkipped)
      f = {JobState::kSkipped, "not_applicable", "dependency " + d.stage + " was skipped"};
    else if (d.state == JobState::kFailed)
      f = {JobState::kFailed, "dependency_failed", "dependency " + d.stage + " failed"};
  }
  if (download_done && !spec.AppliesTo(kind))
    f = {JobState::kSkipped, "not_applicable",
         spec.name + " does not apply to " + std::string(MediaKindName(kind)) + " items"};
  if (f.state == JobState::kWaiting && all_done) f.state = JobState::kPending;
  return f;
}

}  // namespace framemill
