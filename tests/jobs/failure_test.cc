// The one failure policy (jobs/failure.h): what each exception becomes, wherever it is caught,
// and that the retry policy runs both kinds again.
#include "jobs/failure.h"

#include <gtest/gtest.h>

#include <new>
#include <stdexcept>

#include "jobs/retry_policy.h"

namespace framemill {
namespace {

template <class E>
Outcome Caught(const E& e) {
  try {
    throw e;
  } catch (...) {
    return FailedByThrow("echo");
  }
}

TEST(FailureTest, OutOfHostMemoryIsTheResourcesClassAndTransient) {
  const Outcome o = Caught(std::bad_alloc());
  ASSERT_TRUE(o.failed());
  EXPECT_TRUE(o.error.IsOutOfMemory());
  EXPECT_EQ(o.error.message(), "echo: out of host memory");
  EXPECT_EQ(o.ErrorClass(), "resources");
  EXPECT_TRUE(o.error.IsTransient());
}

TEST(FailureTest, AnyOtherExceptionIsInternalAndTransient) {
  const Outcome o = Caught(std::runtime_error("boom"));
  EXPECT_EQ(o.error.code(), Status::Code::kInternal);
  EXPECT_EQ(o.error.message(), "echo: boom");
  EXPECT_EQ(o.ErrorClass(), "internal");
  EXPECT_TRUE(o.error.IsTransient());
  const Outcome odd = Caught(42);
  EXPECT_EQ(odd.error.code(), Status::Code::kInternal);
  EXPECT_EQ(odd.error.message(), "echo: an exception that is not a std::exception");
}

// Every OutOfMemory that reaches a job is the host's: the same class however it was made
// (the out-of-memory ladder's CPU step returns one rather than throwing).
TEST(FailureTest, AnOutOfMemoryStatusIsTheResourcesClassToo) {
  EXPECT_EQ(Outcome::Failed(Status::OutOfMemory("host memory exhausted filling a hole")).ErrorClass(),
            "resources");
  EXPECT_EQ(Outcome::Failed(Status::OutOfMemory("x"), "custom").ErrorClass(), "custom");
  EXPECT_EQ(Outcome::Failed(Status::IOError("x")).ErrorClass(), "io_error");
}

TEST(FailureTest, TheRetryPolicyRunsBothAgainWhileAttemptsRemain) {
  RetryPolicy retry;
  ClaimedJob job;
  job.attempts = 1;
  job.max_attempts = 3;
  EXPECT_GT(retry.RetryAt(job, Caught(std::bad_alloc()), 1000, 0.5), 1000);
  EXPECT_GT(retry.RetryAt(job, Caught(std::runtime_error("boom")), 1000, 0.5), 1000);
  job.attempts = 3;
  EXPECT_EQ(retry.RetryAt(job, Caught(std::bad_alloc()), 1000, 0.5), 0) << "its last attempt";
}

}  // namespace
}  // namespace framemill
