#include "jobs/retry_policy.h"

#include <algorithm>

namespace framemill {

int64_t RetryPolicy::DelayMs(int attempts, double unit) const {
  int shift = std::clamp(attempts - 1, 0, 30);
  int64_t d = std::min<int64_t>(max_delay_ms, base_delay_ms << std::min(shift, 20));
  unit = std::clamp(unit, 0.0, 1.0);
  return d / 2 + static_cast<int64_t>(static_cast<double>(d / 2) * unit);
}

int64_t RetryPolicy::RetryAt(const ClaimedJob& job, const Outcome& failed, int64_t now_ms,
                             double unit) const {
  if (!failed.error.IsTransient() || job.attempts >= job.max_attempts) return 0;
  // A server's Retry-After is a floor under our own backoff.
  return std::max<int64_t>(1, now_ms + std::max(DelayMs(job.attempts, unit), failed.retry_after_ms));
}

}  // namespace framemill
