// The worker's per-stage batch sizes (WorkerOptions::batch_by_stage) against a real
// SQLite job store: a stage with its own larger batch gets groups of that size from a
// claim of the run's batch, a smaller one is cut to its size, others keep the run's.
#include "scheduler/worker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "base/clock.h"
#include "stages/registry.h"
#include "storage/job_store.h"
#include "tests/scheduler/fake_items.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

// A real stage that records the size of every batch the worker hands it.
class BatchRecordingStage : public Stage {
 public:
  explicit BatchRecordingStage(std::string name) { spec_.name = std::move(name); }
  const StageSpec& spec() const override { return spec_; }
  std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>& jobs,
                                const StageContext& ctx) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      sizes_.push_back(static_cast<int>(jobs.size()));
    }
    std::vector<Outcome> out;
    for (const ClaimedJob& job : jobs) {
      if (ctx.stopped()) break;
      out.push_back(Outcome::Done({{"n", job.id}}));
    }
    return out;
  }
  std::vector<int> sizes() const {
    std::lock_guard<std::mutex> l(mu_);
    return sizes_;
  }

 private:
  StageSpec spec_;
  mutable std::mutex mu_;
  std::vector<int> sizes_;
};

class WorkerBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    auto wide = std::make_unique<BatchRecordingStage>("wide");
    wide_ = wide.get();
    ASSERT_TRUE(registry_.Add(std::move(wide), &err)) << err;
    auto narrow = std::make_unique<BatchRecordingStage>("narrow");
    narrow_ = narrow.get();
    ASSERT_TRUE(registry_.Add(std::move(narrow), &err)) << err;
    auto plain = std::make_unique<BatchRecordingStage>("plain");
    plain_ = plain.get();
    ASSERT_TRUE(registry_.Add(std::move(plain), &err)) << err;
    auto s = OpenSqliteJobStore(dir_ / "jobs.db", &registry_.graph(), SystemClock());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    EnqueueOptions eo;
    eo.stages = {"wide", "narrow", "plain"};
    auto st = store_->Enqueue(testing::FakeImages(kItems), eo);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    ASSERT_EQ(st->jobs_added, 3 * kItems);
  }

  // Drains every job with one worker; returns its stats.
  WorkerStats Drain(std::map<std::string, int> batch_by_stage,
                    std::vector<std::string> stages = {"wide", "narrow", "plain"}) {
    WorkerOptions o;
    o.id = "w1";
    o.stages = stages;
    o.batch = kRunBatch;
    o.batch_by_stage = std::move(batch_by_stage);
    o.poll_ms = 20;
    o.check_files = false;  // the recording stages read no files: sources are names only
    std::atomic<bool> stop{false};
    Worker w(store_.get(), nullptr, &registry_, SystemClock(), o, &stop);
    Status s = w.Run();
    EXPECT_TRUE(s.ok()) << s.ToString();
    for (const std::string& stage : stages)
      EXPECT_EQ(QueryInt(dir_ / "jobs.db", "SELECT count(*) FROM jobs WHERE state <> 2"
                                           " AND stage = '" + stage + "'"), 0) << stage;
    return w.stats();
  }
  static int Sum(const std::vector<int>& v) {
    int n = 0;
    for (int x : v) n += x;
    return n;
  }
  static int Max(const std::vector<int>& v) {
    return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
  }

  static constexpr int kItems = 100, kRunBatch = 8;
  TempDir dir_;
  StageRegistry registry_;
  std::unique_ptr<JobStore> store_;
  BatchRecordingStage* wide_ = nullptr;
  BatchRecordingStage* narrow_ = nullptr;
  BatchRecordingStage* plain_ = nullptr;
};

TEST_F(WorkerBatchTest, WithoutPerStageSizesEveryStageGetsAtMostTheRunsBatch) {
  Drain({});
  for (BatchRecordingStage* s : {wide_, narrow_, plain_}) {
    EXPECT_EQ(Sum(s->sizes()), kItems) << s->spec().name;
    EXPECT_LE(Max(s->sizes()), kRunBatch) << s->spec().name;
  }
}

TEST_F(WorkerBatchTest, AStageWithItsOwnSizeIsToppedUpOrCutToIt) {
  const WorkerStats st = Drain({{"wide", 32}, {"narrow", 3}});
  EXPECT_EQ(st.done, 3 * kItems);
  EXPECT_EQ(st.released, 0);
  EXPECT_EQ(Sum(wide_->sizes()), kItems);
  EXPECT_EQ(Max(wide_->sizes()), 32);  // a claim of 8 reached it and was topped up
  EXPECT_EQ(Sum(narrow_->sizes()), kItems);
  EXPECT_EQ(Max(narrow_->sizes()), 3);
  EXPECT_EQ(Sum(plain_->sizes()), kItems);
  EXPECT_LE(Max(plain_->sizes()), kRunBatch);
}

TEST_F(WorkerBatchTest, AClaimFullOfOneStageIsCutToThatStagesSmallerSize) {
  Drain({{"narrow", 3}}, {"narrow"});
  EXPECT_EQ(Sum(narrow_->sizes()), kItems);
  EXPECT_EQ(Max(narrow_->sizes()), 3);  // claims of 8, handed over 3 at a time
  EXPECT_TRUE(wide_->sizes().empty());
}

}  // namespace
}  // namespace framemill::testing
