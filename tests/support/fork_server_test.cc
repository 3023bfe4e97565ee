// framemill_test_launcher and a test binary's fork server (tests/support/fork_server.h),
// driven as ctest drives them, on the probe binary tests/support/fork_probe.cc.
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <string>

#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

ProcResult RunProbe(const std::string& test, const std::string& cwd, std::map<std::string, std::string> env = {}) {
  return RunProcess({FRAMEMILL_TEST_LAUNCHER, FRAMEMILL_FORK_PROBE, "--gtest_filter=Probe." + test}, env, cwd, 60);
}

struct ProbeWhere {
  std::string cwd;
  long pid = 0, server = 0;
};

ProbeWhere ParseProbeWhere(const std::string& out) {
  std::smatch m;
  ProbeWhere w;
  if (std::regex_search(out, m, std::regex(R"(cwd=(\S+) pid=(\d+) server=(\d+))"))) {
    w.cwd = m[1];
    w.pid = std::stol(m[2]);
    w.server = std::stol(m[3]);
  }
  return w;
}

TEST(ForkServerTest, ExitCodesSignalsAndStreamsComeBackAsFromTheBinaryItself) {
  TempDir dir;
  const ProcResult three = RunProbe("ExitThree", dir.path());
  EXPECT_EQ(three.exit_code, 3) << three.err;
  EXPECT_NE(three.out.find("[ RUN      ] Probe.ExitThree"), std::string::npos) << three.out;
  const ProcResult abort = RunProbe("Abort", dir.path());
  EXPECT_EQ(abort.term_signal, SIGABRT) << abort.out << abort.err;
  const ProcResult where = RunProbe("Where", dir.path());
  EXPECT_EQ(where.exit_code, 0) << where.err;
  EXPECT_NE(where.err.find("to stderr"), std::string::npos) << where.err;
}

TEST(ForkServerTest, EachTestIsAProcessOfItsOwnFromOneServerPerEnvironment) {
  TempDir a, b;
  const ProbeWhere first = ParseProbeWhere(RunProbe("Where", a.path()).out);
  const ProbeWhere second = ParseProbeWhere(RunProbe("Where", b.path()).out);
  EXPECT_EQ(first.cwd, a.path());
  EXPECT_EQ(second.cwd, b.path());
  ASSERT_GT(first.server, 1);
  EXPECT_EQ(first.server, second.server) << "one server for the same binary and environment";
  EXPECT_NE(first.pid, second.pid);
  const ProbeWhere other = ParseProbeWhere(RunProbe("Where", a.path(), {{"FRAMEMILL_PROBE_ENV", "other"}}).out);
  EXPECT_NE(other.server, first.server) << "another environment, another server";
  const ProbeWhere direct = ParseProbeWhere(RunProbe("Where", a.path(), {{"FRAMEMILL_TEST_FORKS", "0"}}).out);
  EXPECT_EQ(direct.cwd, a.path());
  EXPECT_NE(direct.server, first.server);
}

TEST(ForkServerTest, ATestWhoseLauncherIsKilledIsKilledToo) {
  TempDir dir;
  const std::string pid_file = dir / "probe.pid";
  const pid_t launcher =
      StartProcess({FRAMEMILL_TEST_LAUNCHER, FRAMEMILL_FORK_PROBE, "--gtest_filter=Probe.SleepsAfterWritingItsPid"},
                   {{"FRAMEMILL_PROBE_PID_FILE", pid_file}}, dir.path(), dir / "log");
  ASSERT_TRUE(WaitUntil([&] { return std::filesystem::exists(pid_file); }, 30)) << ReadFile(dir / "log");
  const pid_t probe = std::stoi(ReadFile(pid_file));
  EXPECT_TRUE(Alive(probe));
  ::kill(launcher, SIGKILL);  // as ctest does at a test's timeout
  WaitProcess(launcher);
  EXPECT_TRUE(WaitUntilGone({probe}, 10)) << "the test process outlived its launcher";
}

}  // namespace
}  // namespace framemill::testing
