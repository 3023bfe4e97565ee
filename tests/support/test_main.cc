// main() of the test binaries: GoogleTest's, or a fork server that runs it in a process
// per test (tests/support/fork_server.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/fork_server.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  if (auto socket = framemill::testing::ForkServerSocket(args)) args = framemill::testing::ServeForks(*socket);
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  int n = static_cast<int>(args.size());
  ::testing::InitGoogleTest(&n, cargs.data());
  return RUN_ALL_TESTS();
}
