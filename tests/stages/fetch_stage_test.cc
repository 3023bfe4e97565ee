// The fetch stage through the real job store, against tests/fetch/fault_server.py on
// 127.0.0.1: each fault ends in the right state and error class, transient ones are
// retried (after the server's Retry-After at least), permanent ones never, and a
// fetched URL's media job is claimable with the downloaded file as its source.
#include "stages/fetch_stage.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/clock.h"
#include "jobs/retry_policy.h"
#include "jobs/stage_graph.h"
#include "storage/job_store.h"
#include "tests/support/fault_server.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {
namespace fs = std::filesystem;

class FetchStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<FaultServer>(dir_ / "server.log");
    ASSERT_GT(server_->port(), 0) << "fault_server.py did not print its port";
    std::string err;
    for (const char* name : {"fetch", "look"}) {
      StageSpec spec;
      spec.name = name;
      spec.downloads = spec.name == FetchStage::kName;
      ASSERT_TRUE(graph_.Add(spec, &err)) << err;
    }
    db_ = dir_ / "jobs.db";
    store_ = std::move(OpenSqliteJobStore(db_, &graph_, &clock_)).value();
  }
  std::string Url(const std::string& path) const { return server_->Url(path); }
  int Requests(const std::string& path) const { return server_->Requests(path); }
  std::string Col(const std::string& url, const std::string& stage, const std::string& col) {
    auto rows = QueryRows(db_, "SELECT coalesce(" + col + ", '') FROM jobs WHERE stage = '" +
                                   stage + "' AND item_id = (SELECT id FROM items WHERE source = '" +
                                   url + "')");
    return rows.empty() ? "<none>" : rows[0];
  }

  TempDir dir_;
  std::unique_ptr<FaultServer> server_;
  std::string db_;
  ManualClock clock_;
  StageGraph graph_;
  std::unique_ptr<JobStore> store_;
};

TEST_F(FetchStageTest, EveryFaultEndsInTheRightStateAndClassAndPermanentOnesAreNotRetried) {
  fetch::FetchOptions fo;
  fo.connect_timeout_ms = 2000;
  fo.total_timeout_ms = 1500;
  fo.max_bytes = 200'000;  // messi5.jpg (73 KB) fits, /big (303 KB) does not
  fo.out_dir = dir_ / "out";
  fo.block_private = false;  // the fault server is on 127.0.0.1
  FetchStage stage(fo);
  RetryPolicy retry;  // the worker's decision, with a short backoff
  retry.base_delay_ms = 100;
  retry.max_delay_ms = 100;
  struct Case {
    std::string path, state, error_class;
  };
  // state: done / failed; class of the final failure.
  const std::vector<Case> cases = {
      {"/img/messi5.jpg", "2", ""},
      {"/img/messi5.jpg?copy", "2", ""},  // same bytes, another URL
      {"/404", "3", "http_status"},
      {"/500-then-200/a", "2", ""},
      {"/429/a", "2", ""},
      {"/slow", "3", "timeout"},
      {"/cut", "3", "transfer"},
      {"/big", "3", "too_large"},
      {"/loop", "3", "http_status"},
      {"/to-file", "3", "bad_url"},
      {"/html-as-jpeg", "3", "not_media"},
  };
  std::vector<NewItem> items;
  for (const Case& c : cases) {
    NewItem it;
    it.source = Url(c.path);
    it.is_url = true;
    it.media_info = R"({"metadata":{"caption":"x"}})";
    items.push_back(it);
  }
  EnqueueOptions eo;
  eo.stages = {"look"};
  eo.max_attempts = 3;
  ASSERT_TRUE(store_->Enqueue(items, eo).ok());

  // Rounds of claim -> RunBatch -> complete, as a worker does, with the clock moved on
  // past every backoff between rounds.
  const int64_t start = clock_.NowMs();
  int rounds = 0;
  for (; rounds < 10; ++rounds) {
    auto jobs = store_->Claim("w", {"fetch"}, 64, 60'000);
    ASSERT_TRUE(jobs.ok());
    if (jobs->empty()) {
      auto left = store_->CountOutstanding({"fetch"});
      if (left->pending == 0) break;
      clock_.Advance(1'000);
      continue;
    }
    auto outs = stage.RunBatch(*jobs, StageContext{});
    ASSERT_EQ(outs.size(), jobs->size());
    for (size_t i = 0; i < outs.size(); ++i)
      EXPECT_EQ(outs[i].fetched.has_value(), outs[i].done()) << (*jobs)[i].source;
    std::vector<FinishedJob> cs;
    for (size_t i = 0; i < outs.size(); ++i) {
      const ClaimedJob& job = (*jobs)[i];
      const int64_t retry_at =
          outs[i].failed() ? retry.RetryAt(job, outs[i], clock_.NowMs(), 0.5) : 0;
      cs.push_back({job.id, job.lease_token, outs[i], retry_at});
    }
    ASSERT_TRUE(store_->Complete(cs).ok());
  }
  for (const Case& c : cases) {
    EXPECT_EQ(Col(Url(c.path), "fetch", "state"), c.state) << c.path;
    EXPECT_EQ(Col(Url(c.path), "fetch", "error_class"), c.error_class) << c.path;
    // Media jobs: claimable after a fetch, skipped after a failed one.
    EXPECT_EQ(Col(Url(c.path), "look", "state"), c.state == "2" ? "0" : "4") << c.path;
  }
  // Permanent failures were asked for once; transient ones until they succeeded or ran
  // out of attempts.
  EXPECT_EQ(Requests("/404"), 1);
  EXPECT_EQ(Requests("/html-as-jpeg"), 1);
  EXPECT_EQ(Requests("/to-file"), 1);
  EXPECT_EQ(Requests("/big"), 1);
  EXPECT_EQ(Requests("/500-then-200/a"), 2);
  EXPECT_EQ(Requests("/429/a"), 2);
  EXPECT_EQ(Requests("/slow"), 3);
  EXPECT_EQ(Requests("/cut"), 3);
  // The 429's Retry-After (1 s) held the retry back although our backoff was 100 ms.
  auto retried_at = QueryInt(db_, "SELECT min(at) FROM job_errors WHERE error_class = 'http_status'"
                                  " AND message LIKE '%429%'");
  EXPECT_GE(retried_at, start);
  EXPECT_GE(QueryInt(db_, "SELECT max(started_at) FROM jobs WHERE stage = 'fetch' AND item_id ="
                          " (SELECT id FROM items WHERE source = '" + Url("/429/a") + "')"),
            retried_at + 1000);

  // The downloaded ones: stored once by content, the item's source for its media jobs.
  auto look = store_->Claim("w", {"look"}, 64, 60'000);
  ASSERT_TRUE(look.ok());
  ASSERT_EQ(look->size(), 4u);
  std::set<std::string> paths;
  for (const ClaimedJob& j : *look) {
    EXPECT_TRUE(fs::exists(j.source)) << j.source;
    EXPECT_EQ(j.source.rfind(dir_ / "out/fetched/", 0), 0u) << j.source;
    EXPECT_EQ(j.kind, MediaKind::kImage);
    EXPECT_EQ(nlohmann::json::parse(j.media_info)["format"], "jpeg");
    paths.insert(j.source);
  }
  EXPECT_EQ(paths.size(), 1u);  // all four are messi5.jpg
  EXPECT_EQ(ReadFile(*paths.begin()), ReadFile(SampleData("messi5.jpg")));
  auto result = nlohmann::json::parse(QueryRows(
      db_, "SELECT r.result FROM results r JOIN jobs j ON j.id = r.job_id JOIN items i ON"
           " i.id = j.item_id WHERE i.source = '" + Url("/img/messi5.jpg") + "'")[0]);
  EXPECT_EQ(result["url"], Url("/img/messi5.jpg"));
  EXPECT_EQ(result["http_status"], 200);
  EXPECT_EQ(result["media"], "image");
  EXPECT_EQ(result["metadata"]["caption"], "x");
  EXPECT_EQ(result["bytes"].get<int64_t>(), static_cast<int64_t>(fs::file_size(SampleData("messi5.jpg"))));
}

}  // namespace
}  // namespace framemill::testing
