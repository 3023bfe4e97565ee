// A test binary as a fork server: loaded once, a forked process per test (the why, with the
// measurement, is in fork_protocol.h). tests/support/test_launcher_main.cc is the client
// ctest runs; FRAMEMILL_TEST_FORKS=0 makes it run each test binary directly, as before.
//
// Each test still runs in a process of its own, as from a fresh exec: the server forks
// before GoogleTest is initialised and runs no test code itself. Its environment is the
// client's (a different environment or a rebuilt binary gets a server of its own); the test
// process takes the client's standard streams and working directory, is the leader of a
// new process group, and is killed with that group when the client dies (a ctest timeout).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace framemill::testing {

// The socket to serve on, when `args` (argv) asks for a fork server.
std::optional<std::string> ForkServerSocket(const std::vector<std::string>& args);

// Serves requests on `socket_path` until none has come for fork_protocol::kIdleExitSeconds,
// then exits the process. Returns only in a forked test process: that test's argv.
std::vector<std::string> ServeForks(const std::string& socket_path);

}  // namespace framemill::testing
