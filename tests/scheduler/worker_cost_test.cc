// Claims sized by the work they hold (scheduler/cost_model.h): a claim stops at its cost
// target, and a batch that ran past it gives its unstarted jobs back to an idle worker,
// each job still done exactly once. On a real SQLite store, with a ManualClock that each
// job moves by its cost.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "base/clock.h"
#include "scheduler/cost_model.h"
#include "scheduler/worker.h"
#include "stages/registry.h"
#include "storage/job_store.h"
#include "tests/scheduler/fake_items.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

constexpr char kTimedStage[] = "timed";

// A per-job stage whose every job costs `ms` on the clock; before each job it calls `hook`.
class TimedStage : public Stage {
 public:
  explicit TimedStage(ManualClock* clock) : clock_(clock) { spec_.name = kTimedStage; }
  const StageSpec& spec() const override { return spec_; }
  bool RunsJobsTogether(const StageContext&) const override { return false; }
  std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>& jobs, const StageContext&) override {
    std::vector<Outcome> out;
    for (const ClaimedJob& j : jobs) {
      std::function<void(const ClaimedJob&)> hook;
      {
        std::lock_guard<std::mutex> l(mu);
        hook = on_run;
      }
      if (hook) hook(j);
      clock_->Advance(ms);
      out.push_back(Outcome::Done({{"n", j.id}}));
    }
    return out;
  }
  std::atomic<int64_t> ms{1000};
  std::mutex mu;
  std::function<void(const ClaimedJob&)> on_run;

 private:
  ManualClock* clock_;
  StageSpec spec_;
};

class WorkerCostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto stage = std::make_unique<TimedStage>(&clock_);
    stage_ = stage.get();
    std::string err;
    ASSERT_TRUE(registry_.Add(std::move(stage), &err)) << err;
    db_ = dir_ / "jobs.db";
  }
  std::unique_ptr<JobStore> Open() {
    auto s = OpenSqliteJobStore(db_, &registry_.graph(), &clock_, StoreOptions{});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  void Enqueue(JobStore& store, int n, MediaKind kind) {
    std::vector<NewItem> items;
    for (int i = 0; i < n; ++i) {
      NewItem it = testing::FakeImage(i);
      it.source = "/data/clip-" + std::to_string(i) + (kind == MediaKind::kVideo ? ".mp4" : ".png");
      it.kind = kind;
      it.size = 1 << 20;
      items.push_back(it);
    }
    EnqueueOptions eo;
    eo.stages = {kTimedStage};
    ASSERT_TRUE(store.Enqueue(items, eo).ok());
  }
  WorkerOptions Options(const std::string& id, int batch) {
    WorkerOptions o;
    o.id = id;
    o.stages = {kTimedStage};
    o.batch = batch;
    o.poll_ms = 20;
    o.check_files = false;
    o.claim_target_ms = 3000;
    return o;
  }
  long long Int(const std::string& sql) { return QueryInt(db_, sql); }

  TempDir dir_;
  std::string db_;
  ManualClock clock_;
  StageRegistry registry_;
  TimedStage* stage_ = nullptr;
  std::atomic<bool> stop_{false};
};

TEST(CostModelTest, MediansPerStageAndKindAndVideosByMegabyte) {
  CostModel m;
  EXPECT_EQ(m.ExpectedMs("motion", MediaKind::kImage, 0), 0.0) << "an image with no history is cheap";
  EXPECT_EQ(m.ExpectedMs("motion", MediaKind::kVideo, 1 << 20), CostModel::kUnknown);
  // Newest first: 4000 ms on 2 MB, then 1000 ms on 1 MB and 3000 ms on 1 MB (2000 ms/MB median).
  m.Learn({{"motion", MediaKind::kVideo, 4000, -1, 2 << 20}, {"motion", MediaKind::kVideo, 1000, -1, 1 << 20},
           {"motion", MediaKind::kVideo, 3000, -1, 1 << 20}, {"faces", MediaKind::kImage, 40, -1, 1000}});
  EXPECT_DOUBLE_EQ(m.ExpectedMs("motion", MediaKind::kVideo, 3 << 20), 6000.0);
  EXPECT_DOUBLE_EQ(m.ExpectedMs("motion", MediaKind::kVideo, 0), 3000.0) << "no size: the median per job";
  EXPECT_DOUBLE_EQ(m.ExpectedMs("faces", MediaKind::kImage, 1000), 40.0);
  EXPECT_DOUBLE_EQ(m.MedianMs("lighting", MediaKind::kImage), -1.0);
}

// Times are kept apart by where the jobs ran. A worker on the CPU leaves a stage to the
// device workers when one of them would finish its job sooner, the wait for it included:
// with a short queue the slow-on-the-CPU stage goes to the device; with a long one, the CPU
// helps; a stage the CPU does as fast stays; a stage with one history only stays.
TEST(CostModelTest, TheCpuLeavesTheDeviceTheJobsItWouldFinishSooner) {
  auto t = [](const char* stage, int64_t ms, const char* device) {
    JobTime j{stage, MediaKind::kImage, ms, -1, 0};
    j.device = device;
    return j;
  };
  CostModel m;
  m.Learn({t("faces", 500, "cpu"), t("faces", 20, "cuda:0"), t("lighting", 3, "cpu"), t("lighting", 2, "cuda:0"),
           t("pose", 60, "cpu")});
  EXPECT_DOUBLE_EQ(m.MedianMs("faces", MediaKind::kImage, Ran::kCpu), 500);
  EXPECT_DOUBLE_EQ(m.MedianMs("faces", MediaKind::kImage, Ran::kDevice), 20);
  EXPECT_DOUBLE_EQ(m.ExpectedMs("pose", MediaKind::kImage, 0, Ran::kDevice), 60) << "no device history: every job's";
  const std::vector<std::string> stages = {"faces", "lighting", "pose"};
  // 40 jobs queued for 4 device workers at 11 ms each (the device's mean): 110 ms of wait.
  EXPECT_EQ(m.StagesForTheDevice(stages, 40, 4), std::set<std::string>{"faces"});
  // 4,000 queued: a device worker reaches a job queued now in 11 s; the CPU does it in 0.5 s.
  EXPECT_TRUE(m.StagesForTheDevice(stages, 4000, 4).empty());
  EXPECT_TRUE(m.StagesForTheDevice(stages, 40, 0).empty()) << "no device worker in the run";
}

TEST(CostModelTest, KeepWithinTargetKeepsWhileTheKeptAreUnderIt) {
  EXPECT_EQ(KeepWithinTarget({1000, 1000, 1000, 1000}, 2500), 3u);
  EXPECT_EQ(KeepWithinTarget({1000, 1000, 1000, 1000}, 3000), 3u);
  EXPECT_EQ(KeepWithinTarget({CostModel::kUnknown, 0, 0}, 3000), 1u) << "an unknown video alone";
  EXPECT_EQ(KeepWithinTarget({0, 0, CostModel::kUnknown, 0}, 3000), 3u);
  EXPECT_EQ(KeepWithinTarget(std::vector<double>(16, 50.0), 3000), 16u) << "cheap photos: the whole batch";
  EXPECT_EQ(KeepWithinTarget({}, 3000), 0u);
  EXPECT_EQ(KeepWithinTarget({90000}, 3000), 1u) << "at least one";
}

TEST(CostModelTest, MediaSecondsFromTheResultsMedia) {
  EXPECT_DOUBLE_EQ(MediaSecondsOf({{"media", {{"frames", 250}, {"fps", 25.0}}}}), 10.0);
  EXPECT_EQ(MediaSecondsOf({{"media", {{"kind", "image"}}}}), -1);
  EXPECT_EQ(MediaSecondsOf(nlohmann::json::array()), -1);
}

// 20 videos of 1 s each (on the clock), batch 8, target 3 s: with no history a video is
// claimed alone; once one is timed, a claim holds three (0, 1 and 2 s kept before the
// fourth); at the end (a claim short of its limit) one at a time. Each job's own time is
// recorded with its result.
TEST_F(WorkerCostTest, AClaimStopsAtItsCostTarget) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  Enqueue(*store, 20, MediaKind::kVideo);
  std::vector<long long> held;  // running jobs when each job starts: the batch's unstarted
  {
    std::lock_guard<std::mutex> l(stage_->mu);
    stage_->on_run = [&](const ClaimedJob&) { held.push_back(Int("SELECT count(*) FROM jobs WHERE state = 1")); };
  }
  Worker w(store.get(), nullptr, &registry_, &clock_, Options("w1", 8), &stop_);
  ASSERT_TRUE(w.Run().ok());
  ASSERT_EQ(held.size(), 20u);
  EXPECT_EQ(held[0], 1) << "a video with no history fills a claim alone";
  EXPECT_EQ(held[1], 3) << "1 s each against 3 s: three kept";
  EXPECT_EQ(*std::max_element(held.begin(), held.end()), 3);
  EXPECT_GT(w.stats().trimmed, 0);
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE state = 2"), 20);
  EXPECT_EQ(Int("SELECT count(*) FROM results WHERE run_ms = 1000"), 20) << "each job's own time";
  EXPECT_EQ(Int("SELECT count(DISTINCT started_at) FROM results"), 20);
  EXPECT_EQ(Int("SELECT sum(attempts) FROM jobs"), 20) << "a trimmed claim spends no attempt";
}

// Worker A claims four photos (cheap with no history: the whole batch), and its first job
// runs 5 s on the clock, past the 3 s target, while nothing else is pending. Before its
// second job A gives the three back; idle worker B takes them. Every job once, one result.
TEST_F(WorkerCostTest, UnstartedJobsOfALongBatchAreTakenOverByAnIdleWorker) {
  auto store_a = Open(), store_b = Open();
  ASSERT_NE(store_a, nullptr);
  Enqueue(*store_a, 4, MediaKind::kImage);
  std::promise<void> a_started, go;
  std::shared_future<void> go_f = go.get_future().share();
  std::mutex who_mu;
  std::map<int64_t, std::vector<std::string>> ran_by;
  thread_local std::string t_id;
  {
    std::lock_guard<std::mutex> l(stage_->mu);
    stage_->on_run = [&](const ClaimedJob& j) {
      {
        std::lock_guard<std::mutex> l2(who_mu);
        ran_by[j.id].push_back(t_id);
      }
      if (t_id == "A" && j.id == 1) {
        a_started.set_value();
        go_f.wait();
        stage_->ms = 5000;  // this job: past the target
      } else {
        stage_->ms = 10;
      }
    };
  }
  std::atomic<bool> stop_a{false}, stop_b{false};
  WorkerOptions oa = Options("A", 4);
  oa.give_back_pause_ms = 60'000;  // A leaves what it gave back to B (a stop ends its wait)
  Worker a(store_a.get(), nullptr, &registry_, &clock_, oa, &stop_a);
  Worker b(store_b.get(), nullptr, &registry_, &clock_, Options("B", 4), &stop_b);
  Status sa, sb;
  std::thread ta([&] { t_id = "A"; sa = a.Run(); });
  a_started.get_future().wait();
  std::thread tb([&] { t_id = "B"; sb = b.Run(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // B finds all four held
  go.set_value();
  for (int i = 0; i < 500 && Int("SELECT count(*) FROM jobs WHERE state = 2") < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stop_a = true;
  tb.join();
  ta.join();
  EXPECT_TRUE(sb.ok()) << sb.ToString();
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE state = 2"), 4);
  EXPECT_EQ(Int("SELECT count(*) FROM results"), 4);
  EXPECT_EQ(a.stats().given_back, 3);
  EXPECT_EQ(b.stats().done, 3) << "the idle worker took the three A had not started";
  EXPECT_EQ(a.stats().stale + b.stats().stale, 0);
  for (const auto& [id, by] : ran_by) EXPECT_EQ(by.size(), 1u) << "job " << id << " ran twice";
  EXPECT_EQ(Int("SELECT sum(attempts) FROM jobs"), 4) << "giving back spends no attempt";
}

}  // namespace
}  // namespace framemill::testing
