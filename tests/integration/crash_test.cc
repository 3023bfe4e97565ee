// Kills framemill with SIGKILL at random moments throughout a run over 600 real
// images (whole runs and single workers), then reruns to completion and checks
// that nothing was lost or done twice.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "tests/support/store_checks.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

constexpr int kImages = 600;
constexpr int kMaxAttempts = 10;

TEST(CrashTest, SigkillAtRandomMomentsLosesNothingAndDoesNothingTwice) {
  TempDir dir;
  MakeRealImages(dir / "media", kImages, 720);
  const std::string db = dir / "fm.db";
  // Short leases so killed workers' jobs come back quickly; enough attempts that
  // being caught in a killed batch several times still leaves room to finish.
  std::map<std::string, std::string> env = {
      {"FRAMEMILL_DB", db}, {"FRAMEMILL_LEASE_MS", "800"},
      {"FRAMEMILL_MAX_ATTEMPTS", std::to_string(kMaxAttempts)},
      {"FRAMEMILL_RETRY_BASE_MS", "50"}, {"LOG_LEVEL", "info"},
      {"FRAMEMILL_STAGES", "lighting"}};  // the scheduler is under test, not the models
  auto enq = RunProcess({FRAMEMILL_BIN, "enqueue", dir / "media"}, env, dir.path());
  ASSERT_EQ(enq.exit_code, 0) << enq.err;
  ASSERT_EQ(QueryInt(db, "SELECT count(*) FROM jobs"), kImages);

  std::mt19937 rng(std::random_device{}());
  const std::string log = dir / "run.log";
  int whole_kills = 0, worker_kills = 0;
  for (int round = 0; round < 12; ++round) {
    pid_t sup = StartProcess({FRAMEMILL_BIN, "run", "--workers", "2", "--batch", "8"}, env,
                             dir.path(), log);
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
    // Then the whole thing, hard: workers first so none gets a graceful stop.
    for (pid_t k : ChildPids(sup)) kill(k, SIGKILL);
    kill(sup, SIGKILL);
    int code = WaitProcess(sup);
    if (code == 128 + SIGKILL) ++whole_kills;
    if (QueryInt(db, "SELECT count(*) FROM jobs WHERE state NOT IN (2,3,4)") == 0) break;
  }
  // Reap anything still holding the store (a worker orphaned mid-kill).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));

  long long done_before = QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 2");
  auto final_run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, dir.path(), 600);
  EXPECT_EQ(final_run.exit_code, 0) << final_run.err;

  // Every job terminal, none lost, all done (every image is good), each once.
  ExpectEveryJobDoneOnce(db, kImages);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM items"), kImages);
  EXPECT_EQ(QueryInt(db, "SELECT max(attempts) <= " + std::to_string(kMaxAttempts) + " FROM jobs"), 1);
  // The kills really landed mid-run: some leases had to be rescued.
  long long rescued = QueryInt(db, "SELECT count(*) FROM job_errors WHERE error_class = 'aborted'");
  EXPECT_GT(whole_kills, 0);
  EXPECT_GT(rescued, 0) << "no kill interrupted a claimed batch";
  std::printf("[crash] %d whole-run kills, %d single-worker kills, %lld rescued leases, "
              "%lld/%d done before the final run\n",
              whole_kills, worker_kills, rescued, done_before, kImages);
}

}  // namespace
}  // namespace framemill::testing
