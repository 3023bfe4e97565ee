// The vocabulary of the job store: job states, and what a claim hands a
// worker. Plain values; thread-safe to copy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "media/kind.h"

namespace framemill {

// Persisted as integers in jobs.state: never renumber.
enum class JobState : int {
  kPending = 0,
  kRunning = 1,
  kDone = 2,
  kFailed = 3,
  kSkipped = 4,
  kWaiting = 5,  // dependencies not yet done
};
std::string_view JobStateName(JobState s);
inline bool IsTerminal(JobState s) {
  return s == JobState::kDone || s == JobState::kFailed || s == JobState::kSkipped;
}

// What a worker gets for one claimed job.
struct ClaimedJob {
  int64_t id = 0;
  int64_t item_id = 0;
  std::string stage;
  int attempts = 0;  // including this one
  int max_attempts = 0;
  int64_t lease_token = 0;
  std::string source;
  MediaKind kind = MediaKind::kImage;
  std::string media_info;  // JSON
  int64_t size = 0;        // the item's file size as enqueued (0 for a URL not yet fetched)
};

}  // namespace framemill
