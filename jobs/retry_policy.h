// When a failed job may run again: exponential backoff with jitter, capped, while its
// error is transient and attempts remain. The worker decides it (as River's executor
// does); the store only writes the state it is given. Pure and deterministic given the
// random draw; thread-safe.
#pragma once

#include <cstdint>

#include "jobs/job.h"
#include "jobs/outcome.h"

namespace framemill {

struct RetryPolicy {
  int64_t base_delay_ms = 2000;
  int64_t max_delay_ms = 5 * 60 * 1000;

  // Delay before attempt `attempts + 1`, after `attempts` have been made (>= 1).
  // `unit` in [0, 1) spreads it over [d/2, d) ("equal jitter") so retries of a batch
  // that failed together do not return together, yet never come back early.
  int64_t DelayMs(int attempts, double unit) const;

  // For a failed outcome of `job`: the time it runs again (now + the backoff, and never
  // before the server's Retry-After), or 0 when it has failed for good (a permanent
  // error, or its last attempt).
  int64_t RetryAt(const ClaimedJob& job, const Outcome& failed, int64_t now_ms,
                  double unit) const;
};

}  // namespace framemill
