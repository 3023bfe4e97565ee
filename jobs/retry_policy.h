// When a transiently failed job may run again: exponential backoff with jitter,
// capped, up to max attempts. Pure and deterministic given the random draw.
#pragma once

#include <cstdint>

namespace framemill {

struct RetryPolicy {
  int64_t base_delay_ms = 2000;
  int64_t max_delay_ms = 5 * 60 * 1000;

  // Delay before attempt `attempts + 1`, after `attempts` have been made (>= 1).
  // `unit` in [0, 1) spreads it over [d/2, d) ("equal jitter") so retries of a batch
  // that failed together do not return together, yet never come back early.
  int64_t DelayMs(int attempts, double unit) const;
};

}  // namespace framemill
