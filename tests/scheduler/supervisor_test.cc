// The supervisor (RunWorkers) with real worker processes forked from this test, a real
// SQLite store, and a stage defined here that can hang forever or ask for a retry far
// ahead: a hung stage is killed and its job fails by itself; a run ends when only
// far-off retries are left; workers stop when their supervisor dies under a subreaper.
// Each run happens in a child process, so a regression shows as a timeout, not a hang.
#include "scheduler/supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>

#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

constexpr char kSupervisedStage[] = "probe";

// "hang" in the source: never returns. "later": fails, the server asking for a retry in
// an hour. Anything else: done.
class HangStage : public Stage {
 public:
  HangStage() { spec_.name = kSupervisedStage; }
  const StageSpec& spec() const override { return spec_; }
  std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>& jobs,
                                const StageContext&) override {
    std::vector<Outcome> out;
    for (const ClaimedJob& job : jobs) {
      if (job.source.find("hang") != std::string::npos) {
        for (;;) pause();  // a decoder stuck in a loop: deaf to the stop flag
      }
      if (job.source.find("later") != std::string::npos) {
        out.push_back(Outcome::Failed(Status::IOError("503"), "http_503", 3'600'000));
        continue;
      }
      out.push_back(Outcome::Done({{"ok", true}}));
    }
    return out;
  }

 private:
  StageSpec spec_;
};

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_TRUE(registry_.Add(std::make_unique<HangStage>(), &err)) << err;
    db_ = dir_ / "jobs.db";
    options_.db = db_;
    options_.workers = 2;
    options_.worker.stages = {kSupervisedStage};
    options_.worker.batch = 4;
    options_.worker.lease_ms = 60'000;  // only the budget or the watch may end a hang
    options_.worker.poll_ms = 20;
    options_.worker.check_files = false;  // the test stages read no files: sources are names
    options_.worker.retry.base_delay_ms = 10;
  }

  void Enqueue(const std::vector<std::string>& sources, int max_attempts) {
    auto store = OpenJobStore(db_, &registry_.graph(), SystemClock());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    std::vector<NewItem> items;
    for (const std::string& s : sources) {
      NewItem it;
      it.source = s;
      it.content_hash = s;
      items.push_back(it);
    }
    EnqueueOptions eo;
    eo.stages = {kSupervisedStage};
    eo.max_attempts = max_attempts;
    ASSERT_TRUE((*store)->Enqueue(items, eo).ok());
  }

  int Run(int timeout_s) {
    return RunInChild([this] { return ToInt(RunWorkers(options_, registry_)); }, timeout_s);
  }

  std::string Job(const std::string& source) {
    auto rows = QueryRows(db_, "SELECT j.state || '|' || j.attempts || '|' ||"
                               " coalesce(j.error_class, '') FROM jobs j JOIN items i"
                               " ON i.id = j.item_id WHERE i.source = '" + source + "'");
    return rows.empty() ? "<none>" : rows[0];
  }

  TempDir dir_;
  std::string db_;
  StageRegistry registry_;
  RunOptions options_;
};

TEST_F(SupervisorTest, AHungStageIsKilledAndItsJobFailsByItselfWithTheReason) {
  std::vector<std::string> sources = {"/d/hang.png"};
  for (int i = 0; i < 10; ++i) sources.push_back("/d/ok-" + std::to_string(i) + ".png");
  Enqueue(sources, 2);
  // Budgets a trivial batch cannot miss on a loaded machine (4 s for a batch of four; a
  // budget of 0.7 s could be reached by a worker merely waiting for a core).
  options_.worker.budget.batch_ms = 2000;
  options_.worker.budget.job_ms = 500;

  EXPECT_EQ(Run(60), ToInt(ExitCode::kSomeFailed));

  // Failed after its two attempts, the second alone; the rest done (a batch-mate of the
  // first kill is a suspect too, and ran again alone).
  EXPECT_EQ(Job("/d/hang.png"), "3|2|timeout");
  for (int i = 0; i < 10; ++i) {
    const std::string job = Job("/d/ok-" + std::to_string(i) + ".png");
    EXPECT_TRUE(job == "2|1|" || job == "2|2|") << job;
  }
  auto why = QueryRows(db_, "SELECT last_error FROM jobs WHERE state = 3");
  ASSERT_EQ(why.size(), 1u);
  EXPECT_NE(why[0].find("time budget"), std::string::npos) << why[0];
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM jobs WHERE lease_token IS NOT NULL"), 0);
}

TEST_F(SupervisorTest, ARunEndsWhenOnlyRetriesBeyondTheHorizonAreLeft) {
  Enqueue({"/d/later.png", "/d/ok.png"}, 5);
  options_.worker.horizon_ms = 600'000;

  EXPECT_EQ(Run(60), ToInt(ExitCode::kSomeFailed));

  // Not failed: pending, due in about an hour, its attempt spent.
  EXPECT_EQ(Job("/d/later.png"), "0|1|http_503");
  EXPECT_EQ(Job("/d/ok.png"), "2|1|");
  EXPECT_GT(QueryInt(db_, "SELECT next_run_at FROM jobs WHERE state = 0"),
            SystemClock()->NowMs() + 3'000'000);
  // And `status` (the store's counts) says so.
  auto store = OpenJobStore(db_, &registry_.graph(), SystemClock());
  ASSERT_TRUE(store.ok());
  auto counts = (*store)->Counts(60'000);
  ASSERT_TRUE(counts.ok());
  ASSERT_EQ(counts->size(), 1u);
  EXPECT_EQ((*counts)[0].retry_later, 1);
  EXPECT_GT((*counts)[0].next_retry_at, SystemClock()->NowMs() + 3'000'000);
}

// Under a subreaper (systemd, tini, docker --init) a dead supervisor's workers are not
// reparented to pid 1; a worker hung in a stage must still go, within its grace period.
TEST_F(SupervisorTest, AHungWorkerExitsWhenItsSupervisorDiesUnderASubreaper) {
  Enqueue({"/d/hang.png"}, 3);
  options_.workers = 1;
  options_.worker.lease_ms = 1'000;     // the grace period after the supervisor is gone
  options_.worker.budget.job_ms = 0;    // no budget: only the watch can end it
  const std::string pids = dir_ / "pids";
  // The child is the subreaper; it starts the supervisor, and reaps whatever it is left.
  const int code = RunInChild(
      [&]() -> int {
        prctl(PR_SET_CHILD_SUBREAPER, 1);
        pid_t sup = fork();
        if (sup == 0) _exit(ToInt(RunWorkers(options_, registry_)));
        // Wait for the worker to claim the job, then kill the supervisor outright.
        for (int i = 0; i < 500 && QueryInt(db_, "SELECT count(*) FROM jobs WHERE state = 1") == 0;
             ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        auto workers = ChildPids(sup);
        WriteFile(pids, std::to_string(workers.size()));
        kill(sup, SIGKILL);
        waitpid(sup, nullptr, 0);
        // The orphaned worker is ours now; it must exit by itself.
        while (waitpid(-1, nullptr, 0) > 0) {
        }
        return 0;
      },
      30);
  EXPECT_EQ(ReadFile(pids), "1");
  EXPECT_EQ(code, 0) << "the orphaned worker did not exit";
}

}  // namespace
}  // namespace framemill::testing
