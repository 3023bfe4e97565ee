// The crash tests' verdict on a store (SQLite file or PostgreSQL URI), as gtest
// expectations. Header-only: the benchmarks link test_support without gtest.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/support/test_support.h"

namespace framemill::testing {

// `jobs` jobs, every one done, exactly one result each and none for another state, no
// attempt past its maximum, no lease left behind.
inline void ExpectEveryJobDoneOnce(const std::string& db, long long jobs) {
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs"), jobs);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE state NOT IN (2,3,4)"), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 2"), jobs)
      << "failed: " << ::testing::PrintToString(QueryRows(
             db, "SELECT id, error_class, last_error, attempts FROM jobs WHERE state = 3"));
  // Exactly one result per done job, none for others.
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM results"), jobs);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM (SELECT job_id FROM results GROUP BY job_id"
                         " HAVING count(*) > 1) t"), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM results r JOIN jobs j ON j.id = r.job_id"
                         " WHERE j.state <> 2"), 0);
  // Attempts never exceed the maximum, and no lease is left behind.
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE attempts > max_attempts"), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE lease_token IS NOT NULL"), 0);
}

}  // namespace framemill::testing
