#include "jobs/retry_policy.h"

#include <gtest/gtest.h>

namespace framemill {
namespace {

TEST(RetryPolicyTest, DoublesPerAttemptWithinEqualJitterBounds) {
  RetryPolicy p;
  p.base_delay_ms = 1000;
  p.max_delay_ms = 60'000;
  // attempt n: base * 2^(n-1), spread over [d/2, d).
  EXPECT_EQ(p.DelayMs(1, 0.0), 500);
  EXPECT_EQ(p.DelayMs(1, 0.999999), 999);
  EXPECT_EQ(p.DelayMs(2, 0.0), 1000);
  EXPECT_EQ(p.DelayMs(3, 0.0), 2000);
  EXPECT_EQ(p.DelayMs(4, 0.5), 6000);
}

TEST(RetryPolicyTest, CappedAtMaxDelayAndSafeForHugeAttemptCounts) {
  RetryPolicy p;
  p.base_delay_ms = 1000;
  p.max_delay_ms = 10'000;
  EXPECT_EQ(p.DelayMs(10, 0.0), 5000);
  EXPECT_EQ(p.DelayMs(1000, 0.99), 9950);
  EXPECT_GE(p.DelayMs(0, 0.0), 0);
}

}  // namespace
}  // namespace framemill
