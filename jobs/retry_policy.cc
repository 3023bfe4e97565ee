#include "jobs/retry_policy.h"

#include <algorithm>

namespace framemill {

int64_t RetryPolicy::DelayMs(int attempts, double unit) const {
  int shift = std::clamp(attempts - 1, 0, 30);
  int64_t d = std::min<int64_t>(max_delay_ms, base_delay_ms << std::min(shift, 20));
  unit = std::clamp(unit, 0.0, 1.0);
  return d / 2 + static_cast<int64_t>(static_cast<double>(d / 2) * unit);
}

}  // namespace framemill
