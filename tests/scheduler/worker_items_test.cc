// A worker's claims by item (JobStore::ClaimItems, issue 38), against a real SQLite store
// and real photos: an item's stages run on one worker, which decodes its picture once for
// all of them. On the CPU the stages of one item run back to back; on a device (the
// simulated one) stage by stage, each as one batch, with the pictures decoded ahead.
#include "scheduler/worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "base/clock.h"
#include "gpu/batch_tuner.h"
#include "gpu/oom_ladder.h"
#include "stages/registry.h"
#include "storage/job_store.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

// A stage that reads each image job's picture (as the neural stages do) and records the
// order its jobs came in, in a log shared by the stages.
class PictureStage : public Stage {
 public:
  PictureStage(std::string name, std::vector<std::pair<std::string, int64_t>>* log, std::mutex* mu)
      : log_(log), mu_(mu) {
    spec_.name = std::move(name);
  }
  const StageSpec& spec() const override { return spec_; }
  bool ReadsPictures() const override { return true; }
  std::vector<Outcome> RunBatch(const std::vector<ClaimedJob>& jobs, const StageContext& ctx) override {
    std::vector<Outcome> out;
    for (const ClaimedJob& j : jobs) {
      {
        std::lock_guard<std::mutex> l(*mu_);
        log_->emplace_back(spec_.name, j.item_id);
      }
      auto picture = ReadPicture(ctx, j, ImageLimits{});
      out.push_back(picture.ok() ? Outcome::Done({{"width", picture->cols}}) : Outcome::Failed(picture.status()));
    }
    return out;
  }

 private:
  StageSpec spec_;
  std::vector<std::pair<std::string, int64_t>>* log_;
  std::mutex* mu_;
};

class WorkerItemsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    for (const char* name : {"first", "second"})
      ASSERT_TRUE(registry_.Add(std::make_unique<PictureStage>(name, &log_, &mu_), &err)) << err;
    auto s = OpenSqliteJobStore(dir_ / "jobs.db", &registry_.graph(), SystemClock());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    std::vector<NewItem> items;
    for (const std::string& path : MakeRealImages(dir_.path(), kItems, 400)) {
      NewItem it;
      it.source = path;
      it.kind = MediaKind::kImage;
      it.size = 1000;
      it.content_hash = path;
      items.push_back(it);
    }
    EnqueueOptions eo;
    eo.stages = {"first", "second"};
    ASSERT_TRUE(store_->Enqueue(items, eo).ok());
  }
  WorkerStats Drain(gpu::OomLadder* ladder) {
    WorkerOptions o;
    o.id = "w1";
    o.stages = {"first", "second"};
    o.batch = 3;  // items a claim takes
    o.claim_target_ms = 0;
    o.poll_ms = 20;
    o.ladder = ladder;
    std::atomic<bool> stop{false};
    Worker w(store_.get(), nullptr, &registry_, SystemClock(), o, &stop);
    EXPECT_TRUE(w.Run().ok());
    EXPECT_EQ(QueryInt(dir_ / "jobs.db", "SELECT count(*) FROM jobs WHERE state = 2"), 2 * kItems);
    return w.stats();
  }
  // Whether every claim of 3 items ran `first` on all of them before any `second`.
  bool StageByStage() const {
    for (size_t k = 0; k + 1 < log_.size(); ++k)
      if (k % 6 < 3 && log_[k].first != "first") return false;
    return true;
  }

  static constexpr int kItems = 6;
  TempDir dir_;
  StageRegistry registry_;
  std::unique_ptr<JobStore> store_;
  std::mutex mu_;
  std::vector<std::pair<std::string, int64_t>> log_;
};

TEST_F(WorkerItemsTest, OnTheCpuAnItemsStagesRunTogetherOnOneDecode) {
  const WorkerStats st = Drain(nullptr);
  EXPECT_EQ(st.batches, 2) << "two claims of three items, each with both their jobs";
  EXPECT_EQ(st.pictures_decoded, kItems) << "one decode per photo";
  EXPECT_EQ(st.pictures_reused, kItems) << "the second stage reads the first one's";
  ASSERT_EQ(log_.size(), 2u * kItems);
  for (size_t k = 0; k < log_.size(); k += 2) {  // item by item: first, then second, same item
    EXPECT_EQ(log_[k].first, "first");
    EXPECT_EQ(log_[k + 1].first, "second");
    EXPECT_EQ(log_[k].second, log_[k + 1].second);
  }
}

TEST_F(WorkerItemsTest, OnADeviceEachStageRunsItsItemsAsOneBatchOnPicturesDecodedAhead) {
  auto sim = gpu::MakeSimBackend(1024);
  auto cpu = gpu::MakeCpuBackend();
  gpu::BatchTuner tuner({}, nullptr);
  gpu::OomLadder ladder(sim.get(), cpu.get(), &tuner, SystemClock(), {});
  const WorkerStats st = Drain(&ladder);
  EXPECT_EQ(st.pictures_decoded, kItems);
  EXPECT_GE(st.pictures_reused, kItems) << "the second stage reads the first one's, at least";
  EXPECT_TRUE(StageByStage());
}

}  // namespace
}  // namespace framemill::testing
