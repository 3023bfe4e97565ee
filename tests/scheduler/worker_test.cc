// The worker loop against a real SQLite job store and a small real stage defined
// here: draining, per-job failure, transient retry, failed commits, lost leases
// (heartbeats dropped), and a graceful stop mid-batch.
#include "scheduler/worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <new>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "stages/registry.h"
#include "storage/job_store.h"
#include "tests/fakes/faulty_job_store.h"
#include "tests/scheduler/fake_items.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

constexpr int kPending = 0, kRunning = 1, kDone = 2, kFailed = 3;
constexpr char kProbeStage[] = "probe";
constexpr char kAfter[] = "after";  // depends on probe

// Which worker is calling the stage, so results say who produced them.
thread_local std::string t_worker = "?";
// Orders runs across all stages.
std::atomic<int64_t> g_sequence{0};

// A real stage for the worker to drive: records every call, returns Done with
// {"n": job id, "by": worker}, or fails as scripted per source.
class ProbeStage : public Stage {
 public:
  explicit ProbeStage(std::string name = kProbeStage, std::vector<std::string> deps = {}) {
    spec_.name = std::move(name);
    spec_.deps = std::move(deps);
  }
  const StageSpec& spec() const override { return spec_; }

  // Job by job, checking for a stop between jobs.
  std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>& jobs,
                                const StageContext& ctx) override {
    std::vector<Outcome> out;
    for (const ClaimedJob& job : jobs) {
      if (ctx.stopped()) break;
      out.push_back(RunOne(job));
    }
    return out;
  }

  Outcome RunOne(const ClaimedJob& job) {
    std::function<void(const ClaimedJob&)> hook;
    Status fail;
    {
      std::lock_guard<std::mutex> l(mu_);
      ++runs_[job.id];
      ++calls_;
      order_.emplace_back(job.item_id, ++g_sequence);
      hook = on_run_;
      auto always = fail_always_.find(job.source);
      if (always != fail_always_.end()) fail = always->second;
      auto once = fail_first_.find(job.source);
      if (once != fail_first_.end() && !once->second.second) {
        once->second.second = true;
        fail = once->second.first;
      }
    }
    if (hook) hook(job);
    if (!fail.ok()) return Outcome::Failed(fail);
    Outcome o = Outcome::Done({{"n", job.id}, {"by", t_worker}});
    if (!artifact_dir.empty()) {
      // Named by lease token, as the real stages name theirs.
      o.artifacts.push_back(artifact_dir + "/" + std::to_string(job.id) + "-" +
                            std::to_string(job.lease_token) + ".txt");
      WriteFile(o.artifacts.back(), t_worker);
    }
    return o;
  }
  std::string artifact_dir;  // set: each run writes one artifact there

  // Every run of `source` fails with `s`.
  void FailAlways(const std::string& source, Status s) {
    std::lock_guard<std::mutex> l(mu_);
    fail_always_[source] = std::move(s);
  }
  // Only the first run of `source` fails with `s`.
  void FailFirst(const std::string& source, Status s) {
    std::lock_guard<std::mutex> l(mu_);
    fail_first_[source] = {std::move(s), false};
  }
  // Called (outside the lock) at the start of every run.
  void OnRun(std::function<void(const ClaimedJob&)> hook) {
    std::lock_guard<std::mutex> l(mu_);
    on_run_ = std::move(hook);
  }
  std::map<int64_t, int> runs() const {
    std::lock_guard<std::mutex> l(mu_);
    return runs_;
  }
  int calls() const {
    std::lock_guard<std::mutex> l(mu_);
    return calls_;
  }
  // (item id, global sequence number) of every run.
  std::vector<std::pair<int64_t, int64_t>> order() const {
    std::lock_guard<std::mutex> l(mu_);
    return order_;
  }

 private:
  StageSpec spec_;
  mutable std::mutex mu_;
  std::map<int64_t, int> runs_;
  int calls_ = 0;
  std::vector<std::pair<int64_t, int64_t>> order_;
  std::map<std::string, Status> fail_always_;
  std::map<std::string, std::pair<Status, bool>> fail_first_;
  std::function<void(const ClaimedJob&)> on_run_;
};

class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto stage = std::make_unique<ProbeStage>();
    stage_ = stage.get();
    std::string err;
    ASSERT_TRUE(registry_.Add(std::move(stage), &err)) << err;
    // A second stage that needs the first; only the dependency test enqueues it.
    auto after = std::make_unique<ProbeStage>(kAfter, std::vector<std::string>{kProbeStage});
    after_ = after.get();
    ASSERT_TRUE(registry_.Add(std::move(after), &err)) << err;
    db_ = dir_ / "jobs.db";
  }

  // Some of a worker's counts, by name ("done,failed"), as one line: "done 3, failed 0".
  static std::string Counts(const Worker& w, const std::string& names) {
    return Counts(w.stats(), names);
  }
  static std::string Counts(const WorkerStats& s, const std::string& names) {
    const std::map<std::string, int64_t> all = {
        {"done", s.done}, {"failed", s.failed}, {"retried", s.retried}, {"stale", s.stale},
        {"batches", s.batches}, {"released", s.released}};
    std::string out;
    std::stringstream in(names);
    for (std::string name; std::getline(in, name, ',');)
      out += (out.empty() ? "" : ", ") + name + " " + std::to_string(all.at(name));
    return out;
  }

  // One worker, "w1", claiming `batch` jobs at a time on the real clock, run to the end.
  struct Ran {
    Status status;
    WorkerStats stats;
  };
  // Its status and some of its counts as one line: "OK; retried 1, failed 0, done 5".
  static std::string Summary(const Ran& r, const std::string& names) {
    return r.status.ToString() + "; " + Counts(r.stats, names);
  }
  Ran RunWorker(JobStore* store, int batch) {
    Worker worker(store, nullptr, &registry_, SystemClock(), Options("w1", batch), &stop_);
    Status s = worker.Run();
    return {s, worker.stats()};
  }

  // A store on the real clock with `n` images enqueued, retrying after base_ms..max_ms
  // (waited out in real time: milliseconds).
  std::unique_ptr<JobStore> BackoffStore(int n, int64_t base_ms, int64_t max_ms) {
    retry_.base_delay_ms = base_ms;
    retry_.max_delay_ms = max_ms;
    return OpenWith(n, SystemClock());
  }

  // A store on `clock` with `n` images enqueued (nullptr where it could not be opened).
  std::unique_ptr<JobStore> OpenWith(int n, const Clock* clock) {
    auto store = Open(clock);
    if (store != nullptr) EnqueueImages(*store, n);
    return store;
  }

  // A fresh connection to the store (one per worker / heartbeat thread).
  std::unique_ptr<JobStore> Open(const Clock* clock) {
    auto s = OpenSqliteJobStore(db_, &registry_.graph(), clock, store_options_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  // Enqueues items /data/img-0.png .. /data/img-(n-1).png with one probe job each.
  void EnqueueImages(JobStore& store, int n,
                     std::vector<std::string> stages = {kProbeStage}) {
    EnqueueOptions eo;
    eo.stages = stages;
    eo.max_attempts = max_attempts_;
    auto st = store.Enqueue(testing::FakeImages(n), eo);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    ASSERT_EQ(st->jobs_added, n * static_cast<int64_t>(stages.size()));
  }
  static std::string Source(int i) { return testing::FakeSource(i); }

  WorkerOptions Options(const std::string& id, int batch, int64_t lease_ms = 60'000) {
    WorkerOptions o;
    o.id = id;
    o.stages = {kProbeStage};
    o.batch = batch;
    o.lease_ms = lease_ms;
    o.poll_ms = 20;
    o.check_files = false;  // the fake stage reads no files: its sources are names only
    o.retry = retry_;
    return o;
  }

  long long Int(const std::string& sql) { return QueryInt(db_, sql); }
  long long JobsInState(int state) {
    return Int("SELECT count(*) FROM jobs WHERE state = " + std::to_string(state));
  }
  // Jobs with more than one results row (the schema forbids it; checked anyway).
  long long DuplicatedResults() {
    return Int("SELECT count(*) FROM (SELECT job_id FROM results GROUP BY job_id"
               " HAVING count(*) > 1)");
  }
  long long DoneJobsWithoutResult() {
    return Int("SELECT count(*) FROM jobs j WHERE j.state = 2 AND NOT EXISTS"
               " (SELECT 1 FROM results r WHERE r.job_id = j.id)");
  }
  std::string JobRow(int i) {
    auto rows = QueryRows(db_, "SELECT j.state || '|' || j.attempts || '|' ||"
                               " coalesce(j.error_class, '') FROM jobs j JOIN items i"
                               " ON i.id = j.item_id WHERE i.source = '" + Source(i) + "'");
    return rows.empty() ? "<no job>" : rows[0];
  }

  TempDir dir_;
  std::string db_;
  StageRegistry registry_;
  ProbeStage* stage_ = nullptr;
  ProbeStage* after_ = nullptr;
  StoreOptions store_options_;
  RetryPolicy retry_;  // the workers' (Options() copies it)
  int max_attempts_ = 3;
  std::atomic<bool> stop_{false};
};

TEST_F(WorkerTest, DrainsEveryPendingJobAndReturnsOk) {
  ManualClock clock;
  auto store = OpenWith(23, &clock);
  ASSERT_NE(store, nullptr);

  Worker worker(store.get(), nullptr, &registry_, &clock, Options("w1", 5), &stop_);
  Status s = worker.Run();

  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Counts(worker, "done,failed,stale"), "done 23, failed 0, stale 0");
  EXPECT_EQ(worker.stats().batches, 5);  // 5+5+5+5+3
  EXPECT_EQ(JobsInState(kDone), 23);
  EXPECT_EQ(Int("SELECT count(*) FROM results"), 23);
  EXPECT_EQ(DoneJobsWithoutResult(), 0);
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE lease_token IS NOT NULL"), 0);
  // Each job ran once, and its result is what the stage returned for it.
  auto runs = stage_->runs();
  EXPECT_EQ(runs.size(), 23u);
  for (auto& [id, n] : runs) EXPECT_EQ(n, 1) << "job " << id;
  auto rows = QueryRows(db_, "SELECT job_id, result, device FROM results ORDER BY job_id");
  ASSERT_EQ(rows.size(), 23u);
  for (const std::string& row : rows) {
    auto bar = row.find('|');
    auto bar2 = row.rfind('|');
    int64_t id = std::stoll(row.substr(0, bar));
    auto j = nlohmann::json::parse(row.substr(bar + 1, bar2 - bar - 1));
    EXPECT_EQ(j["n"], id) << row;
    EXPECT_EQ(row.substr(bar2 + 1), "cpu");
  }
}

TEST_F(WorkerTest, DrainsADependentStageOnlyAfterItsDependencyIsDone) {
  ManualClock clock;
  auto store = Open(&clock);
  ASSERT_NE(store, nullptr);
  EnqueueImages(*store, 6, {kProbeStage, kAfter});
  ASSERT_EQ(Int("SELECT count(*) FROM jobs WHERE state = 5"), 6);  // waiting
  stage_->FailAlways(Source(4), Status::Unsupported("not for this one"));

  WorkerOptions o = Options("w1", 4);
  o.stages = {kProbeStage, kAfter};
  Worker worker(store.get(), nullptr, &registry_, &clock, o, &stop_);
  Status s = worker.Run();

  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(worker.stats().done, 10);
  EXPECT_EQ(worker.stats().failed, 1);
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE stage = 'after' AND state = 2"), 5);
  // The dependant of the failed job failed with it, without running.
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE stage = 'after' AND state = 3"
                " AND error_class = 'dependency_failed'"), 1);
  EXPECT_EQ(after_->calls(), 5);
  // Per item, "after" ran only once "probe" had finished.
  std::map<int64_t, int64_t> probe_seq;
  for (auto& [item, seq] : stage_->order()) probe_seq[item] = seq;
  EXPECT_EQ(probe_seq.size(), 6u);
  for (auto& [item, seq] : after_->order()) {
    ASSERT_TRUE(probe_seq.count(item)) << "item " << item;
    EXPECT_GT(seq, probe_seq[item]) << "item " << item;
  }
}

// One exception boundary at the worker's call to a stage: a throw fails, with the reason,
// only the job that threw (its batch-mates run again alone and finish), and the worker goes on.
TEST_F(WorkerTest, AStageThatThrowsFailsOnlyTheJobThatThrewWithTheReasonAndTheWorkerGoesOn) {
  max_attempts_ = 1;
  ManualClock clock;
  auto store = OpenWith(5, &clock);
  ASSERT_NE(store, nullptr);
  stage_->OnRun([](const ClaimedJob& job) {
    if (job.source == Source(2)) throw std::runtime_error("boom in the stage");
  });
  Worker worker(store.get(), nullptr, &registry_, &clock, Options("w1", 5), &stop_);
  Status s = worker.Run();
  stage_->OnRun(nullptr);

  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(JobsInState(kDone), 4);
  EXPECT_EQ(JobsInState(kFailed), 1);
  EXPECT_EQ(JobRow(2), "3|1|internal");
  const auto why = QueryRows(db_, "SELECT last_error FROM jobs WHERE state = 3");
  ASSERT_EQ(why.size(), 1u);
  EXPECT_NE(why[0].find("stage probe threw: boom in the stage"), std::string::npos) << why[0];
  EXPECT_EQ(Int("SELECT count(*) FROM results"), 4);
  EXPECT_EQ(DuplicatedResults(), 0);
}

TEST_F(WorkerTest, WaitsForAJobInBackoffRatherThanReturningAndAStopEndsTheWait) {
  retry_.base_delay_ms = 60'000;  // far beyond the test
  retry_.max_delay_ms = 60'000;
  auto store = OpenWith(1, SystemClock());
  ASSERT_NE(store, nullptr);
  stage_->FailAlways(Source(0), Status::Busy("GPU busy"));

  Worker worker(store.get(), nullptr, &registry_, SystemClock(), Options("w1", 1), &stop_);
  Status s;
  std::thread t([&] { s = worker.Run(); });
  // Wait (bounded) until the job sits in backoff, then check the worker is still there.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (Int("SELECT count(*) FROM jobs WHERE state = 0 AND attempts = 1") == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a few poll rounds
  stop_ = true;
  t.join();
  EXPECT_EQ(worker.stats().retried, 1);
  EXPECT_TRUE(s.IsAborted()) << "returned " << s.ToString() << " with a job still to retry";
  EXPECT_EQ(stage_->calls(), 1);
  EXPECT_EQ(JobRow(0), "0|1|busy");
}

TEST_F(WorkerTest, ReturnsOkAtOnceWhenThereIsNothingToDo) {
  ManualClock clock;
  auto store = Open(&clock);
  ASSERT_NE(store, nullptr);
  Worker worker(store.get(), nullptr, &registry_, &clock, Options("w1", 4), &stop_);
  Status s = worker.Run();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(worker.stats().batches, 0);
  EXPECT_EQ(stage_->calls(), 0);
}

TEST_F(WorkerTest, PermanentStageErrorFailsThatJobOnlyAndOthersAreDone) {
  ManualClock clock;
  auto store = OpenWith(8, &clock);
  ASSERT_NE(store, nullptr);
  stage_->FailAlways(Source(3), Status::Corruption("truncated JPEG"));

  Worker worker(store.get(), nullptr, &registry_, &clock, Options("w1", 4), &stop_);
  Status s = worker.Run();

  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Counts(worker, "done,failed,retried"), "done 7, failed 1, retried 0");
  // Failed for good after one attempt, with the class recorded; no result.
  EXPECT_EQ(JobRow(3), "3|1|corrupt_input");
  EXPECT_EQ(Int("SELECT count(*) FROM job_errors WHERE message = 'truncated JPEG'"
                " AND transient = 0"), 1);
  for (int i : {0, 1, 2, 4, 5, 6, 7}) EXPECT_EQ(JobRow(i), "2|1|") << i;
  EXPECT_EQ(Int("SELECT count(*) FROM results"), 7);
  EXPECT_EQ(stage_->calls(), 8);  // not retried
}

TEST_F(WorkerTest, TransientStageErrorIsRetriedAfterBackoffAndThenSucceeds) {
  auto store = BackoffStore(5, 20, 40);
  ASSERT_NE(store, nullptr);
  stage_->FailFirst(Source(2), Status::IOError("NFS hiccup"));

  const Ran ran = RunWorker(store.get(), 5);

  EXPECT_EQ(Summary(ran, "retried,failed,done"), "OK; retried 1, failed 0, done 5");
  EXPECT_EQ(JobRow(2), "2|2|");  // done on its second attempt, error cleared
  EXPECT_EQ(Int("SELECT count(*) FROM job_errors WHERE error_class = 'io_error'"
                " AND transient = 1 AND attempt = 1"), 1);
  EXPECT_EQ(Int("SELECT count(*) FROM results"), 5);
  EXPECT_EQ(stage_->calls(), 6);
}

// Host memory running out is not the job's fault: a stage that throws std::bad_alloc gets a
// retry after the backoff (class "resources", jobs/failure.h), not a permanent failure, and
// the job finishes on its next attempt.
TEST_F(WorkerTest, AStageOutOfHostMemoryIsRetriedInTheResourcesClassAndThenSucceeds) {
  auto store = BackoffStore(3, 20, 40);
  ASSERT_NE(store, nullptr);
  // Twice: in the batch, and alone (the worker runs a batch that threw again job by job).
  int thrown = 0;
  stage_->OnRun([&](const ClaimedJob& job) {
    if (job.source == Source(1) && thrown < 2) {
      ++thrown;
      throw std::bad_alloc();
    }
  });
  const Ran ran = RunWorker(store.get(), 3);
  stage_->OnRun(nullptr);

  EXPECT_EQ(Summary(ran, "retried,failed,done"), "OK; retried 1, failed 0, done 3");
  EXPECT_EQ(thrown, 2);
  EXPECT_EQ(JobRow(1), "2|2|");  // done on its second attempt
  EXPECT_EQ(Int("SELECT count(*) FROM job_errors WHERE error_class = 'resources'"
                " AND transient = 1 AND attempt = 1"), 1);
}

TEST_F(WorkerTest, TransientErrorOnEveryAttemptFailsTheJobAtMaxAttempts) {
  max_attempts_ = 3;
  auto store = BackoffStore(2, 4, 8);
  ASSERT_NE(store, nullptr);
  stage_->FailAlways(Source(0), Status::IOError("disk keeps failing"));

  const Ran ran = RunWorker(store.get(), 2);

  EXPECT_EQ(Summary(ran, "retried,failed,done"), "OK; retried 2, failed 1, done 1");
  EXPECT_EQ(JobRow(0), "3|3|io_error");
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE attempts > max_attempts"), 0);
}

TEST_F(WorkerTest, FailedCommitReturnsTheErrorAndTheJobsAreFinishedOnceByAnotherWorker) {
  ManualClock clock;
  const int64_t lease = 60'000;
  auto real_a = OpenWith(10, &clock);
  auto store_b = Open(&clock);
  ASSERT_TRUE(real_a != nullptr && store_b != nullptr);
  FaultyJobStore faulty_a(real_a.get());
  // The disk is full: the commit fails, and so does giving the batch back.
  faulty_a.fail_next_complete = 1;
  faulty_a.fail_next_release = 1;

  t_worker = "A";
  Worker a(&faulty_a, nullptr, &registry_, &clock, Options("A", 4, lease), &stop_);
  Status sa = a.Run();

  // The commit failed: the worker stops with the store's error, recording nothing.
  EXPECT_EQ(sa.code(), Status::Code::kIOError) << sa.ToString();
  EXPECT_EQ(faulty_a.complete_failures.load(), 1);
  EXPECT_EQ(a.stats().done, 0);
  EXPECT_EQ(Int("SELECT count(*) FROM results"), 0);
  // Its batch is still leased to it (not lost, not done); the rest never started.
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE state = 1 AND lease_owner = 'A'"), 4);
  EXPECT_EQ(JobsInState(kPending), 6);

  // Before the lease runs out nobody else may take those four.
  t_worker = "B";
  {
    auto early = store_b->Claim("probe-early", {kProbeStage}, 100, lease);
    ASSERT_TRUE(early.ok());
    EXPECT_EQ(early->size(), 6u);
    std::vector<ClaimedJob> give_back = *early;
    ASSERT_TRUE(store_b->Release(give_back).ok());
  }

  // Once it has expired, another worker rescues and finishes every job.
  clock.Advance(lease + 1);
  auto before = stage_->runs();
  Worker b(store_b.get(), nullptr, &registry_, &clock, Options("B", 4, lease), &stop_);
  Status sb = b.Run();
  ASSERT_TRUE(sb.ok()) << sb.ToString();
  EXPECT_EQ(b.stats().done, 10);
  EXPECT_EQ(b.stats().stale, 0);
  EXPECT_EQ(JobsInState(kDone), 10);
  EXPECT_EQ(Int("SELECT count(*) FROM results"), 10);
  EXPECT_EQ(DuplicatedResults(), 0);
  EXPECT_EQ(DoneJobsWithoutResult(), 0);
  EXPECT_EQ(Int("SELECT count(*) FROM results WHERE json_extract(result, '$.by') <> 'B'"), 0);
  // B ran each job exactly once; the four A had run cost one attempt more, recorded.
  auto after = stage_->runs();
  for (auto& [id, n] : after) EXPECT_EQ(n - before[id], 1) << "job " << id;
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE attempts = 2"), 4);
  EXPECT_EQ(Int("SELECT count(*) FROM job_errors WHERE error_class = 'lease_expired'"), 4);
  t_worker = "?";
}

TEST_F(WorkerTest, FailedCommitGivesTheBatchBackWithoutSpendingAnAttempt) {
  ManualClock clock;
  auto real_a = OpenWith(10, &clock);
  auto store_b = Open(&clock);
  ASSERT_TRUE(real_a != nullptr && store_b != nullptr);
  FaultyJobStore faulty_a(real_a.get());
  faulty_a.fail_next_complete = 1;  // the commit fails; the small release still goes

  t_worker = "A";
  Worker a(&faulty_a, nullptr, &registry_, &clock, Options("A", 4), &stop_);
  EXPECT_EQ(a.Run().code(), Status::Code::kIOError);
  EXPECT_EQ(faulty_a.release_calls.load(), 1);
  // Nothing is held: the batch is pending again at once, its attempt given back.
  EXPECT_EQ(JobsInState(kPending), 10);
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE lease_token IS NOT NULL OR attempts > 0"), 0);

  // Another worker finishes everything without waiting for a lease to expire.
  t_worker = "B";
  Worker b(store_b.get(), nullptr, &registry_, &clock, Options("B", 4), &stop_);
  ASSERT_TRUE(b.Run().ok());
  EXPECT_EQ(JobsInState(kDone), 10);
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE attempts <> 1"), 0);
  EXPECT_EQ(Int("SELECT count(*) FROM job_errors"), 0);
  t_worker = "?";
}

// Runs `worker` on its own thread (as another process would), tagging its results.
class WorkerThread {
 public:
  WorkerThread(Worker* w, std::string tag) : w_(w) {
    thread_ = std::thread([this, tag] {
      t_worker = tag;
      Status s = w_->Run();
      std::lock_guard<std::mutex> l(mu_);
      status_ = s;
      done_ = true;
      cv_.notify_all();
    });
  }
  ~WorkerThread() { Join(); }
  // True if it returned within `timeout`.
  bool WaitFor(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [this] { return done_; });
  }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  Status status() {
    std::lock_guard<std::mutex> l(mu_);
    return status_;
  }

 private:
  Worker* w_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
  std::thread thread_;
};

TEST_F(WorkerTest, LostLeaseMakesTheFirstWorkersResultsStaleAndEachJobHasOneResult) {
  // Real time, short lease: A's heartbeats are dropped, so while A is stuck on its
  // first job the lease runs out and B rescues and finishes the whole batch.
  const int64_t lease = 300;
  const int n = 6;
  auto store_a = Open(SystemClock());
  auto hb_real = Open(SystemClock());
  auto store_b = Open(SystemClock());
  ASSERT_NE(store_a, nullptr);
  ASSERT_NE(hb_real, nullptr);
  ASSERT_NE(store_b, nullptr);
  EnqueueImages(*store_a, n);
  FaultyJobStore hb_a(hb_real.get());
  hb_a.drop_heartbeats = true;
  stage_->artifact_dir = dir_.path();

  std::atomic<bool> stop_b{false};
  Worker b(store_b.get(), nullptr, &registry_, SystemClock(), Options("B", n, lease), &stop_b);
  std::unique_ptr<WorkerThread> b_thread;
  bool b_finished = false;
  stage_->OnRun([&](const ClaimedJob&) {
    if (t_worker != "A" || b_thread) return;
    // A is now inside its batch: let B run until it has done everything.
    b_thread = std::make_unique<WorkerThread>(&b, "B");
    b_finished = b_thread->WaitFor(std::chrono::seconds(20));
    if (!b_finished) stop_b = true;  // heartbeats were not dropped: do not hang
    b_thread->Join();
  });

  t_worker = "A";
  Worker a(store_a.get(), &hb_a, &registry_, SystemClock(), Options("A", n, lease), &stop_);
  Status sa = a.Run();
  t_worker = "?";
  stage_->OnRun(nullptr);

  ASSERT_TRUE(b_finished) << "B never got the jobs: A's lease did not expire";
  EXPECT_TRUE(b_thread->status().ok()) << b_thread->status().ToString();
  EXPECT_TRUE(sa.ok()) << sa.ToString();
  EXPECT_GT(hb_a.heartbeats_dropped.load(), 0);
  EXPECT_EQ(b.stats().done, n);
  // A's whole batch was rejected by the lease fence.
  EXPECT_EQ(a.stats().stale, n);
  EXPECT_EQ(a.stats().done, 0);
  EXPECT_EQ(JobsInState(kDone), n);
  EXPECT_EQ(Int("SELECT count(*) FROM results"), n);
  EXPECT_EQ(DuplicatedResults(), 0);
  EXPECT_EQ(Int("SELECT count(*) FROM results WHERE json_extract(result, '$.by') = 'B'"), n);
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE lease_token IS NOT NULL"), 0);
  // A's artifacts went with its results; B's, the ones the results name, are all there.
  stage_->artifact_dir.clear();
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path()))
    if (e.path().extension() == ".txt") {
      ++files;
      EXPECT_EQ(ReadFile(e.path().string()), "B") << e.path();
    }
  EXPECT_EQ(files, n);
  for (const std::string& a : QueryRows(db_, "SELECT value FROM results, json_each(results.artifacts)"))
    EXPECT_TRUE(std::filesystem::exists(a)) << a;
}

TEST_F(WorkerTest, HeartbeatsKeepTheLeaseWhileAJobRunsLongerThanTheLease) {
  // The control for the test above: the same set-up with heartbeats working. The stores'
  // clock is a ManualClock that moves a third of a lease only after a heartbeat was seen:
  // A's first job lasts three lease lengths on it, and B, polling all along, never gets a
  // job. The heartbeat thread's own wall-clock period then only sets the test's pace, so
  // a loaded machine cannot make it fail (with real time it raced 300 ms heartbeats
  // against a 900 ms lease under ctest -j2).
  const int64_t lease = 900;
  const int n = 4;
  ManualClock clock;
  auto store_a = Open(&clock);
  auto hb_real = Open(&clock);
  auto store_b = Open(&clock);
  ASSERT_NE(store_a, nullptr);
  ASSERT_NE(hb_real, nullptr);
  ASSERT_NE(store_b, nullptr);
  EnqueueImages(*store_a, n);
  FaultyJobStore hb_a(hb_real.get());  // counts, forwards

  Worker b(store_b.get(), nullptr, &registry_, &clock, Options("B", n, lease), &stop_);
  std::unique_ptr<WorkerThread> b_thread;
  stage_->OnRun([&](const ClaimedJob&) {
    if (t_worker != "A" || b_thread) return;
    b_thread = std::make_unique<WorkerThread>(&b, "B");
    // A heartbeat seen, then a third of a lease passes: a lease renewed at time t is never
    // looked at past t + 2/3 lease (the next step waits for the next heartbeat's call,
    // which comes after this one's write).
    for (int step = 0; step < 9; ++step) {
      const int seen = hb_a.heartbeat_calls.load();
      ASSERT_TRUE(WaitUntil([&] { return hb_a.heartbeat_calls.load() > seen; }))
          << "no heartbeat in 60 s";
      clock.Advance(lease / 3);
    }
  });

  t_worker = "A";
  Worker a(store_a.get(), &hb_a, &registry_, &clock, Options("A", n, lease), &stop_);
  Status sa = a.Run();
  t_worker = "?";
  ASSERT_NE(b_thread, nullptr);
  ASSERT_TRUE(b_thread->WaitFor(std::chrono::seconds(20)));
  b_thread->Join();
  stage_->OnRun(nullptr);

  ASSERT_TRUE(sa.ok()) << sa.ToString();
  EXPECT_GE(hb_a.heartbeat_calls.load(), 9);
  EXPECT_EQ(a.stats().done, n);
  EXPECT_EQ(a.stats().stale, 0);
  EXPECT_EQ(b.stats().done, 0);
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE attempts <> 1"), 0);
  EXPECT_EQ(Int("SELECT count(*) FROM job_errors"), 0);
}

TEST_F(WorkerTest, StopMidBatchFinishesTheJobInHandReleasesTheRestAndReturnsAborted) {
  ManualClock clock;
  auto store = OpenWith(15, &clock);
  ASSERT_NE(store, nullptr);
  int seen = 0;
  stage_->OnRun([&](const ClaimedJob&) {
    if (++seen == 3) stop_ = true;  // a signal arrives while the third job runs
  });

  Worker worker(store.get(), nullptr, &registry_, &clock, Options("w1", 10), &stop_);
  Status s = worker.Run();
  stage_->OnRun(nullptr);

  EXPECT_TRUE(s.IsAborted()) << s.ToString();
  EXPECT_EQ(stage_->calls(), 3);
  EXPECT_EQ(worker.stats().done, 3);  // the job in hand was finished and recorded
  EXPECT_EQ(worker.stats().released, 7);
  EXPECT_EQ(worker.stats().batches, 1);
  EXPECT_EQ(JobsInState(kDone), 3);
  EXPECT_EQ(Int("SELECT count(*) FROM results"), 3);
  // The other 7 of the batch are back to pending without an attempt spent or a
  // lease left behind; the 5 never claimed are untouched.
  EXPECT_EQ(JobsInState(kPending), 12);
  EXPECT_EQ(JobsInState(kRunning), 0);
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE state = 0 AND attempts = 0"
                " AND lease_token IS NULL AND lease_owner IS NULL"), 12);

  // A later worker picks them up at once and finishes them.
  stop_ = false;
  Worker again(store.get(), nullptr, &registry_, &clock, Options("w2", 10), &stop_);
  ASSERT_TRUE(again.Run().ok());
  EXPECT_EQ(JobsInState(kDone), 15);
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE attempts <> 1"), 0);
}

TEST_F(WorkerTest, StopBeforeTheFirstJobReleasesTheWholeClaimedBatch) {
  ManualClock clock;
  auto real = OpenWith(6, &clock);
  ASSERT_NE(real, nullptr);
  // The stop arrives between the claim and the first job: a Claim wrapper sets it.
  class StopOnClaim : public FaultyJobStore {
   public:
    StopOnClaim(JobStore* r, std::atomic<bool>* stop) : FaultyJobStore(r), stop_(stop) {}
    Result<std::vector<ClaimedJob>> ClaimItems(const std::string& w, const std::vector<std::string>& s,
                                               int items, int64_t lease_ms) override {
      auto r = FaultyJobStore::ClaimItems(w, s, items, lease_ms);
      *stop_ = true;
      return r;
    }
    std::atomic<bool>* stop_;
  } store(real.get(), &stop_);

  Worker worker(&store, nullptr, &registry_, &clock, Options("w1", 4), &stop_);
  Status s = worker.Run();
  EXPECT_TRUE(s.IsAborted()) << s.ToString();
  EXPECT_EQ(stage_->calls(), 0);
  EXPECT_EQ(worker.stats().released, 4);
  EXPECT_EQ(store.complete_calls.load(), 0);  // nothing to record
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE state = 0 AND attempts = 0"), 6);
}

TEST_F(WorkerTest, ClaimErrorIsReturned) {
  ManualClock clock;
  auto real = OpenWith(2, &clock);
  ASSERT_NE(real, nullptr);
  FaultyJobStore store(real.get());
  store.fail_next_claim = 1;
  Worker worker(&store, nullptr, &registry_, &clock, Options("w1", 4), &stop_);
  Status s = worker.Run();
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(stage_->calls(), 0);
  EXPECT_EQ(JobsInState(kPending), 2);
}

}  // namespace
}  // namespace framemill::testing
