#include "jobs/outcome.h"

#include <gtest/gtest.h>

namespace framemill {
namespace {

TEST(OutcomeTest, NamedConstructorsSayWhatHappened) {
  Outcome done = Outcome::Done({{"n", 1}}, "cuda:0");
  EXPECT_TRUE(done.done());
  EXPECT_FALSE(done.failed());
  EXPECT_EQ(done.result["n"], 1);
  EXPECT_EQ(done.device, "cuda:0");
  EXPECT_FALSE(done.fetched.has_value());

  Outcome skipped = Outcome::Skipped("motion applies to videos");
  EXPECT_EQ(skipped.kind, Outcome::Kind::kSkipped);
  EXPECT_EQ(skipped.error.message(), "motion applies to videos");

  Outcome failed = Outcome::Failed(Status::Busy("HTTP 429"), "http_status", 5000);
  EXPECT_TRUE(failed.failed());
  EXPECT_TRUE(failed.error.IsTransient());
  EXPECT_EQ(failed.retry_after_ms, 5000);
}

TEST(OutcomeTest, ErrorClassIsTheStagesClassElseTheStatusCodesName) {
  EXPECT_EQ(Outcome::Failed(Status::Busy("x"), "http_status").ErrorClass(), "http_status");
  EXPECT_EQ(Outcome::Failed(Status::Corruption("bad png")).ErrorClass(), "corrupt_input");
  EXPECT_EQ(Outcome::Failed(Status::IOError("nfs")).ErrorClass(), "io_error");
  EXPECT_EQ(Outcome::Failed(Status::IOError("nfs")).retry_after_ms, -1);
}

}  // namespace
}  // namespace framemill
