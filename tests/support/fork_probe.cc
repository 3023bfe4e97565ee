// framemill_fork_probe: a test binary that ForkServerTest (tests/support/fork_server_test.cc)
// runs through framemill_test_launcher, to see what a test process forked by a server gets.
// Its tests are not ctest's: each does one thing the launcher must pass back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/support/fork_server.h"

namespace {

// The parent of `pid`, from /proc/PID/stat; 0 if unknown.
long ParentOf(long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  char state = 0;
  long ppid = 0;
  return std::sscanf(line.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 ? ppid : 0;
}

TEST(Probe, ExitThree) { std::exit(3); }

TEST(Probe, Abort) { std::abort(); }

// Its directory, its pid and the server's (its parent's parent), and stderr in use.
TEST(Probe, Where) {
  char cwd[PATH_MAX];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  std::printf("cwd=%s pid=%ld server=%ld\n", cwd, static_cast<long>(::getpid()), ParentOf(::getppid()));
  std::fprintf(stderr, "to stderr\n");
}

// Writes its pid to $FRAMEMILL_PROBE_PID_FILE, then sleeps: the caller kills the launcher.
TEST(Probe, SleepsAfterWritingItsPid) {
  {
    std::ofstream f(std::string(std::getenv("FRAMEMILL_PROBE_PID_FILE")) + ".tmp");
    f << ::getpid();
  }
  const std::string file = std::getenv("FRAMEMILL_PROBE_PID_FILE");
  std::rename((file + ".tmp").c_str(), file.c_str());
  ::sleep(120);
}

}  // namespace
