#include "jobs/retry_policy.h"

#include <gtest/gtest.h>

namespace framemill {
namespace {

TEST(RetryPolicyTest, DoublesPerAttemptWithinEqualJitterBounds) {
  const RetryPolicy p{.base_delay_ms = 1000, .max_delay_ms = 60'000};
  // attempt n: base * 2^(n-1), spread over [d/2, d).
  EXPECT_EQ(p.DelayMs(1, 0.0), 500);
  EXPECT_EQ(p.DelayMs(1, 0.999999), 999);
  EXPECT_EQ(p.DelayMs(2, 0.0), 1000);
  EXPECT_EQ(p.DelayMs(3, 0.0), 2000);
  EXPECT_EQ(p.DelayMs(4, 0.5), 6000);
}

TEST(RetryPolicyTest, CappedAtMaxDelayAndSafeForHugeAttemptCounts) {
  const RetryPolicy p{.base_delay_ms = 1000, .max_delay_ms = 10'000};
  EXPECT_EQ(p.DelayMs(10, 0.0), 5000);
  EXPECT_EQ(p.DelayMs(1000, 0.99), 9950);
  EXPECT_GE(p.DelayMs(0, 0.0), 0);
}

ClaimedJob Attempt(int attempts, int max_attempts) {
  ClaimedJob j;
  j.attempts = attempts;
  j.max_attempts = max_attempts;
  return j;
}

TEST(RetryPolicyTest, TransientFailureRetriesAfterTheBackoffWhileAttemptsRemain) {
  const RetryPolicy p{.base_delay_ms = 1000};
  const int64_t now = 1'700'000'000'000;
  const Outcome busy = Outcome::Failed(Status::IOError("nfs hiccup"));
  EXPECT_EQ(p.RetryAt(Attempt(1, 3), busy, now, 0.0), now + 500);
  EXPECT_EQ(p.RetryAt(Attempt(2, 3), busy, now, 0.0), now + 1000);
  EXPECT_EQ(p.RetryAt(Attempt(3, 3), busy, now, 0.0), 0) << "the last attempt fails for good";
  EXPECT_EQ(p.RetryAt(Attempt(5, 3), busy, now, 0.0), 0);
}

TEST(RetryPolicyTest, PermanentFailureNeverRetries) {
  RetryPolicy p;
  for (Status s : {Status::Corruption("bad png"), Status::Unsupported("cmyk"),
                   Status::TooLarge("huge"), Status::NotFound("gone"),
                   Status::InvalidArgument("bad url")})
    EXPECT_EQ(p.RetryAt(Attempt(1, 3), Outcome::Failed(s), 1000, 0.5), 0) << s.ToString();
}

TEST(RetryPolicyTest, ServersRetryAfterIsAFloorUnderTheBackoff) {
  const RetryPolicy p{.base_delay_ms = 10, .max_delay_ms = 10};
  const int64_t now = 5'000;
  const Outcome slow = Outcome::Failed(Status::Busy("HTTP 429"), "http_status", 60'000);
  EXPECT_EQ(p.RetryAt(Attempt(1, 3), slow, now, 0.9), now + 60'000);
  // A Retry-After shorter than our own backoff changes nothing.
  const Outcome quick = Outcome::Failed(Status::Busy("HTTP 503"), "http_status", 1);
  EXPECT_EQ(p.RetryAt(Attempt(1, 3), quick, now, 0.0), now + 5);
}

}  // namespace
}  // namespace framemill
