// The state a new job starts in: the rule that enqueue applies to every (item, stage) it
// adds, from the stage, the item's kind and the states its dependencies are in now. Pure:
// the store looks the dependencies up and writes what this decides.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "jobs/job.h"
#include "jobs/stage_graph.h"
#include "media/kind.h"

namespace framemill {

struct DependencyNow {
  std::string stage;
  JobState state;
};

struct FirstState {
  JobState state = JobState::kPending;
  std::string error_class, reason;  // set when it starts terminal (skipped or failed)
};

// `download`: the state of the item's download job when the item is a URL (its kind is
// known only once that is done), nullopt for a local file. `deps`: the stage's own
// dependencies, in the order the spec names them.
//  - pending when there is nothing to wait for (no dependencies, or all of them done);
//  - waiting while a dependency (or the download) is not terminal;
//  - skipped, fetch_failed, when the download failed; skipped, not_applicable, when a
//    dependency was skipped or the stage does not apply to the item's (known) kind;
//  - failed, dependency_failed, when a dependency failed.
FirstState DecideFirstState(const StageSpec& spec, MediaKind kind,
                            std::optional<JobState> download,
                            const std::vector<DependencyNow>& deps);

}  // namespace framemill
