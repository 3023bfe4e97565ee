// `framemill export --stage S` as the end-to-end tests read it: one parsed JSON row per
// item. Header-only, for test binaries built with FRAMEMILL_BIN and GoogleTest.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/test_support.h"

namespace framemill::testing {

inline std::vector<nlohmann::json> ExportRows(const std::map<std::string, std::string>& env,
                                              const std::string& dir, const std::string& stage) {
  auto r = RunProcess({FRAMEMILL_BIN, "export", "--stage", stage}, env, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<nlohmann::json> out;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace framemill::testing
