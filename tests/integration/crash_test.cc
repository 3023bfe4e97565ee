// Kills framemill with SIGKILL at random moments throughout a run over 600 real
// images (whole runs and single workers), then reruns to completion and checks
// that nothing was lost or done twice.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/exit_code.h"

#include "tests/support/chaos.h"
#include "tests/support/store_checks.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

constexpr int kCrashImages = 600;
// More attempts than the kills can spend on one job, so no job can fail by chance: a
// round interrupts a job at most three times (a killed worker, its replacement, the whole
// run), and there are at most 12 rounds.
constexpr int kMaxAttempts = 40;

TEST(CrashTest, SigkillAtRandomMomentsLosesNothingAndDoesNothingTwice) {
  TempDir dir;
  MakeRealImages(dir / "media", kCrashImages, 720);
  const std::string db = dir / "fm.db";
  // Short leases so killed workers' jobs come back quickly.
  std::map<std::string, std::string> env = {
      {"FRAMEMILL_DB", db}, {"FRAMEMILL_LEASE_MS", "800"},
      {"FRAMEMILL_MAX_ATTEMPTS", std::to_string(kMaxAttempts)},
      {"FRAMEMILL_RETRY_BASE_MS", "50"}, {"LOG_LEVEL", "info"},
      {"FRAMEMILL_STAGES", "lighting"}};  // the scheduler is under test, not the models
  auto enq = RunProcess({FRAMEMILL_BIN, "enqueue", dir / "media"}, env, dir.path());
  ASSERT_EQ(enq.exit_code, 0) << enq.err;
  ASSERT_EQ(QueryInt(db, "SELECT count(*) FROM jobs"), kCrashImages);

  std::mt19937 rng(ChaosSeed());
  const std::string log = dir / "run.log";
  // The first kill is arranged, not left to chance: the whole run is frozen while its
  // workers hold leases, then killed, so a claimed batch is surely interrupted. The
  // others come at seeded random moments.
  long long interrupted = 0;
  int whole_kills = 0, worker_kills = 0;
  for (int round = 0; round < 12; ++round) {
    pid_t sup = StartProcess({FRAMEMILL_BIN, "run", "--workers", "2", "--batch", "8"}, env,
                             dir.path(), log);
    if (round == 0) {
      ASSERT_TRUE(FreezeHoldingLeases(db, sup, &interrupted)) << ReadFile(log);
    } else {
      auto until = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(std::uniform_int_distribution<int>(150, 900)(rng));
      bool killed_worker = false;
      while (std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        // Sometimes take out one worker mid-run: the supervisor must replace it.
        if (!killed_worker && round % 2 == 1) {
          auto kids = ChildPids(sup);
          if (!kids.empty() && std::uniform_int_distribution<int>(0, 20)(rng) == 0) {
            kill(kids[0], SIGKILL);
            killed_worker = true;
            ++worker_kills;
          }
        }
      }
    }
    // Then the whole thing, hard: workers first so none gets a graceful stop.
    SignalTree(sup, SIGKILL);
    if (WaitProcess(sup) == 128 + SIGKILL) ++whole_kills;
    if (QueryInt(db, "SELECT count(*) FROM jobs WHERE state NOT IN (2,3,4)") == 0) break;
  }
  // A worker forked just as its supervisor was killed may still be running: it stops
  // by itself (its supervisor is gone), and until then the final run works beside it.
  long long done_before = QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 2");
  auto final_run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, dir.path(), 600);
  EXPECT_EQ(final_run.exit_code, 0) << final_run.err;

  // Every job terminal, none lost, all done (every image is good), each once.
  ExpectEveryJobDoneOnce(db, kCrashImages);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM items"), kCrashImages);
  EXPECT_EQ(QueryInt(db, "SELECT max(attempts) <= " + std::to_string(kMaxAttempts) + " FROM jobs"), 1);
  // The first kill interrupted `interrupted` leases: each was rescued (others may have been).
  long long rescued = QueryInt(db, "SELECT count(*) FROM job_errors WHERE error_class IN ('lease_expired', 'timeout')");
  EXPECT_GT(interrupted, 0);
  EXPECT_GE(rescued, interrupted);
  std::printf("[crash] %d whole-run kills (the first froze %lld leases), %d single-worker "
              "kills, %lld rescued leases, %lld/%d done before the final run\n",
              whole_kills, interrupted, worker_kills, rescued, done_before, kCrashImages);
}

// A worker killed while it holds leases, on its last attempt: its jobs fail when the leases
// run out, found by its replacement. The run's summary (status's last run, its --json) counts
// them with the failures, as the failures table does (issue 40: it said 0 failed).
TEST(CrashTest, JobsALostWorkerHeldAndThatFailedCountInTheRunsSummary) {
  TempDir dir;
  MakeRealImages(dir / "media", 40, 720);
  const std::string db = dir / "fm.db";
  std::map<std::string, std::string> env = {
      {"FRAMEMILL_DB", db}, {"FRAMEMILL_LEASE_MS", "800"}, {"FRAMEMILL_MAX_ATTEMPTS", "1"},
      {"LOG_LEVEL", "info"}, {"FRAMEMILL_STAGES", "lighting"}};
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", dir / "media"}, env, dir.path()).exit_code, 0);
  const std::string log = dir / "run.log";
  pid_t sup = StartProcess({FRAMEMILL_BIN, "run", "--workers", "1", "--batch", "8"}, env, dir.path(), log);
  long long held = 0;
  ASSERT_TRUE(FreezeHoldingLeases(db, sup, &held)) << ReadFile(log);
  const auto kids = ChildPids(sup);
  ASSERT_EQ(kids.size(), 1u);
  kill(kids[0], SIGKILL);
  SignalTree(sup, SIGCONT);
  EXPECT_EQ(WaitProcess(sup), static_cast<int>(ExitCode::kSomeFailed)) << ReadFile(log);
  const long long failed = QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 3");
  EXPECT_EQ(failed, held) << "the jobs the killed worker held, and only those";
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 2"), 40 - held);
  auto status = RunProcess({FRAMEMILL_BIN, "status", "--json"}, env, dir.path());
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const auto last_run = nlohmann::json::parse(status.out)["last_run"];
  EXPECT_EQ(last_run["jobs_failed"], failed) << last_run;
  EXPECT_EQ(last_run["jobs_done"], 40 - held) << last_run;
  auto text = RunProcess({FRAMEMILL_BIN, "status"}, env, dir.path());
  EXPECT_NE(text.out.find(std::to_string(failed) + " failed"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace framemill::testing
