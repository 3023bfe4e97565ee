// The seed of a chaos test. Every random choice a chaos test makes (when to kill, whom,
// how long to wait) comes from one generator seeded here, so a failure can be replayed
// exactly: FRAMEMILL_TEST_SEED=<the printed seed> ctest -R <the test>. Header-only, like
// store_checks.h: the benchmarks link test_support without gtest.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

namespace framemill::testing {

// FRAMEMILL_TEST_SEED when set, else a fresh seed; printed with the test's name and
// recorded as the test's "seed" property (ctest's output and gtest's XML both carry it).
inline unsigned ChaosSeed() {
  const char* given = std::getenv("FRAMEMILL_TEST_SEED");
  const unsigned seed = given != nullptr && *given != '\0'
                            ? static_cast<unsigned>(std::stoul(given))
                            : std::random_device{}();
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name =
      test != nullptr ? std::string(test->test_suite_name()) + "." + test->name() : "?";
  std::printf("[seed] %s: FRAMEMILL_TEST_SEED=%u%s\n", name.c_str(), seed,
              given != nullptr && *given != '\0' ? " (given)" : "");
  std::fflush(stdout);
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

}  // namespace framemill::testing
