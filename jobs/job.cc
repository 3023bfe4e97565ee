#include "jobs/job.h"

namespace framemill {

std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kPending: return "pending";
    case JobState::kRunning: return "running";
    case JobState::kDone: return "done";
    case JobState::kFailed: return "failed";
    case JobState::kSkipped: return "skipped";
    case JobState::kWaiting: return "waiting";
  }
  return "unknown";
}

}  // namespace framemill
