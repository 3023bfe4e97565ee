#include "storage/sql_job_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "base/clock.h"
#include "jobs/clip_totals.h"
#include "jobs/retry_policy.h"
#include "jobs/stage_graph.h"
#include "storage/migrations.h"
#include "storage/pg_db.h"
#include "storage/sqlite_db.h"
#include "tests/storage/storage_test_util.h"
#include "tests/support/pg_server.h"

namespace framemill {
namespace {

using testing_util::Inspector;
using testing_util::Must;
using testing_util::TempDir;

constexpr int kPending = 0, kRunning = 1, kDone = 2, kFailed = 3, kSkipped = 4, kWaiting = 5;
constexpr int64_t kLease = 60'000;

NewItem Image(const std::string& source, const std::string& hash = "h1") {
  NewItem it;
  it.source = source;
  it.kind = MediaKind::kImage;
  it.size = 100;
  it.mtime_ns = 1;
  it.content_hash = hash;
  it.media_info = R"({"format":"png"})";
  return it;
}

NewItem Video(const std::string& source, const std::string& hash = "v1") {
  NewItem it = Image(source, hash);
  it.kind = MediaKind::kVideo;
  it.media_info = R"({"format":"mp4"})";
  return it;
}

std::vector<NewItem> Images(int n, const std::string& prefix = "/data/img") {
  std::vector<NewItem> out;
  for (int i = 0; i < n; ++i) out.push_back(Image(prefix + std::to_string(i) + ".png"));
  return out;
}

std::string Q(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// Every test runs on both stores: SQLite, and a real PostgreSQL server started for the
// test process (tests/support/pg_server.h), each test in a database of its own. Time is
// the test's ManualClock on both (StoreOptions::server_time = false).
class JobStoreTest : public ::testing::TestWithParam<SqlDialect> {
 protected:
  void SetUp() override { path_ = NewDatabase("jobs"); }
  bool IsPg() const { return GetParam() == SqlDialect::kPostgres; }
  // A new empty store's name: a file, or a database on the test's PostgreSQL server.
  std::string NewDatabase(const std::string& name) {
    if (!IsPg()) return dir_.File(name + ".db");
    std::string why;
    auto* pg = framemill::testing::PgServer::Shared(&why);
    if (pg == nullptr) {
      ADD_FAILURE() << "PostgreSQL: " << why;
      return "postgresql://nowhere.invalid/none";
    }
    return pg->CreateDatabase();
  }

  void AddStage(StageSpec spec) {
    std::string err;
    ASSERT_TRUE(graph_.Add(std::move(spec), &err)) << err;
  }
  static StageSpec Stage(const std::string& name, std::vector<std::string> deps = {}) {
    StageSpec s;
    s.name = name;
    s.deps = std::move(deps);
    return s;
  }

  std::unique_ptr<JobStore> OpenStore(const StoreOptions& options = {}) {
    StoreOptions o = options;
    o.server_time = false;
    auto s = OpenJobStore(path_, &graph_, &clock_, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  void Open(const StoreOptions& options = {}) {
    store_ = OpenStore(options);
    ASSERT_NE(store_, nullptr);
    in_.Open(path_);
  }

  EnqueueStats Enqueue(const std::vector<NewItem>& items, std::vector<std::string> stages,
                       int max_attempts = 3, int priority = 0) {
    EnqueueOptions o;
    o.stages = std::move(stages);
    o.max_attempts = max_attempts;
    o.priority = priority;
    return Must(store_->Enqueue(items, o), "Enqueue");
  }
  std::vector<ClaimedJob> Claim(const std::string& worker, std::vector<std::string> stages,
                                int limit = 100, int64_t lease_ms = kLease,
                                JobStore* store = nullptr) {
    return Must((store ? store : store_.get())->Claim(worker, stages, limit, lease_ms), "Claim");
  }
  static FinishedJob Done(const ClaimedJob& j, const std::string& result = "{}") {
    return {j.id, j.lease_token, Outcome::Done(nlohmann::json::parse(result)), 0};
  }
  // A failure with the retry decision the worker would make (retry_, jittered).
  FinishedJob Failed(const ClaimedJob& j, Status error, std::string error_class = "",
                     int64_t retry_after_ms = -1) {
    FinishedJob f{j.id, j.lease_token,
                  Outcome::Failed(std::move(error), std::move(error_class), retry_after_ms), 0};
    const double unit = std::uniform_real_distribution<double>(0, 1)(rng_);
    f.retry_at_ms = retry_.RetryAt(j, f.outcome, clock_.NowMs(), unit);
    return f;
  }
  CompleteStats Complete(const std::vector<FinishedJob>& batch, JobStore* store = nullptr) {
    return Must((store ? store : store_.get())->Complete(batch), "Complete");
  }
  CompleteStats CompleteAllDone(const std::vector<ClaimedJob>& jobs) {
    std::vector<FinishedJob> batch;
    for (const ClaimedJob& j : jobs) batch.push_back(Done(j));
    return Complete(batch);
  }
  // Claims the single claimable job of `stage` for `source` (asserting there is one).
  ClaimedJob ClaimOne(const std::string& stage, const std::string& source,
                      const std::string& worker = "w") {
    for (const ClaimedJob& j : Claim(worker, {stage}, 1)) {
      if (j.source == source) return j;
      ADD_FAILURE() << "claimed unrelated job " << j.id << " " << j.source;
    }
    ADD_FAILURE() << "no claimable " << stage << " job for " << source;
    return {};
  }

  // --- reading the database as SQL sees it ---
  std::string JobWhere(const std::string& source, const std::string& stage) {
    return " FROM jobs WHERE stage = " + Q(stage) +
           " AND item_id = (SELECT id FROM items WHERE source = " + Q(source) + ")";
  }
  int64_t JobCol(const std::string& col, const std::string& source, const std::string& stage) {
    return in_.Int("SELECT " + col + JobWhere(source, stage));
  }
  std::string JobText(const std::string& col, const std::string& source,
                      const std::string& stage) {
    return in_.Text("SELECT " + col + JobWhere(source, stage));
  }
  int State(const std::string& source, const std::string& stage) {
    return static_cast<int>(JobCol("state", source, stage));
  }
  int64_t JobId(const std::string& source, const std::string& stage) {
    return JobCol("id", source, stage);
  }
  std::string WorkerIds() const {
    return IsPg() ? "SELECT string_agg(id, ',') FROM workers" : "SELECT group_concat(id) FROM workers";
  }
  int64_t Count(const std::string& from_where) {
    return in_.Int("SELECT count(*) FROM " + from_where);
  }
  int64_t ErrorsFor(const std::string& source, const std::string& stage) {
    return Count("job_errors WHERE job_id = " + std::to_string(JobId(source, stage)));
  }
  int64_t ResultsFor(const std::string& source, const std::string& stage) {
    return Count("results WHERE job_id = " + std::to_string(JobId(source, stage)));
  }

  TempDir dir_;
  std::string path_;
  ManualClock clock_;
  RetryPolicy retry_;  // the worker's decision, made in Failed()
  std::mt19937_64 rng_{42};
  StageGraph graph_;
  std::unique_ptr<JobStore> store_;
  Inspector in_;
};

// ============================================================ enqueue

TEST_P(JobStoreTest, EnqueueAddsEachItemWithOneJobPerStage) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  Open();
  EnqueueStats st = Enqueue(Images(3), {"a", "b"});
  EXPECT_EQ(st.items_added, 3);
  EXPECT_EQ(st.jobs_added, 6);
  EXPECT_EQ(st.items_changed + st.items_unchanged + st.jobs_requeued + st.jobs_not_applicable, 0);
  EXPECT_EQ(Count("items"), 3);
  EXPECT_EQ(Count("jobs"), 6);
  EXPECT_EQ(Count("jobs WHERE stage = 'a' AND state = 0"), 3);
  EXPECT_EQ(Count("jobs WHERE stage = 'b' AND state = 5"), 3);
  EXPECT_EQ(Count("job_deps"), 3);
  EXPECT_EQ(Must(store_->ItemCount()), 3);

  auto items = Must(store_->LoadItems());
  ASSERT_EQ(items.size(), 3u);
  const ItemRecord& r = items.at("/data/img1.png");
  EXPECT_GT(r.id, 0);
  EXPECT_EQ(r.kind, MediaKind::kImage);
  EXPECT_EQ(r.size, 100);
  EXPECT_EQ(r.mtime_ns, 1);
  EXPECT_EQ(r.content_hash, "h1");
}

TEST_P(JobStoreTest, EnqueueingTheSameItemsAgainAddsNothing) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  Open();
  Enqueue(Images(3), {"a", "b"});
  EnqueueStats st = Enqueue(Images(3), {"a", "b"});
  EXPECT_EQ(st.items_added, 0);
  EXPECT_EQ(st.items_unchanged, 3);
  EXPECT_EQ(st.items_changed, 0);
  EXPECT_EQ(st.jobs_added, 0);
  EXPECT_EQ(st.jobs_requeued, 0);
  EXPECT_EQ(Count("items"), 3);
  EXPECT_EQ(Count("jobs"), 6);
  EXPECT_EQ(Count("job_deps"), 3);
}

// Enqueue writes items, jobs and dependencies with ids it reserved, each table in one go:
// a COPY on PostgreSQL, statements of at most 1,024 rows (powers of two) on SQLite (1,000
// items: 512+256+128+64+32+8). Every job must still depend on its own item's job, no row
// may point at a row that is not there (PostgreSQL checks no foreign key at enqueue, 0010),
// and each item's jobs must be the ones DecideFirstState gives.
TEST_P(JobStoreTest, EnqueueAcrossStatementChunksLinksEachJobToItsOwnItem) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  StageSpec videos_only = Stage("c", {"a"});
  videos_only.images = false;
  AddStage(videos_only);
  Open();
  std::vector<NewItem> items = Images(1000);
  for (int i = 0; i < 1000; i += 7) items[i] = Video("/data/vid" + std::to_string(i) + ".mp4");
  EnqueueStats st = Enqueue(items, {"a", "b", "c"});
  const int64_t videos = 143;  // i = 0, 7, ..., 994
  EXPECT_EQ(st.items_added, 1000);
  EXPECT_EQ(st.jobs_added, 3000);
  EXPECT_EQ(st.jobs_not_applicable, 1000 - videos);
  EXPECT_EQ(Count("jobs WHERE stage = 'a' AND state = 0"), 1000);
  EXPECT_EQ(Count("jobs WHERE stage = 'b' AND state = 5"), 1000);
  EXPECT_EQ(Count("jobs WHERE stage = 'c' AND state = 5"), videos);
  EXPECT_EQ(Count("jobs WHERE stage = 'c' AND state = 4 AND error_class = 'not_applicable'"),
            1000 - videos);
  EXPECT_EQ(Count("job_deps"), 2000) << "skipped jobs keep their dependency too";
  EXPECT_EQ(Count("job_deps d JOIN jobs j ON j.id = d.job_id JOIN jobs a ON a.id = d.dep_id"
                  " WHERE a.item_id <> j.item_id OR a.stage <> 'a'"),
            0);
  EXPECT_EQ(Count("job_deps d LEFT JOIN jobs j ON j.id = d.job_id LEFT JOIN jobs a ON a.id = d.dep_id"
                  " WHERE j.id IS NULL OR a.id IS NULL"),
            0);
  EXPECT_EQ(Count("jobs j LEFT JOIN items i ON i.id = j.item_id WHERE i.id IS NULL"), 0);
  // Done upstream promotes exactly that item's dependants.
  std::vector<ClaimedJob> all_a = Claim("w", {"a"}, 1000);
  ASSERT_EQ(all_a.size(), 1000u);
  auto a = std::find_if(all_a.begin(), all_a.end(),
                        [](const ClaimedJob& j) { return j.source == "/data/img999.png"; });
  ASSERT_NE(a, all_a.end());
  CompleteAllDone({*a});
  std::vector<ClaimedJob> b = Claim("w", {"b"});
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].source, "/data/img999.png");
  // Again: nothing added, nothing written.
  st = Enqueue(items, {"a", "b", "c"});
  EXPECT_EQ(st.items_unchanged, 1000);
  EXPECT_EQ(st.jobs_added + st.items_added + st.items_changed + st.jobs_requeued, 0);
}

// PostgreSQL's COPY takes text with tabs, newlines and backslashes as separators and
// escapes: a name or a JSON value holding them must go in and come back byte for byte, and
// be found again by the next enqueue.
TEST_P(JobStoreTest, EnqueueKeepsTabsNewlinesAndBackslashesInNamesAndMetadata) {
  StageSpec fetch = Stage("fetch");
  fetch.downloads = true;
  AddStage(fetch);
  AddStage(Stage("a"));
  Open();
  const std::vector<std::string> names = {"/data/tab\there.png", "/data/line\nbreak.png",
                                          "/data/back\\slash\\N.png", "/data/cr\rx.png",
                                          "/data/\\N", "/data/caf\xc3\xa9 'quoted\".png"};
  std::vector<NewItem> items;
  for (const std::string& n : names) {
    NewItem it = Image(n);
    it.media_info = R"({"note":"a\tb\\c\nd"})" "\t";
    items.push_back(it);
  }
  NewItem url;
  url.source = "https://h/x?q=a\tb";
  url.is_url = true;
  url.metadata = "{\"caption\":\"two\nlines \\N\"}";
  url.media_info = "{\"metadata\":" + url.metadata + "}";
  items.push_back(url);
  EnqueueStats st = Enqueue(items, {"a"});
  EXPECT_EQ(st.items_added, 7);
  for (const NewItem& it : items) {
    SCOPED_TRACE(it.source);
    EXPECT_EQ(Count("items WHERE source = " + Q(it.source)), 1);
    EXPECT_EQ(in_.Text("SELECT media_info FROM items WHERE source = " + Q(it.source)), it.media_info);
  }
  EXPECT_EQ(in_.Text("SELECT metadata FROM items WHERE is_url = 1"), url.metadata);
  EnqueueStats again = Enqueue(items, {"a"});
  EXPECT_EQ(again.items_unchanged, 7);
  EXPECT_EQ(again.items_added + again.items_changed + again.jobs_added, 0);
}

// A source given twice in one call, new to the store: one item, its jobs once; a later
// mention with other content changes it as if the two had been enqueued one after the other.
TEST_P(JobStoreTest, EnqueueOfASourceGivenTwiceInOneCallAddsItOnce) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  Open();
  EnqueueStats st = Enqueue({Image("/data/x.png"), Image("/data/y.png"), Image("/data/x.png")},
                            {"a", "b"});
  EXPECT_EQ(st.items_added, 2);
  EXPECT_EQ(st.items_unchanged, 1);
  EXPECT_EQ(st.jobs_added, 4);
  EXPECT_EQ(Count("items"), 2);
  EXPECT_EQ(Count("job_deps"), 2);
  st = Enqueue({Image("/data/x.png", "h2"), Image("/data/x.png", "h2")}, {"a", "b"});
  EXPECT_EQ(st.items_changed, 1);
  EXPECT_EQ(st.items_unchanged, 1) << "the second mention meets the content the first wrote";
  EXPECT_EQ(st.jobs_requeued, 2);
  EXPECT_EQ(JobText("(SELECT content_hash FROM items WHERE id = jobs.item_id)", "/data/x.png", "a"),
            "h2");
}

// A stage added to the pipeline later: enqueueing the known items again adds only its jobs,
// in the first state their dependencies' states give (done upstream: pending at once).
TEST_P(JobStoreTest, EnqueueOfKnownItemsAddsOnlyTheMissingStagesJobs) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  Open();
  Enqueue(Images(3), {"a"});
  ClaimedJob a0 = ClaimOne("a", "/data/img0.png");
  CompleteAllDone({a0});
  EnqueueStats st = Enqueue(Images(3), {"a", "b"});
  EXPECT_EQ(st.items_unchanged, 3);
  EXPECT_EQ(st.jobs_added, 3);
  EXPECT_EQ(State("/data/img0.png", "b"), kPending);
  EXPECT_EQ(State("/data/img1.png", "b"), kWaiting);
  EXPECT_EQ(Count("job_deps"), 3);
}

TEST_P(JobStoreTest, ChangedContentHashRequeuesTheItemsJobsAndKeepsErrorHistory) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  Open();
  const std::string src = "/data/img0.png";
  Enqueue({Image(src, "h1"), Image("/data/other.png")}, {"a", "b"});
  // a fails once transiently, then succeeds; b succeeds.
  ClaimedJob a1 = ClaimOne("a", src);
  EXPECT_EQ(Complete({Failed(a1, Status::IOError("nfs hiccup"))}).retried, 1);
  clock_.Advance(10 * 60 * 1000);
  ClaimedJob a2 = ClaimOne("a", src);
  EXPECT_EQ(a2.attempts, 2);
  EXPECT_EQ(CompleteAllDone({a2}).done, 1);
  ClaimedJob b = ClaimOne("b", src);
  EXPECT_EQ(CompleteAllDone({b}).done, 1);
  ASSERT_EQ(ResultsFor(src, "a"), 1);
  ASSERT_EQ(ResultsFor(src, "b"), 1);
  ASSERT_EQ(ErrorsFor(src, "a"), 1);
  const int64_t a_id = JobId(src, "a");
  const int other_state = State("/data/other.png", "a");

  EnqueueStats st = Enqueue({Image(src, "h2")}, {"a", "b"});
  EXPECT_EQ(st.items_changed, 1);
  EXPECT_EQ(st.items_added, 0);
  EXPECT_EQ(st.jobs_requeued, 2);
  EXPECT_EQ(st.jobs_added, 0);
  EXPECT_EQ(JobId(src, "a"), a_id) << "the job is requeued, not replaced";
  EXPECT_EQ(State(src, "a"), kPending);
  EXPECT_EQ(State(src, "b"), kWaiting);
  EXPECT_EQ(JobCol("attempts", src, "a"), 0);
  EXPECT_EQ(JobCol("attempts", src, "b"), 0);
  EXPECT_EQ(JobCol("next_run_at", src, "a"), 0);
  EXPECT_EQ(JobText("finished_at", src, "a"), "<null>");
  EXPECT_EQ(JobText("error_class", src, "a"), "<null>");
  EXPECT_EQ(ResultsFor(src, "a"), 0) << "results of the old content must go";
  EXPECT_EQ(ResultsFor(src, "b"), 0);
  EXPECT_EQ(ErrorsFor(src, "a"), 1) << "error history survives a requeue";
  EXPECT_EQ(Must(store_->LoadItems()).at(src).content_hash, "h2");
  // The other item was not touched.
  EXPECT_EQ(State("/data/other.png", "a"), other_state);
  EXPECT_EQ(State("/data/other.png", "b"), kWaiting);

  // And the requeued jobs run again from scratch.
  ClaimedJob again = ClaimOne("a", src);
  EXPECT_EQ(again.attempts, 1);
}

TEST_P(JobStoreTest, ChangingAnItemsContentFencesOutTheWorkerHoldingItsJob) {
  AddStage(Stage("a"));
  Open();
  const std::string src = "/data/img0.png";
  Enqueue({Image(src, "h1")}, {"a"});
  ClaimedJob old = ClaimOne("a", src, "A");
  Enqueue({Image(src, "h2")}, {"a"});
  EXPECT_EQ(State(src, "a"), kPending);
  CompleteStats cs = Complete({Done(old, R"({"stale":true})")});
  EXPECT_EQ(cs.stale, 1);
  EXPECT_EQ(cs.done, 0);
  EXPECT_EQ(ResultsFor(src, "a"), 0);
  EXPECT_EQ(State(src, "a"), kPending);
}

TEST_P(JobStoreTest, AddingAStageLaterAddsOnlyTheMissingJobs) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(2), {"a"});
  ClaimedJob a0 = ClaimOne("a", "/data/img0.png");
  CompleteAllDone({a0});

  AddStage(Stage("b", {"a"}));
  EnqueueStats st = Enqueue(Images(2), {"a", "b"});
  EXPECT_EQ(st.items_unchanged, 2);
  EXPECT_EQ(st.jobs_added, 2);
  EXPECT_EQ(st.jobs_requeued, 0);
  EXPECT_EQ(Count("jobs"), 4);
  EXPECT_EQ(State("/data/img0.png", "a"), kDone) << "existing jobs are left alone";
  EXPECT_EQ(ResultsFor("/data/img0.png", "a"), 1);
  EXPECT_EQ(State("/data/img0.png", "b"), kPending) << "its dependency is already done";
  EXPECT_EQ(State("/data/img1.png", "a"), kPending);
  EXPECT_EQ(State("/data/img1.png", "b"), kWaiting);
  EXPECT_EQ(Count("job_deps"), 2);
}

TEST_P(JobStoreTest, AddingADependantStageAfterItsDependencyFailedFailsItAtOnce) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(1), {"a"});
  ClaimedJob a = ClaimOne("a", "/data/img0.png");
  Complete({Failed(a, Status::Corruption("bad png"))});
  AddStage(Stage("b", {"a"}));
  Enqueue(Images(1), {"a", "b"});
  EXPECT_EQ(State("/data/img0.png", "b"), kFailed);
  EXPECT_EQ(JobText("error_class", "/data/img0.png", "b"), "dependency_failed");
}

TEST_P(JobStoreTest, StageThatDoesNotApplyToTheMediaKindIsSkippedWithItsDependants) {
  StageSpec v = Stage("video_only");
  v.images = false;
  AddStage(v);
  AddStage(Stage("after_video", {"video_only"}));
  AddStage(Stage("any"));
  Open();
  EnqueueStats st = Enqueue({Image("/data/p.png"), Video("/data/m.mp4")},
                            {"video_only", "after_video", "any"});
  EXPECT_EQ(st.jobs_added, 6);
  EXPECT_EQ(st.jobs_not_applicable, 2);
  EXPECT_EQ(State("/data/p.png", "video_only"), kSkipped);
  EXPECT_EQ(JobText("error_class", "/data/p.png", "video_only"), "not_applicable");
  EXPECT_NE(JobText("finished_at", "/data/p.png", "video_only"), "<null>");
  EXPECT_EQ(State("/data/p.png", "after_video"), kSkipped);
  EXPECT_EQ(JobText("error_class", "/data/p.png", "after_video"), "not_applicable");
  EXPECT_EQ(State("/data/p.png", "any"), kPending);
  EXPECT_EQ(State("/data/m.mp4", "video_only"), kPending);
  EXPECT_EQ(State("/data/m.mp4", "after_video"), kWaiting);
  EXPECT_EQ(State("/data/m.mp4", "any"), kPending);
  // Nothing skipped is ever handed to a worker.
  for (const ClaimedJob& j : Claim("w", {"video_only", "after_video", "any"}))
    EXPECT_FALSE(j.source == "/data/p.png" && j.stage != "any") << j.stage;
}

TEST_P(JobStoreTest, RequeuedItemKeepsDependantsOfANotApplicableStageSkipped) {
  StageSpec v = Stage("video_only");
  v.images = false;
  AddStage(v);
  AddStage(Stage("after_video", {"video_only"}));
  Open();
  const std::string src = "/data/p.png";
  Enqueue({Image(src, "h1")}, {"video_only", "after_video"});
  ASSERT_EQ(State(src, "after_video"), kSkipped);
  Enqueue({Image(src, "h2")}, {"video_only", "after_video"});
  EXPECT_EQ(State(src, "video_only"), kSkipped);
  // Waiting here would be forever: its only dependency will never run.
  EXPECT_EQ(State(src, "after_video"), kSkipped);
}

TEST_P(JobStoreTest, ItemThatTurnsFromVideoIntoImageSkipsStagesThatNoLongerApply) {
  StageSpec v = Stage("video_only");
  v.images = false;
  AddStage(v);
  AddStage(Stage("after_video", {"video_only"}));
  Open();
  const std::string src = "/data/clip";
  Enqueue({Video(src, "x")}, {"video_only", "after_video"});
  ClaimedJob j = ClaimOne("video_only", src);
  CompleteAllDone({j});
  ASSERT_EQ(State(src, "after_video"), kPending);
  EnqueueStats st = Enqueue({Image(src, "x")}, {"video_only", "after_video"});
  EXPECT_EQ(st.items_changed, 1);
  EXPECT_EQ(State(src, "video_only"), kSkipped);
  EXPECT_EQ(State(src, "after_video"), kSkipped);
  EXPECT_EQ(ResultsFor(src, "video_only"), 0);
  // And back to a video: both run again.
  Enqueue({Video(src, "x")}, {"video_only", "after_video"});
  EXPECT_EQ(State(src, "video_only"), kPending);
  EXPECT_EQ(State(src, "after_video"), kWaiting);
}

TEST_P(JobStoreTest, EnqueueWithAnUnknownStageIsInvalidArgumentAndChangesNothing) {
  AddStage(Stage("a"));
  Open();
  auto r = store_->Enqueue(Images(2), EnqueueOptions{{"a", "nope"}, 0, 3, {}});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  EXPECT_EQ(Count("items"), 0) << "the whole enqueue is one transaction";
  auto empty = store_->Enqueue({}, EnqueueOptions{{"nope"}, 0, 3, {}});
  EXPECT_TRUE(empty.status().IsInvalidArgument()) << empty.status().ToString();
}

// ============================================================ claim

TEST_P(JobStoreTest, ClaimRespectsTheBatchLimit) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(5), {"a"});
  EXPECT_EQ(Claim("w", {"a"}, 2).size(), 2u);
  EXPECT_EQ(Claim("w", {"a"}, 10).size(), 3u);
  EXPECT_TRUE(Claim("w", {"a"}, 10).empty());
  EXPECT_TRUE(Claim("w", {"a"}, 0).empty());
}

TEST_P(JobStoreTest, ClaimTakesHigherPriorityFirstThenLowerIds) {
  AddStage(Stage("a"));
  Open();
  Enqueue({Image("/p0/a"), Image("/p0/b")}, {"a"}, 3, /*priority=*/0);
  Enqueue({Image("/p5/a"), Image("/p5/b")}, {"a"}, 3, /*priority=*/5);
  Enqueue({Image("/p1/a")}, {"a"}, 3, /*priority=*/1);
  auto first = Claim("w", {"a"}, 3);
  std::set<std::string> got;
  for (const ClaimedJob& j : first) got.insert(j.source);
  EXPECT_EQ(got, (std::set<std::string>{"/p5/a", "/p5/b", "/p1/a"}));
  auto second = Claim("w", {"a"}, 1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].source, "/p0/a") << "equal priority: lower id first";
  // The batch comes back in id order.
  EXPECT_TRUE(std::is_sorted(first.begin(), first.end(),
                             [](auto& x, auto& y) { return x.id < y.id; }));
}

TEST_P(JobStoreTest, EachClaimGetsAFreshLeaseTokenSharedByItsBatch) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(4), {"a"});
  auto b1 = Claim("w", {"a"}, 2);
  auto b2 = Claim("w", {"a"}, 2);
  ASSERT_EQ(b1.size(), 2u);
  ASSERT_EQ(b2.size(), 2u);
  EXPECT_NE(b1[0].lease_token, 0);
  EXPECT_EQ(b1[0].lease_token, b1[1].lease_token);
  EXPECT_EQ(b2[0].lease_token, b2[1].lease_token);
  EXPECT_NE(b1[0].lease_token, b2[0].lease_token);
  for (const auto& j : b1)
    EXPECT_EQ(in_.Int("SELECT lease_token FROM jobs WHERE id = " + std::to_string(j.id)),
              j.lease_token);
}

TEST_P(JobStoreTest, ClaimedJobsAreRunningWithAttemptsIncrementedAndTheirItemAttached) {
  AddStage(Stage("a"));
  Open();
  Enqueue({Image("/data/x.png")}, {"a"}, /*max_attempts=*/4);
  const int64_t now = clock_.NowMs();
  auto jobs = Claim("worker-1", {"a"}, 10, 1500);
  ASSERT_EQ(jobs.size(), 1u);
  const ClaimedJob& j = jobs[0];
  EXPECT_EQ(j.stage, "a");
  EXPECT_EQ(j.attempts, 1);
  EXPECT_EQ(j.max_attempts, 4);
  EXPECT_EQ(j.source, "/data/x.png");
  EXPECT_EQ(j.kind, MediaKind::kImage);
  EXPECT_EQ(j.media_info, R"({"format":"png"})");
  EXPECT_EQ(j.item_id, in_.Int("SELECT id FROM items WHERE source = '/data/x.png'"));
  EXPECT_EQ(State("/data/x.png", "a"), kRunning);
  EXPECT_EQ(JobCol("attempts", "/data/x.png", "a"), 1);
  EXPECT_EQ(JobText("lease_owner", "/data/x.png", "a"), "worker-1");
  EXPECT_EQ(JobCol("lease_expires_at", "/data/x.png", "a"), now + 1500);
  EXPECT_EQ(JobCol("started_at", "/data/x.png", "a"), now);
}

TEST_P(JobStoreTest, ClaimOnlyTakesJobsOfTheRequestedStages) {
  AddStage(Stage("a"));
  AddStage(Stage("x"));
  AddStage(Stage("y"));
  Open();
  Enqueue(Images(3), {"a", "x", "y"});
  auto jobs = Claim("w", {"x"});
  ASSERT_EQ(jobs.size(), 3u);
  for (const auto& j : jobs) EXPECT_EQ(j.stage, "x");
  auto two = Claim("w", {"a", "y"});
  EXPECT_EQ(two.size(), 6u);
  for (const auto& j : two) EXPECT_NE(j.stage, "x");
}

// By items: the items of the first claimable jobs, each with all its claimable jobs of the
// stages, so that one worker runs an item's stages on one decode. Jobs waiting on others,
// jobs of other stages and other items' jobs stay; a suspect still comes alone.
TEST_P(JobStoreTest, ClaimItemsTakesEveryClaimableJobOfTheFirstItems) {
  AddStage(Stage("a"));
  AddStage(Stage("b"));
  AddStage(Stage("c", {"b"}));
  AddStage(Stage("x"));
  Open();
  Enqueue(Images(5), {"a", "b", "c", "x"});  // ids stage by stage: a1..a5, b1..b5, ...
  auto first = Must(store_->ClaimItems("w", {"a", "b", "c"}, 2, kLease), "ClaimItems");
  std::map<int64_t, std::set<std::string>> by_item;
  for (const ClaimedJob& j : first) by_item[j.item_id].insert(j.stage);
  ASSERT_EQ(by_item.size(), 2u) << "two items";
  for (const auto& [item, stages] : by_item)
    EXPECT_EQ(stages, (std::set<std::string>{"a", "b"})) << "c waits for b; x was not asked for";
  EXPECT_TRUE(std::is_sorted(first.begin(), first.end(), [](auto& p, auto& q) { return p.id < q.id; }));
  for (const ClaimedJob& j : first) EXPECT_EQ(j.lease_token, first[0].lease_token);
  // The next claim takes the next items; a claim past the end takes what is left.
  auto rest = Must(store_->ClaimItems("w", {"a", "b", "c"}, 10, kLease), "ClaimItems");
  EXPECT_EQ(rest.size(), 6u);
  for (const ClaimedJob& j : rest) EXPECT_EQ(by_item.count(j.item_id), 0u);
  EXPECT_EQ(Count("jobs WHERE state = 1"), 10);
  EXPECT_TRUE(Must(store_->ClaimItems("w", {"a", "b", "c"}, 10, kLease), "ClaimItems").empty());
  // A finished b promotes its c, which a later claim takes with its item.
  const ClaimedJob b = *std::find_if(first.begin(), first.end(), [](auto& j) { return j.stage == "b"; });
  ASSERT_TRUE(store_->Complete({Done(b)}).ok());
  auto promoted = Must(store_->ClaimItems("w", {"a", "b", "c"}, 10, kLease), "ClaimItems");
  ASSERT_EQ(promoted.size(), 1u);
  EXPECT_EQ(promoted[0].stage, "c");
}

TEST_P(JobStoreTest, ClaimReturnsEmptyWhenNothingIsClaimable) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  Open();
  EXPECT_TRUE(Claim("w", {"a"}).empty());  // empty store
  Enqueue(Images(2), {"a", "b"});
  EXPECT_TRUE(Claim("w", {}).empty());
  EXPECT_TRUE(Claim("w", {"b"}).empty());  // only waiting jobs
  EXPECT_TRUE(Claim("w", {"unknown"}).empty());
  EXPECT_EQ(Count("jobs WHERE state = 1"), 0);
}

TEST_P(JobStoreTest, JobInBackoffIsNotClaimedUntilTheClockReachesNextRunAt) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(1), {"a"});
  auto j = Claim("w", {"a"});
  ASSERT_EQ(j.size(), 1u);
  Complete({Failed(j[0], Status::IOError("timeout"))});
  const int64_t next = JobCol("next_run_at", "/data/img0.png", "a");
  ASSERT_GT(next, clock_.NowMs());
  EXPECT_TRUE(Claim("w", {"a"}).empty());
  auto out = Must(store_->CountOutstanding({"a"}));
  EXPECT_EQ(out.pending, 1);
  EXPECT_EQ(out.running, 0);
  EXPECT_EQ(out.next_run_at, next);
  clock_.Set(next - 1);
  EXPECT_TRUE(Claim("w", {"a"}).empty());
  clock_.Set(next);
  auto again = Claim("w", {"a"});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].attempts, 2);
}

// ============================================================ heartbeat and rescue

TEST_P(JobStoreTest, HeartbeatExtendsLeasesSoTheyAreNotRescued) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(3), {"a"});
  const int64_t t0 = clock_.NowMs();
  auto mine = Claim("A", {"a"}, 2, 1000);
  ASSERT_EQ(mine.size(), 2u);
  clock_.Advance(800);
  EXPECT_EQ(Must(store_->Heartbeat("A", 1000)), 2);
  EXPECT_EQ(Must(store_->Heartbeat("nobody", 1000)), 0);
  clock_.Advance(400);  // t0 + 1200: past the original expiry, within the extended one
  EXPECT_EQ(Must(store_->RescueExpired()), 0);
  auto b = Claim("B", {"a"}, 10, 1000);
  ASSERT_EQ(b.size(), 1u) << "only the never-claimed job";
  for (const auto& j : mine) {
    EXPECT_EQ(in_.Int("SELECT lease_expires_at FROM jobs WHERE id = " + std::to_string(j.id)),
              t0 + 1800);
    EXPECT_EQ(in_.Text("SELECT lease_owner FROM jobs WHERE id = " + std::to_string(j.id)), "A");
  }
  clock_.Advance(700);  // t0 + 1900: A's leases (to t0 + 1800) expired, B's (t0 + 2200) not
  EXPECT_EQ(Must(store_->RescueExpired()), 2);
  // What run --metrics counts as lease rescues since its run began.
  EXPECT_EQ(Must(store_->CountErrorsSince("lease_expired", t0)), 2);
  EXPECT_EQ(Must(store_->CountErrorsSince("lease_expired", clock_.NowMs() + 1)), 0);
  EXPECT_EQ(Must(store_->CountErrorsSince("timeout", t0)), 0);
}

TEST_P(JobStoreTest, ExpiredLeasesAreRescuedAndReclaimedByAnotherWorker) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(3), {"a"});
  auto a = Claim("A", {"a"}, 10, 1000);
  ASSERT_EQ(a.size(), 3u);
  clock_.Advance(2000);
  // Rescued jobs are suspects: each comes back alone.
  std::vector<ClaimedJob> b;
  for (int k = 0; k < 3; ++k) {
    auto one = Claim("B", {"a"}, 10, 1000);
    ASSERT_EQ(one.size(), 1u);
    b.push_back(one[0]);
  }
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(b[i].id, a[i].id);
    EXPECT_NE(b[i].lease_token, a[i].lease_token);
    EXPECT_EQ(b[i].attempts, 2);
    EXPECT_EQ(in_.Text("SELECT lease_owner FROM jobs WHERE id = " + std::to_string(b[i].id)), "B");
    const std::string e = "job_errors WHERE job_id = " + std::to_string(a[i].id);
    EXPECT_EQ(Count(e), 1);
    EXPECT_EQ(in_.Text("SELECT error_class FROM " + e), "lease_expired");
    EXPECT_EQ(in_.Int("SELECT attempt FROM " + e), 1);
    std::string msg = in_.Text("SELECT message FROM " + e);
    EXPECT_NE(msg.find("worker A"), std::string::npos) << msg;
    EXPECT_NE(msg.find("lease"), std::string::npos) << msg;
  }
}

// A worker that dies mid-batch (an input that crashes the decoder, say) must not take
// its batch-mates' attempts with it again: rescued jobs run alone until done.
TEST_P(JobStoreTest, RescuedJobsAreClaimedAloneAheadOfOthersUntilDone) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(6), {"a"});
  auto a = Claim("A", {"a"}, 3, 1000);
  ASSERT_EQ(a.size(), 3u);
  clock_.Advance(2000);  // A died holding them
  auto s1 = Claim("B", {"a"}, 10, 1000);
  ASSERT_EQ(s1.size(), 1u);
  EXPECT_EQ(s1[0].id, a[0].id);
  EXPECT_EQ(JobCol("suspect", "/data/img0.png", "a"), 1);
  // Done clears the suspicion; a transient failure keeps it (it is claimed alone again).
  Complete({Done(s1[0], "{}")});
  EXPECT_EQ(JobCol("suspect", "/data/img0.png", "a"), 0);
  auto s2 = Claim("B", {"a"}, 10, 1000);
  ASSERT_EQ(s2.size(), 1u);
  EXPECT_EQ(s2[0].id, a[1].id);
  Complete({Failed(s2[0], Status::IOError("disk hiccup"))});
  clock_.Advance(10 * 60 * 1000);  // past the retry backoff
  auto s3 = Claim("B", {"a"}, 10, 1000);
  ASSERT_EQ(s3.size(), 1u);
  EXPECT_EQ(s3[0].id, a[1].id);
  Complete({Done(s3[0], "{}")});
  auto s4 = Claim("B", {"a"}, 10, 1000);
  ASSERT_EQ(s4.size(), 1u);
  EXPECT_EQ(s4[0].id, a[2].id);
  Complete({Done(s4[0], "{}")});
  // No suspects left: the untouched jobs come as one batch again.
  auto rest = Claim("B", {"a"}, 10, 1000);
  EXPECT_EQ(rest.size(), 3u);
}

TEST_P(JobStoreTest, RescuedJobIsPendingAndRecordsWhyAndWhen) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(1), {"a"});
  Claim("A", {"a"}, 10, 1000);
  clock_.Advance(1001);
  EXPECT_EQ(Must(store_->RescueExpired()), 1);
  EXPECT_EQ(State("/data/img0.png", "a"), kPending);
  EXPECT_EQ(JobText("error_class", "/data/img0.png", "a"), "lease_expired");
  EXPECT_EQ(JobText("lease_owner", "/data/img0.png", "a"), "<null>");
  EXPECT_EQ(JobText("lease_token", "/data/img0.png", "a"), "<null>");
  EXPECT_EQ(JobCol("attempts", "/data/img0.png", "a"), 1);
  EXPECT_EQ(Must(store_->RescueExpired()), 0) << "rescue is idempotent";
}

TEST_P(JobStoreTest, ExpiredJobAtMaxAttemptsFailsInsteadOfReturningToPending) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  Open();
  Enqueue(Images(1), {"a", "b"}, /*max_attempts=*/2);
  const std::string src = "/data/img0.png";
  Claim("A", {"a"}, 10, 1000);
  clock_.Advance(2000);
  EXPECT_EQ(Must(store_->RescueExpired()), 1);
  EXPECT_EQ(State(src, "a"), kPending);
  Claim("A", {"a"}, 10, 1000);
  EXPECT_EQ(JobCol("attempts", src, "a"), 2);
  clock_.Advance(2000);
  EXPECT_EQ(Must(store_->RescueExpired()), 1);
  EXPECT_EQ(State(src, "a"), kFailed);
  EXPECT_EQ(JobText("error_class", src, "a"), "lease_expired");
  EXPECT_EQ(JobCol("finished_at", src, "a"), clock_.NowMs());
  EXPECT_EQ(JobCol("attempts", src, "a"), 2);
  EXPECT_EQ(ErrorsFor(src, "a"), 2);
  EXPECT_EQ(State(src, "b"), kFailed);
  EXPECT_EQ(JobText("error_class", src, "b"), "dependency_failed");
  clock_.Advance(60 * 60 * 1000);
  EXPECT_TRUE(Claim("A", {"a", "b"}).empty());
}

// ============================================================ fencing and release

TEST_P(JobStoreTest, WorkerWhoseLeaseWasRescuedCannotCompleteItsJobs) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(3), {"a"});
  auto a = Claim("A", {"a"}, 10, 1000);
  ASSERT_EQ(a.size(), 3u);
  clock_.Advance(2000);
  std::vector<ClaimedJob> b;
  for (int k = 0; k < 3; ++k) {
    auto one = Claim("B", {"a"}, 10, 1000);
    ASSERT_EQ(one.size(), 1u);
    b.push_back(one[0]);
  }

  std::vector<FinishedJob> late;
  for (const auto& j : a) late.push_back(Done(j, R"({"by":"A"})"));
  CompleteStats sa = Complete(late);
  EXPECT_EQ(sa.stale, 3);
  EXPECT_EQ(sa.done, 0);
  EXPECT_EQ(Count("results"), 0);
  EXPECT_EQ(Count("jobs WHERE state = 1 AND lease_owner = 'B'"), 3);
  // Nor can it fail them, or give them back.
  std::vector<FinishedJob> late_fail;
  for (const auto& j : a) late_fail.push_back(Failed(j, Status::Corruption("x")));
  EXPECT_EQ(Complete(late_fail).stale, 3);
  EXPECT_EQ(Must(store_->Release(a)), 0);
  EXPECT_EQ(Count("jobs WHERE state = 1 AND lease_owner = 'B'"), 3);
  const int64_t errors_before = Count("job_errors");

  std::vector<FinishedJob> fresh;
  for (const auto& j : b) fresh.push_back(Done(j, R"({"by":"B"})"));
  CompleteStats sb = Complete(fresh);
  EXPECT_EQ(sb.done, 3);
  EXPECT_EQ(sb.stale, 0);
  EXPECT_EQ(Count("results"), 3);
  EXPECT_EQ(Count("results WHERE result = '{\"by\":\"B\"}'"), 3);
  EXPECT_EQ(in_.Int("SELECT max(n) FROM (SELECT count(*) n FROM results GROUP BY job_id) t"), 1);
  EXPECT_EQ(Count("job_errors"), errors_before);
  // A's late completion after B finished is stale too.
  EXPECT_EQ(Complete(late).stale, 3);
  EXPECT_EQ(Count("results WHERE result = '{\"by\":\"B\"}'"), 3);
}

TEST_P(JobStoreTest, CompletingTheSameJobTwiceCountsTheSecondAsStale) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(1), {"a"});
  auto j = Claim("w", {"a"});
  ASSERT_EQ(j.size(), 1u);
  CompleteStats s = Complete({Done(j[0], "{\"n\":1}"), Done(j[0], "{\"n\":2}")});
  EXPECT_EQ(s.done, 1);
  EXPECT_EQ(s.stale, 1);
  EXPECT_EQ(in_.Text("SELECT result FROM results"), "{\"n\":1}");
}

// A completion sent again because its commit's reply was lost (PostgreSQL restarting
// mid-commit: the transaction runs again) is its own result, not a stale one: the worker
// must not delete the artifacts the recorded result names.
TEST_P(JobStoreTest, ACompletionSentAgainAfterItsCommitIsDoneNotStale) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(3), {"a"});
  auto j = Claim("w", {"a"});
  ASSERT_EQ(j.size(), 3u);
  const std::vector<FinishedJob> batch = {Done(j[0], "{\"n\":1}"), Done(j[1]), Done(j[2])};
  EXPECT_EQ(Complete(batch).done, 3);
  CompleteStats again = Complete(batch);
  EXPECT_EQ(again.done, 3);
  EXPECT_EQ(again.stale, 0);
  EXPECT_TRUE(again.stale_jobs.empty());
  EXPECT_EQ(Count("results"), 3);
  // Another holder's token is still refused.
  FinishedJob other = Done(j[0], "{\"n\":2}");
  other.lease_token += 1;
  EXPECT_EQ(Complete({other}).stale, 1);
  EXPECT_EQ(in_.Text("SELECT result FROM results WHERE job_id = " + std::to_string(j[0].id)),
            "{\"n\":1}");
}

TEST_P(JobStoreTest, ReleaseReturnsJobsToPendingWithoutSpendingAnAttempt) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(2), {"a"});
  auto j = Claim("w", {"a"});
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(Must(store_->Release(j)), 2);
  EXPECT_EQ(Count("jobs WHERE state = 0 AND attempts = 0 AND lease_token IS NULL"
                  " AND lease_owner IS NULL AND lease_expires_at IS NULL"),
            2);
  EXPECT_EQ(Must(store_->Release(j)), 0) << "already released";
  auto again = Claim("w", {"a"});
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].attempts, 1);
  // A completion under the released token is stale.
  EXPECT_EQ(Complete({Done(j[0])}).stale, 1);
}

TEST_P(JobStoreTest, ReleaseWithAStaleTokenLeavesTheNewHoldersJobAlone) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(1), {"a"});
  auto a = Claim("A", {"a"}, 1, 1000);
  clock_.Advance(2000);
  auto b = Claim("B", {"a"}, 1, 1000);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(Must(store_->Release(a)), 0);
  EXPECT_EQ(State("/data/img0.png", "a"), kRunning);
  EXPECT_EQ(JobCol("attempts", "/data/img0.png", "a"), 2);
}

// ============================================================ failures

TEST_P(JobStoreTest, TransientFailureIsRetriedAfterJitteredBackoffUntilMaxAttempts) {
  AddStage(Stage("a"));
  retry_.base_delay_ms = 2000;
  Open();
  // The bounds the store must honour, from the policy the worker decides with.
  EXPECT_EQ(retry_.DelayMs(1, 0.0), 1000);
  EXPECT_LT(retry_.DelayMs(1, 0.999999), 2000);
  EXPECT_EQ(retry_.DelayMs(2, 0.0), 2000);
  EXPECT_LT(retry_.DelayMs(2, 0.999999), 4000);

  constexpr int kItems = 20;  // many draws of the jitter
  Enqueue(Images(kItems), {"a"}, /*max_attempts=*/3);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    const int64_t now = clock_.NowMs();
    auto jobs = Claim("w", {"a"});
    ASSERT_EQ(jobs.size(), static_cast<size_t>(kItems)) << "attempt " << attempt;
    std::vector<FinishedJob> batch;
    for (const auto& j : jobs) {
      EXPECT_EQ(j.attempts, attempt);
      batch.push_back(Failed(j, Status::IOError("read timed out")));
    }
    CompleteStats cs = Complete(batch);
    if (attempt < 3) {
      EXPECT_EQ(cs.retried, kItems);
      EXPECT_EQ(cs.failed, 0);
      const int64_t d = retry_.base_delay_ms << (attempt - 1);
      EXPECT_EQ(Count("jobs WHERE state = 0 AND next_run_at >= " + std::to_string(now + d / 2) +
                      " AND next_run_at < " + std::to_string(now + d)),
                kItems)
          << "attempt " << attempt << ": min "
          << in_.Int("SELECT min(next_run_at) FROM jobs") - now << " max "
          << in_.Int("SELECT max(next_run_at) FROM jobs") - now;
      EXPECT_EQ(Count("jobs WHERE error_class = 'io_error' AND last_error = 'read timed out'"),
                kItems);
      EXPECT_TRUE(Claim("w", {"a"}).empty()) << "nothing comes back early";
      clock_.Advance(d);
    } else {
      EXPECT_EQ(cs.failed, kItems);
      EXPECT_EQ(cs.retried, 0);
    }
  }
  EXPECT_EQ(Count("jobs WHERE state = 3 AND attempts = 3 AND error_class = 'io_error'"), kItems);
  EXPECT_EQ(Count("job_errors"), 3 * kItems);
  EXPECT_EQ(Count("job_errors WHERE transient = 1 AND error_class = 'io_error'"), 3 * kItems);
  EXPECT_EQ(in_.Int("SELECT count(DISTINCT attempt) FROM job_errors"), 3);
  clock_.Advance(24 * 3600 * 1000LL);
  EXPECT_TRUE(Claim("w", {"a"}).empty()) << "failed permanently";
}

TEST_P(JobStoreTest, PermanentErrorFailsOnTheFirstAttempt) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  Open();
  Enqueue(Images(1), {"a", "b"});
  auto j = Claim("w", {"a"});
  ASSERT_EQ(j.size(), 1u);
  CompleteStats cs = Complete({Failed(j[0], Status::Corruption("truncated PNG"))});
  EXPECT_EQ(cs.failed, 1);
  EXPECT_EQ(cs.retried, 0);
  const std::string src = "/data/img0.png";
  EXPECT_EQ(State(src, "a"), kFailed);
  EXPECT_EQ(JobCol("attempts", src, "a"), 1);
  EXPECT_EQ(JobText("error_class", src, "a"), "corrupt_input");
  EXPECT_EQ(JobText("last_error", src, "a"), "truncated PNG");
  EXPECT_EQ(JobCol("finished_at", src, "a"), clock_.NowMs());
  EXPECT_EQ(ErrorsFor(src, "a"), 1);
  EXPECT_EQ(Count("job_errors WHERE transient = 0 AND error_class = 'corrupt_input'"
                  " AND worker = 'w'"),
            1);
}

TEST_P(JobStoreTest, AttemptsNeverExceedMaxAttemptsAcrossFailuresAndLostLeases) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(1), {"a"}, /*max_attempts=*/3);
  const std::string src = "/data/img0.png";
  for (int round = 0; round < 10; ++round) {
    clock_.Advance(10 * 60 * 1000);
    auto j = Claim("w", {"a"}, 1, 1000);
    EXPECT_LE(JobCol("attempts", src, "a"), 3);
    if (j.empty()) break;
    if (round % 2 == 0) {
      Complete({Failed(j[0], Status::Busy("gpu busy"))});
    }  // odd rounds: the worker vanishes and its lease expires
  }
  clock_.Advance(10 * 60 * 1000);
  EXPECT_EQ(Must(store_->RescueExpired()), 0);
  EXPECT_EQ(State(src, "a"), kFailed);
  EXPECT_EQ(JobCol("attempts", src, "a"), 3);
  EXPECT_EQ(ErrorsFor(src, "a"), 3) << "every attempt's error is kept";
}

TEST_P(JobStoreTest, LeaseIsStillHeldAtTheInstantItExpiresAndLostJustAfter) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(1), {"a"});
  Claim("A", {"a"}, 1, 1000);
  clock_.Advance(1000);
  EXPECT_EQ(Must(store_->RescueExpired()), 0);
  clock_.Advance(1);
  EXPECT_EQ(Must(store_->RescueExpired()), 1);
}

TEST_P(JobStoreTest, HeartbeatRecordsTheWorkersHeartbeatTime) {
  AddStage(Stage("a"));
  Open();
  FM_ASSERT_OK(store_->RegisterWorker("A", 0, 1, "host"));
  clock_.Advance(5000);
  EXPECT_EQ(Must(store_->Heartbeat("A", 1000)), 0);
  EXPECT_EQ(in_.Int("SELECT heartbeat_at FROM workers WHERE id = 'A'"), clock_.NowMs());
}

// ============================================================ DAG

TEST_P(JobStoreTest, DependantWaitsUntilItsDependencyIsDone) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  Open();
  Enqueue(Images(1), {"a", "b"});
  const std::string src = "/data/img0.png";
  EXPECT_EQ(State(src, "b"), kWaiting);
  auto first = Claim("w", {"a", "b"});
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].stage, "a");
  EXPECT_TRUE(Claim("w", {"a", "b"}).empty());
  EXPECT_EQ(CompleteAllDone(first).done, 1);
  EXPECT_EQ(State(src, "a"), kDone);
  EXPECT_EQ(State(src, "b"), kPending);
  auto second = Claim("w", {"a", "b"});
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].stage, "b");
}

TEST_P(JobStoreTest, DependantWithTwoDependenciesWaitsForBoth) {
  AddStage(Stage("a"));
  AddStage(Stage("x"));
  AddStage(Stage("b", {"a", "x"}));
  Open();
  Enqueue(Images(1), {"a", "x", "b"});
  const std::string src = "/data/img0.png";
  CompleteAllDone(Claim("w", {"a"}));
  EXPECT_EQ(State(src, "b"), kWaiting);
  CompleteAllDone(Claim("w", {"x"}));
  EXPECT_EQ(State(src, "b"), kPending);
}

TEST_P(JobStoreTest, PermanentFailurePropagatesDownTheWholeChain) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  AddStage(Stage("c", {"b"}));
  Open();
  Enqueue(Images(1), {"a", "b", "c"});
  const std::string src = "/data/img0.png";
  auto j = Claim("w", {"a"});
  ASSERT_EQ(j.size(), 1u);
  Complete({Failed(j[0], Status::Unsupported("cmyk jpeg"))});
  EXPECT_EQ(State(src, "a"), kFailed);
  EXPECT_EQ(State(src, "b"), kFailed);
  EXPECT_EQ(State(src, "c"), kFailed);
  EXPECT_EQ(JobText("error_class", src, "b"), "dependency_failed");
  EXPECT_EQ(JobText("error_class", src, "c"), "dependency_failed");
}

TEST_P(JobStoreTest, WorkerSkippingAJobSkipsItsDependantsButNotOtherStages) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  AddStage(Stage("c", {"b"}));
  AddStage(Stage("x"));
  Open();
  Enqueue(Images(1), {"a", "b", "c", "x"});
  const std::string src = "/data/img0.png";
  auto j = Claim("w", {"a"});
  ASSERT_EQ(j.size(), 1u);
  FinishedJob c{j[0].id, j[0].lease_token, Outcome::Skipped("animated gif"), 0};
  EXPECT_EQ(Complete({c}).skipped, 1);
  EXPECT_EQ(State(src, "a"), kSkipped);
  EXPECT_EQ(JobText("last_error", src, "a"), "animated gif");
  EXPECT_EQ(State(src, "b"), kSkipped);
  EXPECT_EQ(State(src, "c"), kSkipped);
  EXPECT_EQ(State(src, "x"), kPending);
  EXPECT_EQ(Count("results"), 0);
  EXPECT_EQ(Count("job_errors"), 0) << "a skip is not an error";
}

TEST_P(JobStoreTest, RetryFailedRequeuesFailedJobsAndTheirDependantsWaitAgain) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  Open();
  Enqueue(Images(1), {"a", "b"});
  const std::string src = "/data/img0.png";
  auto j = Claim("w", {"a"});
  ASSERT_EQ(j.size(), 1u);
  Complete({Failed(j[0], Status::Corruption("bad"))});
  ASSERT_EQ(State(src, "b"), kFailed);
  ASSERT_EQ(JobText("error_class", src, "b"), "dependency_failed");

  EXPECT_EQ(Must(store_->RetryFailed("", "")), 2);
  EXPECT_EQ(State(src, "a"), kPending);
  EXPECT_EQ(State(src, "b"), kWaiting);
  EXPECT_EQ(JobCol("attempts", src, "a"), 0);
  EXPECT_EQ(JobText("error_class", src, "a"), "<null>");
  EXPECT_EQ(ErrorsFor(src, "a"), 1) << "history kept";
  auto again = Claim("w", {"a", "b"});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].stage, "a");
  EXPECT_EQ(again[0].attempts, 1);
  CompleteAllDone(again);
  EXPECT_EQ(State(src, "a"), kDone);
  EXPECT_EQ(State(src, "b"), kPending);
}

TEST_P(JobStoreTest, RetryFailedOfADependencyStageAlsoRevivesItsDependants) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  AddStage(Stage("c", {"b"}));
  Open();
  Enqueue(Images(1), {"a", "b", "c"});
  const std::string src = "/data/img0.png";
  Complete({Failed(Claim("w", {"a"}).at(0), Status::Corruption("bad"))});
  ASSERT_EQ(State(src, "c"), kFailed);
  EXPECT_EQ(Must(store_->RetryFailed("a", "")), 1);
  EXPECT_EQ(State(src, "a"), kPending);
  // b and c only failed because a did; with a queued again they wait for it.
  EXPECT_EQ(State(src, "b"), kWaiting);
  EXPECT_EQ(State(src, "c"), kWaiting);
  CompleteAllDone(Claim("w", {"a"}));
  EXPECT_EQ(State(src, "b"), kPending);
}

TEST_P(JobStoreTest, RetryFailedOfADependantWhoseDependencyStillFailedDoesNotStrandIt) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  Open();
  Enqueue(Images(1), {"a", "b"});
  const std::string src = "/data/img0.png";
  Complete({Failed(Claim("w", {"a"}).at(0), Status::Corruption("bad"))});
  Must(store_->RetryFailed("b", ""));
  EXPECT_EQ(State(src, "a"), kFailed);
  // Waiting on a failed job would be forever (and invisible to CountOutstanding).
  EXPECT_EQ(State(src, "b"), kFailed);
  EXPECT_EQ(JobText("error_class", src, "b"), "dependency_failed");
}

TEST_P(JobStoreTest, RetryFailedOfOneStageLeavesOtherStagesFailed) {
  AddStage(Stage("a"));
  AddStage(Stage("x"));
  Open();
  Enqueue(Images(1), {"a", "x"});
  auto j = Claim("w", {"a", "x"});
  ASSERT_EQ(j.size(), 2u);
  Complete({Failed(j[0], Status::Corruption("bad")), Failed(j[1], Status::Corruption("bad"))});
  EXPECT_EQ(Must(store_->RetryFailed("x", "")), 1);
  EXPECT_EQ(State("/data/img0.png", "a"), kFailed);
  EXPECT_EQ(State("/data/img0.png", "x"), kPending);
}

// `retry --class file_missing`: after the mounts are fixed, only what failed for that.
TEST_P(JobStoreTest, RetryFailedOfOneClassLeavesOtherClassesFailed) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(3), {"a"});
  auto j = Claim("w", {"a"});
  ASSERT_EQ(j.size(), 3u);
  Complete({Failed(j[0], Status::Corruption("bad")),
            Failed(j[1], Status::NotFound("cannot see it"), "file_missing"),
            Failed(j[2], Status::NotFound("cannot see it either"), "file_missing")});
  EXPECT_EQ(Must(store_->RetryFailed("", "file_missing")), 2);
  EXPECT_EQ(State("/data/img0.png", "a"), kFailed);
  EXPECT_EQ(State("/data/img1.png", "a"), kPending);
  EXPECT_EQ(State("/data/img2.png", "a"), kPending);
  EXPECT_EQ(Must(store_->RetryFailed("a", "file_missing")), 0);
}

// ============================================================ dataset-level stages

class DatasetStageTest : public JobStoreTest {
 protected:
  void SetUp() override {
    JobStoreTest::SetUp();
    AddStage(Stage("a"));
    StageSpec c = Stage("c", {"a"});
    c.dataset_level = true;
    AddStage(c);
    Open();
  }
  int CState() {
    return static_cast<int>(in_.Int("SELECT state FROM jobs WHERE stage = 'c'"));
  }
};

TEST_P(DatasetStageTest, HasOneJobThatWaitsUntilEveryDependencyJobIsTerminal) {
  Enqueue(Images(3), {"a", "c"});
  EXPECT_EQ(Count("jobs WHERE stage = 'c'"), 1);
  EXPECT_EQ(Count("jobs WHERE stage = 'a'"), 3);
  EXPECT_EQ(CState(), kWaiting);
  EXPECT_EQ(Must(store_->ItemCount()), 3) << "the dataset pseudo-item is not an item";
  EXPECT_EQ(Must(store_->LoadItems()).size(), 3u);

  auto a = Claim("w", {"a", "c"});
  ASSERT_EQ(a.size(), 3u);
  Complete({Done(a[0])});
  EXPECT_EQ(CState(), kWaiting);
  Complete({Failed(a[1], Status::Corruption("bad"))});
  EXPECT_EQ(CState(), kWaiting);
  Complete({Done(a[2])});
  EXPECT_EQ(CState(), kPending) << "done or failed: every a job is terminal";

  auto c = Claim("w", {"a", "c"});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].stage, "c");
  EXPECT_EQ(c[0].kind, MediaKind::kDataset);
}

TEST_P(DatasetStageTest, IsQueuedAgainWhenNewItemsArriveAndKeepsOneResultRow) {
  Enqueue(Images(2), {"a", "c"});
  CompleteAllDone(Claim("w", {"a"}));
  auto c = Claim("w", {"c"});
  ASSERT_EQ(c.size(), 1u);
  Complete({Done(c[0], R"({"v":1})")});
  EXPECT_EQ(CState(), kDone);

  // Nothing new: c is left done.
  Enqueue(Images(2), {"a", "c"});
  EXPECT_EQ(CState(), kDone);

  Enqueue({Image("/data/new.png")}, {"a", "c"});
  EXPECT_EQ(CState(), kWaiting);
  EXPECT_EQ(Count("results r JOIN jobs j ON j.id = r.job_id WHERE j.stage = 'c'"), 1)
      << "the previous result stays until replaced";
  EXPECT_EQ(Count("jobs WHERE stage = 'c'"), 1);

  CompleteAllDone(Claim("w", {"a"}));
  EXPECT_EQ(CState(), kPending);
  auto c2 = Claim("w", {"c"});
  ASSERT_EQ(c2.size(), 1u);
  EXPECT_EQ(c2[0].attempts, 1) << "attempts restart for the new run";
  Complete({Done(c2[0], R"({"v":2})")});
  EXPECT_EQ(Count("results r JOIN jobs j ON j.id = r.job_id WHERE j.stage = 'c'"), 1);
  EXPECT_EQ(in_.Text("SELECT r.result FROM results r JOIN jobs j ON j.id = r.job_id"
                     " WHERE j.stage = 'c'"),
            R"({"v":2})");
}

TEST_P(DatasetStageTest, EnqueueNamingOnlyUpstreamStagesStillQueuesItAgain) {
  Enqueue(Images(2), {"a", "c"});
  CompleteAllDone(Claim("w", {"a"}));
  CompleteAllDone(Claim("w", {"c"}));
  ASSERT_EQ(CState(), kDone);
  // `enqueue --stages a`: c is not named, but its input grows.
  Enqueue({Image("/data/new.png")}, {"a"});
  EXPECT_EQ(CState(), kWaiting);
  EXPECT_TRUE(Claim("w", {"c"}).empty());
  CompleteAllDone(Claim("w", {"a"}));
  EXPECT_EQ(CState(), kPending);
}

TEST_P(DatasetStageTest, ChangedItemAlsoQueuesItAgain) {
  Enqueue({Image("/data/x.png", "h1")}, {"a", "c"});
  CompleteAllDone(Claim("w", {"a"}));
  CompleteAllDone(Claim("w", {"c"}));
  ASSERT_EQ(CState(), kDone);
  Enqueue({Image("/data/x.png", "h2")}, {"a", "c"});
  EXPECT_EQ(CState(), kWaiting);
}

TEST_P(DatasetStageTest, PendingDatasetJobWaitsAgainWhenNewItemsArriveBeforeItIsClaimed) {
  Enqueue(Images(2), {"a", "c"});
  CompleteAllDone(Claim("w", {"a"}));
  ASSERT_EQ(CState(), kPending);
  Enqueue({Image("/data/late.png")}, {"a", "c"});
  // The new item's a job has not run: c must not start on incomplete data.
  EXPECT_EQ(CState(), kWaiting);
  EXPECT_TRUE(Claim("w", {"c"}).empty());
  CompleteAllDone(Claim("w", {"a"}));
  EXPECT_EQ(CState(), kPending);
}

TEST_P(DatasetStageTest, RunningDatasetJobRunsAgainWhenNewItemsArriveMidRun) {
  Enqueue(Images(2), {"a", "c"});
  CompleteAllDone(Claim("w", {"a"}));
  auto c = Claim("w", {"c"});
  ASSERT_EQ(c.size(), 1u);
  Enqueue({Image("/data/late.png")}, {"a", "c"});
  // The running c cannot have seen the late item; finishing it must not mark the
  // dataset done while that item's a job is still to run.
  Complete({Done(c[0], R"({"v":1})")});
  EXPECT_NE(CState(), kDone);
  CompleteAllDone(Claim("w", {"a"}));
  EXPECT_EQ(CState(), kPending);
}

TEST_P(DatasetStageTest, WaitsForAJobRescuedFromALostWorkerAndRunsOnceItFails) {
  Enqueue(Images(1), {"a", "c"}, /*max_attempts=*/1);
  Claim("A", {"a"}, 1, 1000);
  EXPECT_EQ(CState(), kWaiting);
  clock_.Advance(2000);
  EXPECT_EQ(Must(store_->RescueExpired()), 1);
  EXPECT_EQ(State("/data/img0.png", "a"), kFailed);
  EXPECT_EQ(CState(), kPending);
}

TEST_P(DatasetStageTest, FailedDatasetJobIsRetriedByRetryFailed) {
  Enqueue(Images(1), {"a", "c"});
  CompleteAllDone(Claim("w", {"a"}));
  auto c = Claim("w", {"c"});
  ASSERT_EQ(c.size(), 1u);
  Complete({Failed(c[0], Status::Corruption("bad manifest"))});
  ASSERT_EQ(CState(), kFailed);
  EXPECT_EQ(Must(store_->RetryFailed("c", "")), 1);
  EXPECT_EQ(CState(), kPending);
}

// Face clustering must see the faces of items that failed and were retried: retrying an
// upstream job re-arms a finished dataset-level job (done or failed), which then runs
// again once the retried jobs are terminal; a running one loses its lease.
TEST_P(DatasetStageTest, RetryingUpstreamJobsReArmsAFinishedDatasetJob) {
  Enqueue(Images(2), {"a", "c"});
  auto a = Claim("w", {"a"});
  ASSERT_EQ(a.size(), 2u);
  Complete({Done(a[0]), Failed(a[1], Status::Corruption("bad"))});
  auto c = Claim("w", {"c"});
  ASSERT_EQ(c.size(), 1u);

  // Retried while c runs: c's lease goes, and its completion is refused as stale.
  EXPECT_EQ(Must(store_->RetryFailed("a", "")), 1);
  EXPECT_EQ(CState(), kWaiting);
  EXPECT_EQ(Complete({Done(c[0], R"({"v":1})")}).stale, 1);
  EXPECT_EQ(CState(), kWaiting);

  // The retried job fails again: c runs, and finishes.
  auto a2 = Claim("w", {"a"});
  ASSERT_EQ(a2.size(), 1u);
  Complete({Failed(a2[0], Status::Corruption("bad"))});
  EXPECT_EQ(CState(), kPending);
  CompleteAllDone(Claim("w", {"c"}));
  ASSERT_EQ(CState(), kDone);

  // Retried after c finished: c waits again, and runs once the retry is done.
  EXPECT_EQ(Must(store_->RetryFailed("a", "")), 1);
  EXPECT_EQ(CState(), kWaiting) << "it saw the failed item's inputs missing";
  CompleteAllDone(Claim("w", {"a"}));
  EXPECT_EQ(CState(), kPending);
  auto c3 = Claim("w", {"c"});
  ASSERT_EQ(c3.size(), 1u);
  EXPECT_EQ(c3[0].attempts, 1) << "attempts restart for the new run";
}

TEST_P(DatasetStageTest, EnqueueWithoutItemsCreatesTheDatasetJobWhichRunsAtOnce) {
  Enqueue({}, {"a", "c"});
  EXPECT_EQ(Count("jobs WHERE stage = 'c'"), 1);
  EXPECT_EQ(CState(), kPending);
}

// ============================================================ reporting

TEST_P(JobStoreTest, CountsReportEveryStateOfEveryStageInGraphOrder) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  StageSpec s = Stage("s");
  s.images = false;
  AddStage(s);
  Open();
  Enqueue(Images(4), {"a", "b", "s"});
  auto a = Claim("w", {"a"}, 3);
  ASSERT_EQ(a.size(), 3u);
  clock_.Advance(5000);
  Complete({Done(a[0]), Failed(a[1], Status::Corruption("bad"))});  // a[2] stays running

  auto counts = Must(store_->Counts(60'000));
  ASSERT_EQ(counts.size(), 3u);
  EXPECT_EQ(counts[0].stage, "a");
  EXPECT_EQ(counts[1].stage, "b");
  EXPECT_EQ(counts[2].stage, "s");
  const StageCounts& ca = counts[0];
  EXPECT_EQ(ca.done, 1);
  EXPECT_EQ(ca.failed, 1);
  EXPECT_EQ(ca.running, 1);
  EXPECT_EQ(ca.pending, 1);
  EXPECT_EQ(ca.waiting + ca.skipped, 0);
  EXPECT_EQ(ca.done_recent, 1);
  EXPECT_GE(ca.window_s, 1.0);
  const StageCounts& cb = counts[1];
  EXPECT_EQ(cb.pending, 1);
  EXPECT_EQ(cb.failed, 1);
  EXPECT_EQ(cb.waiting, 2);
  EXPECT_EQ(cb.done + cb.running + cb.skipped, 0);
  EXPECT_EQ(counts[2].skipped, 4);
  // Outside the window nothing is recent.
  clock_.Advance(120'000);
  EXPECT_EQ(Must(store_->Counts(60'000))[0].done_recent, 0);

  auto out = Must(store_->CountOutstanding({"a", "b"}));
  EXPECT_EQ(out.pending, 2);
  EXPECT_EQ(out.running, 1);
}

TEST_P(JobStoreTest, FailuresByClassGroupsFailedJobsByStageAndClass) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  Open();
  Enqueue(Images(4), {"a", "b"});
  auto a = Claim("w", {"a"});
  ASSERT_EQ(a.size(), 4u);
  Complete({Failed(a[0], Status::Corruption("bad header")),
            Failed(a[1], Status::Corruption("bad crc")),
            Failed(a[2], Status::Unsupported("cmyk")), Done(a[3])});
  auto f = Must(store_->FailuresByClass());
  std::map<std::pair<std::string, std::string>, ErrorClassCount> by;
  for (const auto& e : f) by[{e.stage, e.error_class}] = e;
  ASSERT_EQ(by.size(), 3u);
  EXPECT_EQ((by[{"a", "corrupt_input"}].count), 2);
  EXPECT_EQ((by[{"a", "unsupported_media"}].count), 1);
  EXPECT_EQ((by[{"a", "unsupported_media"}].example), "cmyk");
  const std::string ex = by[{"a", "corrupt_input"}].example;
  EXPECT_TRUE(ex == "bad header" || ex == "bad crc") << ex;
  EXPECT_EQ((by[{"b", "dependency_failed"}].count), 3);
  // Largest first.
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].count, 3);
  EXPECT_EQ(f[2].count, 1);
}

TEST_P(JobStoreTest, ForEachResultExportsDoneJobsWithTheirResults) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  Open();
  Enqueue(Images(3), {"a", "b"});
  auto a = Claim("w", {"a"});
  ASSERT_EQ(a.size(), 3u);
  const int64_t t = clock_.NowMs();
  FinishedJob c0 = Done(a[0], R"({"score":0.5})");
  c0.outcome.device = "cuda:0";
  c0.outcome.artifacts = {"/out/0.png"};
  Complete({c0, Done(a[1], R"({"score":0.7})"), Failed(a[2], Status::Corruption("bad"))});
  CompleteAllDone(Claim("w", {"b"}));

  std::vector<ExportRow> rows;
  FM_ASSERT_OK(store_->ForEachResult("a", [&](const ExportRow& r) {
    rows.push_back(r);
    return Status::OK();
  }));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].source, a[0].source);
  EXPECT_EQ(rows[0].stage, "a");
  EXPECT_EQ(rows[0].device, "cuda:0");
  EXPECT_EQ(rows[0].result_json, R"({"score":0.5})");
  EXPECT_EQ(rows[0].artifacts_json, R"(["/out/0.png"])");
  EXPECT_EQ(rows[0].attempts, 1);
  EXPECT_EQ(rows[0].finished_at, t);
  EXPECT_EQ(rows[1].source, a[1].source);
  EXPECT_EQ(rows[1].device, "cpu");
  EXPECT_EQ(rows[1].artifacts_json, "[]");

  int all = 0, b = 0;
  FM_ASSERT_OK(store_->ForEachResult("", [&](const ExportRow&) {
    ++all;
    return Status::OK();
  }));
  FM_ASSERT_OK(store_->ForEachResult("b", [&](const ExportRow& r) {
    ++b;
    EXPECT_EQ(r.stage, "b");
    return Status::OK();
  }));
  EXPECT_EQ(all, 4);
  EXPECT_EQ(b, 2);
}

// /metrics' clip count (jobs/clip_totals.h): each clips result is parsed once, as its job
// finishes; the store hands over only those finished since the counter last looked (less its
// slack), and a count that no longer matches the store's is made again from every result.
TEST_P(JobStoreTest, AClipCounterParsesEachClipsResultOnceAsItsJobFinishes) {
  AddStage(Stage("clips"));
  Open();
  Enqueue(Images(3), {"clips"});
  auto jobs = Claim("w", {"clips"});
  ASSERT_EQ(jobs.size(), 3u);
  int64_t shown_done = -1;  // < 0: the store's own count
  auto done_now = [&]() -> Result<int64_t> {
    if (shown_done >= 0) return shown_done;
    auto counts = store_->Counts(0);
    if (!counts.ok()) return counts.status();
    return DoneOf(*counts, "clips");
  };
  Complete({Done(jobs[0], R"({"clips":[{"start_s":0,"end_s":2}]})"),
            Done(jobs[1], R"({"clips":[{"start_s":0,"end_s":1},{"start_s":1,"end_s":4}]})")});
  ClipCounter counter;
  auto t = counter.Update(*store_, done_now);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->clips, 3);
  EXPECT_DOUBLE_EQ(t->seconds, 6.0);
  EXPECT_EQ(counter.parsed(), 2);
  t = counter.Update(*store_, done_now);  // nothing new: nothing parsed
  EXPECT_EQ(t->clips, 3);
  EXPECT_EQ(counter.parsed(), 2);

  clock_.Advance(60'000);  // the first two are far behind the slack: not read again
  std::vector<int64_t> seen;
  FM_ASSERT_OK(store_->ForEachResultFinishedSince("clips", clock_.NowMs(), [&](const ExportRow& r) {
    seen.push_back(r.job_id);
    return Status::OK();
  }));
  EXPECT_TRUE(seen.empty());
  Complete({Done(jobs[2], R"({"clips":[{"start_s":3,"end_s":8}]})")});
  FM_ASSERT_OK(store_->ForEachResultFinishedSince("clips", clock_.NowMs(), [&](const ExportRow& r) {
    seen.push_back(r.job_id);
    return Status::OK();
  }));
  EXPECT_EQ(seen, std::vector<int64_t>({jobs[2].id}));
  t = counter.Update(*store_, done_now);
  EXPECT_EQ(t->clips, 4);
  EXPECT_DOUBLE_EQ(t->seconds, 11.0);
  EXPECT_EQ(counter.parsed(), 3);

  shown_done = 2;  // the store says fewer are done than the counter holds: all again
  t = counter.Update(*store_, done_now);
  EXPECT_EQ(t->clips, 4);
  EXPECT_EQ(counter.parsed(), 6);
  shown_done = 4;  // more than it can find: a few times in a row, then all again
  for (int k = 1; k < ClipCounter::kMissesBeforeRecount; ++k) counter.Update(*store_, done_now);
  EXPECT_EQ(counter.parsed(), 6);
  counter.Update(*store_, done_now);
  EXPECT_EQ(counter.parsed(), 9);
}

// Longest first: every job of a video is claimed before any photo's, stage by stage within
// each, so a long video job never starts last and runs alone while the workers idle.
TEST_P(JobStoreTest, AVideosJobsAreClaimedBeforeAnyPhotosJob) {
  AddStage(Stage("a"));
  AddStage(Stage("b"));
  Open();
  Enqueue({Image("/d/0.png", "h0"), Video("/d/1.mp4", "h1"), Image("/d/2.png", "h2")}, {"a", "b"});
  auto jobs = Claim("w", {"a", "b"});
  ASSERT_EQ(jobs.size(), 6u);
  std::vector<std::string> order;
  for (const ClaimedJob& j : jobs) order.push_back(std::to_string(j.item_id) + j.stage);
  EXPECT_EQ(order, (std::vector<std::string>{"2a", "2b", "1a", "3a", "1b", "3b"}));
}

// The report and the WebDataset export read items whole: every item once, in item order
// across pages, each with all its jobs (done ones with their result, failed ones with
// their error), and the failed attempts newest first.
TEST_P(JobStoreTest, ForEachItemGivesEveryItemWithAllItsJobsAcrossPages) {
  AddStage(Stage("a"));
  AddStage(Stage("b", {"a"}));
  StoreOptions o;
  o.export_page_rows = 8;  // one item a page
  Open(o);
  Enqueue({Image("/d/0.png", "h0"), Image("/d/1.png", "h1"), Video("/d/2.mp4", "h2")}, {"a", "b"});
  auto a = Claim("w", {"a"});
  ASSERT_EQ(a.size(), 3u);
  // Claimed the video's first (its jobs are enqueued first, longest first): by item here.
  std::sort(a.begin(), a.end(), [](const ClaimedJob& x, const ClaimedJob& y) { return x.item_id < y.item_id; });
  FinishedJob c0 = Done(a[0], R"({"score":0.5})");
  c0.outcome.device = "cuda:0";
  c0.outcome.artifacts = {"/out/0.png"};
  Complete({c0, Done(a[1]), Failed(a[2], Status::Corruption("bad bytes"), "decode")});

  std::vector<ItemView> items;
  FM_ASSERT_OK(store_->ForEachItem([&](const ItemView& v) {
    items.push_back(v);
    return Status::OK();
  }));
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].source, "/d/0.png");
  EXPECT_EQ(items[0].content_hash, "h0");
  EXPECT_EQ(items[2].kind, MediaKind::kVideo);
  EXPECT_EQ(items[2].media_info, R"({"format":"mp4"})");
  for (const ItemView& v : items) {
    ASSERT_EQ(v.jobs.size(), 2u) << v.source;
    EXPECT_EQ(v.jobs[0].stage, "a");
    EXPECT_EQ(v.jobs[1].stage, "b");
  }
  EXPECT_EQ(items[0].jobs[0].state, JobState::kDone);
  EXPECT_EQ(items[0].jobs[0].device, "cuda:0");
  EXPECT_EQ(items[0].jobs[0].result_json, R"({"score":0.5})");
  EXPECT_EQ(items[0].jobs[0].artifacts_json, R"(["/out/0.png"])");
  EXPECT_EQ(items[0].jobs[0].finished_at, clock_.NowMs());
  EXPECT_EQ(items[0].jobs[1].state, JobState::kPending);
  EXPECT_EQ(items[0].jobs[1].result_json, "");
  EXPECT_EQ(items[2].jobs[0].state, JobState::kFailed);
  EXPECT_EQ(items[2].jobs[0].error_class, "decode");
  EXPECT_NE(items[2].jobs[0].last_error.find("bad bytes"), std::string::npos);
  EXPECT_EQ(items[2].jobs[1].state, JobState::kFailed);  // its dependency failed

  auto errors = Must(store_->ErrorHistory(10));
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors[0].source, "/d/2.mp4");
  EXPECT_EQ(errors[0].stage, "a");
  EXPECT_EQ(errors[0].error_class, "decode");
  EXPECT_EQ(errors[0].attempt, 1);
  EXPECT_EQ(errors[0].job_state, JobState::kFailed);
  EXPECT_EQ(Must(store_->ErrorHistory(0)).size(), 0u);
}

// status's time per item (issue 40): each stage's newest done jobs, so a stage whose jobs
// all finished before many of another's still has its figure.
TEST_P(JobStoreTest, RecentJobTimesHasEveryStagesNewestJobs) {
  AddStage(Stage("early"));
  AddStage(Stage("late"));
  Open();
  auto finish = [&](const std::string& stage, int n, int64_t ms) {
    std::vector<FinishedJob> batch;
    for (const ClaimedJob& j : Claim("w", {stage}, n)) {
      batch.push_back(Done(j));
      batch.back().run_ms = ms;
    }
    ASSERT_EQ(static_cast<int>(batch.size()), n);
    Complete(batch);
  };
  Enqueue(Images(30), {"early", "late"});
  finish("early", 10, 7);
  finish("late", 30, 3);
  auto times = Must(store_->RecentJobTimes(20));
  std::map<std::string, int> per_stage;
  for (const JobTime& t : times) ++per_stage[t.stage];
  EXPECT_EQ(per_stage["early"], 10) << "its 10 jobs finished before the 30 others";
  EXPECT_EQ(per_stage["late"], 20);
  const auto summary = SummariseJobTimes(times);
  EXPECT_EQ(summary.at({"early", MediaKind::kImage}).median_ms, 7);
  EXPECT_EQ(summary.at({"late", MediaKind::kImage}).median_ms, 3);
}

TEST_P(JobStoreTest, RunsAreListedNewestFirstWithTheirStages) {
  AddStage(Stage("a"));
  Open();
  const int64_t first = Must(store_->BeginRun(1, "a"));
  FM_ASSERT_OK(store_->EndRun(first, 0));
  const int64_t second = Must(store_->BeginRun(3, "a"));
  auto runs = Must(store_->Runs(10));
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].id, second);
  EXPECT_EQ(runs[0].workers, 3);
  EXPECT_EQ(runs[0].finished_at, 0);  // still running
  EXPECT_EQ(runs[0].stages, "a");
  EXPECT_EQ(runs[1].id, first);
  EXPECT_EQ(runs[1].exit_code, 0);
  EXPECT_EQ(Must(store_->Runs(1)).size(), 1u);
}

// Export walks pages, each in its own read transaction: every row exactly once, in job
// order, and between pages a writer can commit and a checkpoint can empty the WAL (one
// read transaction over the whole export would pin it).
TEST_P(JobStoreTest, ForEachResultPagesWithoutHoldingASnapshotBetweenPages) {
  AddStage(Stage("a"));
  StoreOptions o;
  o.export_page_rows = 3;
  Open(o);
  Enqueue(Images(10), {"a"});
  CompleteAllDone(Claim("w", {"a"}));
  auto writer = OpenStore();
  ASSERT_NE(writer, nullptr);
  SqliteDb* raw = IsPg() ? nullptr : &static_cast<SqlJobStore<SqliteDb>*>(writer.get())->db();
  std::vector<std::string> seen;
  int checkpoints_complete = 0;
  FM_ASSERT_OK(store_->ForEachResult("", [&](const ExportRow& r) {
    seen.push_back(r.source);
    if (seen.size() % 3 == 0) {
      // A write commits, and a TRUNCATE checkpoint finishes (busy = 0): no reader pins it.
      EXPECT_TRUE(writer->RegisterWorker("w" + std::to_string(seen.size()), 0, 1, "h").ok());
      if (raw == nullptr) return Status::OK();  // PostgreSQL has no WAL for a reader to pin
      auto q = raw->Prepare("PRAGMA wal_checkpoint(TRUNCATE)");
      EXPECT_TRUE(q.ok());
      auto row = q->Step();
      EXPECT_TRUE(row.ok() && *row);
      if (q->Int(0) == 0) ++checkpoints_complete;
    }
    return Status::OK();
  }));
  ASSERT_EQ(seen.size(), 10u);
  std::set<std::string> unique(seen.begin(), seen.end());
  EXPECT_EQ(unique.size(), 10u);
  EXPECT_EQ(checkpoints_complete, IsPg() ? 0 : 3);
  // An error from the callback stops the walk and comes back.
  int calls = 0;
  Status stop = store_->ForEachResult("", [&](const ExportRow&) {
    return ++calls == 4 ? Status::IOError("No space left on device") : Status::OK();
  });
  EXPECT_EQ(stop.code(), Status::Code::kIOError);
  EXPECT_EQ(calls, 4);
}

// gc trims history older than the cutoff, but never what explains the present: each
// job's latest error, a worker that holds a lease, the newest runs. A dry run counts
// exactly what it would remove and removes nothing.
TEST_P(JobStoreTest, CollectGarbageRemovesOldHistoryButNotWhatExplainsThePresent) {
  AddStage(Stage("a"));
  Open();
  Enqueue(Images(2), {"a"});
  // Old: run 1 with a stopped worker; job 0 failed twice (transient), job 1 once.
  const int64_t run1 = Must(store_->BeginRun(1, "a"));
  FM_ASSERT_OK(store_->RegisterWorker("old", run1, 1, "h"));
  for (int i = 0; i < 2; ++i) {
    auto c = Claim("old", {"a"});
    ASSERT_FALSE(c.empty());
    std::vector<FinishedJob> f;
    for (const ClaimedJob& j : c) f.push_back(Failed(j, Status::IOError("flaky")));
    for (FinishedJob& x : f) x.retry_at_ms = clock_.NowMs();  // due again at once
    Complete(f);
  }
  FM_ASSERT_OK(store_->WorkerStopped("old"));
  FM_ASSERT_OK(store_->EndRun(run1, 0));
  clock_.Advance(40LL * 86'400'000);
  // Recent: run 2, whose worker is gone quiet but still holds job 0's lease.
  const int64_t run2 = Must(store_->BeginRun(1, "a"));
  FM_ASSERT_OK(store_->RegisterWorker("holder", run2, 2, "h"));
  ASSERT_EQ(Claim("holder", {"a"}, 1).size(), 1u);
  clock_.Advance(40LL * 86'400'000);
  ASSERT_EQ(in_.Int("SELECT count(*) FROM job_errors"), 4);

  GcOptions o;
  o.before_ms = clock_.NowMs() - 30LL * 86'400'000;
  o.silent_before_ms = clock_.NowMs() - 3'600'000;  // "holder" is silent: only its lease keeps it
  o.keep_runs = 0;
  o.dry_run = true;
  GcStats dry = Must(store_->CollectGarbage(o));
  EXPECT_EQ(in_.Int("SELECT count(*) FROM job_errors"), 4) << "a dry run removes nothing";
  o.dry_run = false;
  GcStats gc = Must(store_->CollectGarbage(o));
  EXPECT_EQ(gc.job_errors, 2);  // each job keeps its latest
  EXPECT_EQ(gc.workers, 1);     // "old"; "holder" holds a lease
  EXPECT_EQ(gc.runs, 1);        // run 1; run 2 still has its worker
  EXPECT_EQ(dry.job_errors, gc.job_errors);
  EXPECT_EQ(dry.workers, gc.workers);
  EXPECT_EQ(dry.runs, gc.runs);
  EXPECT_EQ(in_.Int("SELECT count(DISTINCT job_id) FROM job_errors"), 2);
  EXPECT_EQ(in_.Text(WorkerIds()), "holder");
  EXPECT_EQ(in_.Int("SELECT count(*) FROM runs"), 1);
  // PostgreSQL checks every reference as it is written; SQLite is asked.
  if (!IsPg()) {
    EXPECT_EQ(in_.Int("SELECT count(*) FROM pragma_foreign_key_check"), 0);
  }
  // The newest runs stay whatever their age.
  o.keep_runs = 5;
  EXPECT_EQ(Must(store_->CollectGarbage(o)).runs, 0);
}

// `gc --keep-days 0` during a run: a worker that is still heartbeating is live, even
// idle and holding no lease; its row (and so its run's) must stay, as lease rescues name it.
TEST_P(JobStoreTest, CollectGarbageKeepsLiveWorkersAndTheirRuns) {
  AddStage(Stage("a"));
  Open();
  const int64_t run = Must(store_->BeginRun(1, "a"));
  FM_ASSERT_OK(store_->RegisterWorker("live", run, 1, "h"));
  FM_ASSERT_OK(store_->RegisterWorker("dead", run, 2, "h"));
  clock_.Advance(2 * 3'600'000);
  ASSERT_TRUE(Must(store_->Heartbeat("live", 30'000)) == 0);
  clock_.Advance(1000);
  GcOptions o;
  o.before_ms = clock_.NowMs();  // --keep-days 0
  o.silent_before_ms = clock_.NowMs() - 3'600'000;
  o.keep_runs = 0;
  GcStats gc = Must(store_->CollectGarbage(o));
  EXPECT_EQ(gc.workers, 1);
  EXPECT_EQ(gc.runs, 0);
  EXPECT_EQ(in_.Text(WorkerIds()), "live");
  EXPECT_EQ(in_.Int("SELECT count(*) FROM runs"), 1);
}

TEST_P(JobStoreTest, RunAndWorkerBookkeepingAddsUpTheWorkersCounts) {
  AddStage(Stage("a"));
  Open();
  EXPECT_FALSE(Must(store_->LastRun()).has_value());
  Enqueue(Images(3), {"a"});
  const int64_t run = Must(store_->BeginRun(2, "a"));
  ASSERT_GT(run, 0);
  FM_ASSERT_OK(store_->RegisterWorker("host:1:0", run, 1, "host"));
  FM_ASSERT_OK(store_->RegisterWorker("host:1:0", run, 1, "host"));  // idempotent
  auto j = Claim("host:1:0", {"a"});
  ASSERT_EQ(j.size(), 3u);
  Complete({Done(j[0]), Done(j[1]), Failed(j[2], Status::Corruption("bad"))});
  FM_ASSERT_OK(store_->WorkerStopped("host:1:0"));
  FM_ASSERT_OK(store_->EndRun(run, 1));
  auto last = Must(store_->LastRun());
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->id, run);
  EXPECT_EQ(last->jobs_done, 2);
  EXPECT_EQ(last->jobs_failed, 1);
  EXPECT_EQ(last->workers, 2);
  EXPECT_EQ(last->exit_code, 1);
  EXPECT_EQ(last->finished_at, clock_.NowMs());
  EXPECT_EQ(Count("workers WHERE stopped_at IS NOT NULL"), 1);
}

// ============================================================ concurrency

TEST_P(JobStoreTest, TwoWorkersWithTheirOwnConnectionsDoEveryJobExactlyOnce) {
  AddStage(Stage("a"));
  Open();
  constexpr int kJobs = 500;
  Enqueue(Images(kJobs), {"a"});
  std::mutex mu;
  std::map<int64_t, int> claimed;  // job id -> times claimed
  int done = 0, stale = 0;
  std::vector<std::string> errors;
  // Each worker has its own store, hence its own connection to the same file.
  std::unique_ptr<JobStore> s1 = OpenStore(), s2 = OpenStore();
  ASSERT_TRUE(s1 && s2);
  std::atomic<int> ready{0};
  auto worker = [&](JobStore* store, const std::string& name) {
    ++ready;
    while (ready.load() < 2) std::this_thread::yield();  // start together
    for (;;) {
      auto jobs = store->Claim(name, {"a"}, 7, kLease);
      if (!jobs.ok()) {
        std::lock_guard<std::mutex> l(mu);
        errors.push_back(jobs.status().ToString());
        return;
      }
      if (jobs->empty()) {
        auto o = store->CountOutstanding({"a"});
        if (!o.ok() || (o->pending == 0)) return;
        continue;
      }
      std::vector<FinishedJob> batch;
      for (const ClaimedJob& j : *jobs) batch.push_back(Done(j, "{\"by\":\"" + name + "\"}"));
      auto cs = store->Complete(batch);
      std::lock_guard<std::mutex> l(mu);
      for (const ClaimedJob& j : *jobs) ++claimed[j.id];
      if (!cs.ok()) {
        errors.push_back(cs.status().ToString());
        return;
      }
      done += cs->done;
      stale += cs->stale;
    }
  };
  std::thread t1(worker, s1.get(), "w1"), t2(worker, s2.get(), "w2");
  t1.join();
  t2.join();
  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_EQ(done, kJobs);
  EXPECT_EQ(stale, 0);
  EXPECT_EQ(claimed.size(), static_cast<size_t>(kJobs));
  for (const auto& [id, n] : claimed) EXPECT_EQ(n, 1) << "job " << id << " claimed " << n << "x";
  EXPECT_EQ(Count("results"), kJobs);
  EXPECT_EQ(Count("jobs WHERE state = 2 AND attempts = 1"), kJobs);
}

// ============================================================ URL items (the crawler)

class UrlItemTest : public JobStoreTest {
 protected:
  void SetUp() override {
    JobStoreTest::SetUp();
    StageSpec fetch = Stage("fetch");
    fetch.downloads = true;
    AddStage(fetch);
    AddStage(Stage("look"));  // images and videos
    StageSpec still = Stage("still");
    still.videos = false;
    AddStage(still);
    AddStage(Stage("deep", {"look"}));
    Open();
  }
  static NewItem Url(const std::string& url, const std::string& meta = "{}") {
    NewItem it;
    it.source = url;
    it.is_url = true;
    it.metadata = meta;
    it.media_info = "{\"metadata\":" + meta + "}";
    return it;
  }
  // The download's outcome: a result for export, and the file the item becomes.
  static FinishedJob Fetched(const ClaimedJob& f, const std::string& path, MediaKind kind) {
    FinishedJob done = Done(f, R"({"url":")" + f.source + R"("})");
    done.outcome.fetched = FetchedFile{path, kind, "abc", 123, {{"format", "jpeg"}}};
    return done;
  }
  const std::vector<std::string> kStages = {"look", "still", "deep"};
};

TEST_P(UrlItemTest, UrlItemHasAClaimableFetchJobAndItsOtherJobsWaitOnIt) {
  EnqueueStats st = Enqueue({Url("http://h/a.jpg", R"({"label":"cat"})")}, kStages);
  EXPECT_EQ(st.items_added, 1);
  EXPECT_EQ(st.jobs_added, 4);  // fetch + 3
  EXPECT_EQ(State("http://h/a.jpg", "fetch"), kPending);
  for (const std::string& s : kStages) EXPECT_EQ(State("http://h/a.jpg", s), kWaiting) << s;
  EXPECT_EQ(Count("job_deps WHERE dep_id = " + std::to_string(JobId("http://h/a.jpg", "fetch"))), 3);
  EXPECT_EQ(in_.Text("SELECT metadata FROM items"), R"({"label":"cat"})");
  EXPECT_TRUE(Claim("w", kStages).empty());
  ClaimedJob f = ClaimOne("fetch", "http://h/a.jpg");
  EXPECT_EQ(f.stage, "fetch");
}

TEST_P(UrlItemTest, EnqueueingTheSameUrlsAgainAddsNothingEvenAfterTheFetch) {
  std::vector<NewItem> items = {Url("http://h/a.jpg"), Url("https://h/b.png"), Url("http://h/a.jpg")};
  EnqueueStats first = Enqueue(items, kStages);
  EXPECT_EQ(first.items_added, 2);
  EXPECT_EQ(first.items_unchanged, 1);  // the duplicate line
  ClaimedJob f = ClaimOne("fetch", "http://h/a.jpg");
  Complete({Fetched(f, "/out/fetched/ab/abc.jpg", MediaKind::kImage)});
  const int64_t jobs = Count("jobs");
  EnqueueStats again = Enqueue(items, kStages);
  EXPECT_EQ(again.items_added, 0);
  EXPECT_EQ(again.items_changed, 0);
  EXPECT_EQ(again.jobs_added, 0);
  EXPECT_EQ(again.jobs_requeued, 0);
  EXPECT_EQ(Count("jobs"), jobs);
  EXPECT_EQ(Count("items"), 2);
  EXPECT_EQ(State("http://h/a.jpg", "fetch"), kDone);
  EXPECT_EQ(State("http://h/a.jpg", "look"), kPending);
}

TEST_P(UrlItemTest, DoneFetchMakesMediaJobsClaimableWithTheLocalFileAsSource) {
  Enqueue({Url("http://h/a.jpg")}, kStages);
  ClaimedJob f = ClaimOne("fetch", "http://h/a.jpg");
  Complete({Fetched(f, "/out/fetched/ab/abc.jpg", MediaKind::kImage)});
  EXPECT_EQ(in_.Text("SELECT fetched_path FROM items"), "/out/fetched/ab/abc.jpg");
  EXPECT_EQ(in_.Text("SELECT content_hash FROM items"), "abc");
  EXPECT_EQ(in_.Int("SELECT size FROM items"), 123);
  auto jobs = Claim("w", kStages);
  ASSERT_EQ(jobs.size(), 2u);  // look, still; deep waits on look
  for (const ClaimedJob& j : jobs) {
    EXPECT_EQ(j.source, "/out/fetched/ab/abc.jpg") << j.stage;
    EXPECT_EQ(j.kind, MediaKind::kImage);
    EXPECT_EQ(j.media_info, R"({"format":"jpeg"})");
  }
  EXPECT_EQ(State("http://h/a.jpg", "deep"), kWaiting);
  CompleteAllDone(jobs);
  EXPECT_EQ(State("http://h/a.jpg", "deep"), kPending);
  // Results are still reported under the URL.
  std::vector<std::string> sources;
  ASSERT_TRUE(store_->ForEachResult("look", [&](const ExportRow& r) {
                sources.push_back(r.source);
                return Status::OK();
              }).ok());
  EXPECT_EQ(sources, std::vector<std::string>{"http://h/a.jpg"});
}

TEST_P(UrlItemTest, FetchedVideoSkipsStagesThatDoNotApplyToVideos) {
  Enqueue({Url("http://h/v.mp4")}, kStages);
  ClaimedJob f = ClaimOne("fetch", "http://h/v.mp4");
  Complete({Fetched(f, "/out/fetched/cd/cd.mp4", MediaKind::kVideo)});
  EXPECT_EQ(in_.Int("SELECT kind FROM items"), static_cast<int>(MediaKind::kVideo));
  EXPECT_EQ(State("http://h/v.mp4", "still"), kSkipped);
  EXPECT_EQ(JobText("error_class", "http://h/v.mp4", "still"), "not_applicable");
  EXPECT_EQ(State("http://h/v.mp4", "look"), kPending);
}

TEST_P(UrlItemTest, PermanentFetchFailureFailsWithItsClassAndSkipsEveryDependant) {
  Enqueue({Url("http://h/gone.jpg")}, kStages);
  ClaimedJob f = ClaimOne("fetch", "http://h/gone.jpg");
  CompleteStats st = Complete({Failed(f, Status::NotFound("HTTP 404"), "http_status")});
  EXPECT_EQ(st.failed, 1);
  EXPECT_EQ(State("http://h/gone.jpg", "fetch"), kFailed);
  EXPECT_EQ(JobText("error_class", "http://h/gone.jpg", "fetch"), "http_status");
  EXPECT_EQ(JobText("last_error", "http://h/gone.jpg", "fetch"), "HTTP 404");
  for (const std::string& s : kStages) {
    EXPECT_EQ(State("http://h/gone.jpg", s), kSkipped) << s;
    EXPECT_EQ(JobText("error_class", "http://h/gone.jpg", s), "fetch_failed") << s;
  }
  auto failures = Must(store_->FailuresByClass());
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].stage, "fetch");
  EXPECT_EQ(failures[0].error_class, "http_status");
  // retry puts the fetch back, and its dependants wait on it again.
  EXPECT_EQ(Must(store_->RetryFailed("fetch", "")), 1);
  EXPECT_EQ(State("http://h/gone.jpg", "fetch"), kPending);
  for (const std::string& s : kStages) EXPECT_EQ(State("http://h/gone.jpg", s), kWaiting) << s;
}

TEST_P(UrlItemTest, DoneFetchWithoutAFileSkipsTheItemsOtherJobs) {
  Enqueue({Url("http://h/a.jpg")}, kStages);
  ClaimedJob f = ClaimOne("fetch", "http://h/a.jpg");
  EXPECT_EQ(Complete({Done(f)}).done, 1);
  EXPECT_TRUE(in_.Text("SELECT coalesce(fetched_path, '') FROM items").empty());
  for (const std::string& s : kStages) {
    EXPECT_EQ(State("http://h/a.jpg", s), kSkipped) << s;
    EXPECT_EQ(JobText("error_class", "http://h/a.jpg", s), "fetch_failed") << s;
  }
}

TEST_P(UrlItemTest, TransientFetchFailureWaitsAtLeastTheServersRetryAfter) {
  retry_.base_delay_ms = 10;
  retry_.max_delay_ms = 10;
  Enqueue({Url("http://h/busy.jpg")}, kStages);
  ClaimedJob f = ClaimOne("fetch", "http://h/busy.jpg");
  CompleteStats st = Complete({Failed(f, Status::Busy("HTTP 429"), "http_status", 5000)});
  EXPECT_EQ(st.retried, 1);
  EXPECT_EQ(State("http://h/busy.jpg", "fetch"), kPending);
  EXPECT_EQ(JobText("error_class", "http://h/busy.jpg", "fetch"), "http_status");
  EXPECT_GE(JobCol("next_run_at", "http://h/busy.jpg", "fetch"), clock_.NowMs() + 5000);
  EXPECT_TRUE(Claim("w", {"fetch"}).empty());
  clock_.Advance(5000);
  EXPECT_EQ(Claim("w", {"fetch"}).size(), 1u);
  EXPECT_EQ(in_.Text("SELECT error_class FROM job_errors"), "http_status");
}

TEST_P(UrlItemTest, WithoutAFetchStageUrlItemsAreRefused) {
  StageGraph plain;
  std::string err;
  ASSERT_TRUE(plain.Add(Stage("look"), &err));
  auto s = Must(OpenJobStore(NewDatabase("plain"), &plain, &clock_));
  EnqueueOptions o;
  o.stages = {"look"};
  auto r = s->Enqueue({Url("http://h/a.jpg")}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument());
}

TEST_P(UrlItemTest, FileItemsGetNoFetchJob) {
  Enqueue({Image("/data/a.png")}, {"fetch", "look"});
  EXPECT_EQ(Count("jobs WHERE stage = 'fetch'"), 0);
  EXPECT_EQ(State("/data/a.png", "look"), kPending);
}

TEST_P(UrlItemTest, ATypedErrorClassAndRetryAfterReachTheStoreAndTheMessageIsKept) {
  retry_.base_delay_ms = 1;
  retry_.max_delay_ms = 1;
  Enqueue({Url("http://h/slow.jpg")}, kStages);
  ClaimedJob f = ClaimOne("fetch", "http://h/slow.jpg");
  const int64_t failed_at = clock_.NowMs();
  // A message that looks like the old "[class ...]" tag is stored as it is.
  const std::string message = "[timeout retry_after_ms=9] HTTP 429 Too Many Requests";
  EXPECT_EQ(Complete({Failed(f, Status::Busy(message), "http_status", 1000)}).retried, 1);
  EXPECT_EQ(in_.Text("SELECT error_class FROM job_errors"), "http_status");
  EXPECT_EQ(in_.Text("SELECT message FROM job_errors"), message);
  EXPECT_EQ(in_.Int("SELECT transient FROM job_errors"), 1);
  EXPECT_EQ(JobText("error_class", "http://h/slow.jpg", "fetch"), "http_status");
  EXPECT_EQ(JobText("last_error", "http://h/slow.jpg", "fetch"), message);
  EXPECT_GE(JobCol("next_run_at", "http://h/slow.jpg", "fetch"), failed_at + 1000);
  clock_.Advance(999);
  EXPECT_TRUE(Claim("w", {"fetch"}).empty());
  clock_.Advance(1);
  ClaimedJob again = ClaimOne("fetch", "http://h/slow.jpg");
  // Without a class the Status code names it, as for every other stage.
  EXPECT_EQ(Complete({Failed(again, Status::Busy("HTTP 503"))}).retried, 1);
  EXPECT_EQ(JobText("error_class", "http://h/slow.jpg", "fetch"), "busy");
  EXPECT_EQ(in_.Text("SELECT error_class FROM job_errors WHERE attempt = 2"), "busy");
}

// A new database on the test's PostgreSQL server, and a graph of one stage, "a".
void PgDatabaseWithStageA(StageGraph* graph, std::string* uri) {
  std::string why;
  auto* pg = framemill::testing::PgServer::Shared(&why);
  ASSERT_NE(pg, nullptr) << why;
  StageSpec spec;
  spec.name = "a";
  ASSERT_TRUE(graph->Add(spec, &why)) << why;
  *uri = pg->CreateDatabase();
}

// On PostgreSQL leases are timed by the server (StoreOptions::server_time): a worker whose
// clock runs ten minutes ahead sees the other worker's lease as live and leaves it. The
// same worker timing by its own clock would rescue (steal) it: what server time prevents.
TEST(PgServerTimeTest, AWorkerWhoseClockIsMinutesAheadCannotStealALiveLease) {
  StageGraph graph;
  std::string uri;
  ASSERT_NO_FATAL_FAILURE(PgDatabaseWithStageA(&graph, &uri));
  ManualClock right(SystemClock()->NowMs());
  ManualClock ahead(SystemClock()->NowMs() + 10 * 60'000);
  auto holder = Must(OpenJobStore(uri, &graph, &right));
  auto skewed = Must(OpenJobStore(uri, &graph, &ahead));
  ASSERT_TRUE(holder && skewed);
  EnqueueOptions o;
  o.stages = {"a"};
  Must(holder->Enqueue(Images(2), o));
  auto held = Must(holder->Claim("holder", {"a"}, 1, 60'000));
  ASSERT_EQ(held.size(), 1u);
  auto other = Must(skewed->Claim("skewed", {"a"}, 10, 60'000));
  ASSERT_EQ(other.size(), 1u);  // the free job only
  EXPECT_NE(other[0].id, held[0].id);
  EXPECT_EQ(Must(skewed->RescueExpired()), 0);
  EXPECT_EQ(Must(holder->Complete({{held[0].id, held[0].lease_token,
                                    Outcome::Done(nlohmann::json::object()), 0}}))
                .done,
            1);
  // The control: timing by the skewed clock, the same claim takes the live lease.
  Must(holder->Enqueue(Images(1, "/data/more"), o));
  auto live = Must(holder->Claim("holder", {"a"}, 1, 60'000));
  ASSERT_EQ(live.size(), 1u);
  StoreOptions own_clock;
  own_clock.server_time = false;
  auto thief = Must(OpenJobStore(uri, &graph, &ahead, own_clock));
  ASSERT_NE(thief, nullptr);
  EXPECT_EQ(Must(thief->RescueExpired()), 2);  // both live leases: the holder's and its own
}

// An idle worker waits on LISTEN: an enqueue through another connection (another machine)
// wakes it at once instead of after its poll. SQLite cannot be woken: it sleeps it out.
TEST(PgNotifyTest, AnIdleWorkerIsWokenByAnEnqueueElsewhere) {
  StageGraph graph;
  std::string uri;
  ASSERT_NO_FATAL_FAILURE(PgDatabaseWithStageA(&graph, &uri));
  auto waiter = Must(OpenJobStore(uri, &graph, SystemClock()));
  auto other = Must(OpenJobStore(uri, &graph, SystemClock()));
  ASSERT_TRUE(waiter && other);
  EXPECT_FALSE(Must(waiter->WaitForWork(20)));  // nothing yet; now listening
  std::thread enqueuer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EnqueueOptions o;
    o.stages = {"a"};
    EXPECT_TRUE(other->Enqueue(Images(1), o).ok());
  });
  const auto t0 = std::chrono::steady_clock::now();
  const bool woke = Must(waiter->WaitForWork(60'000));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  enqueuer.join();
  EXPECT_TRUE(woke) << "slept " << waited << " s: no notification";
  EXPECT_EQ(Must(waiter->Claim("w", {"a"}, 10, 60'000)).size(), 1u);

  TempDir dir;
  auto lite = Must(OpenJobStore(dir.File("s.db"), &graph, SystemClock()));
  ASSERT_NE(lite, nullptr);
  EXPECT_FALSE(Must(lite->WaitForWork(10)));
}

std::string DialectName(const ::testing::TestParamInfo<SqlDialect>& info) {
  return info.param == SqlDialect::kPostgres ? "Postgres" : "Sqlite";
}
INSTANTIATE_TEST_SUITE_P(Stores, JobStoreTest,
                         ::testing::Values(SqlDialect::kSqlite, SqlDialect::kPostgres), DialectName);
INSTANTIATE_TEST_SUITE_P(Stores, DatasetStageTest,
                         ::testing::Values(SqlDialect::kSqlite, SqlDialect::kPostgres), DialectName);
INSTANTIATE_TEST_SUITE_P(Stores, UrlItemTest,
                         ::testing::Values(SqlDialect::kSqlite, SqlDialect::kPostgres), DialectName);

// What `status` and the report show as the time per item: one definition for both.
TEST(SummariseJobTimesTest, MedianAndTotalPerStageAndKind) {
  auto t = [](const char* stage, MediaKind kind, int64_t ms) { return JobTime{stage, kind, ms, -1, 0}; };
  const auto s = SummariseJobTimes({t("lighting", MediaKind::kImage, 9), t("lighting", MediaKind::kImage, 1),
                                    t("lighting", MediaKind::kImage, 5), t("lighting", MediaKind::kVideo, 40),
                                    t("motion", MediaKind::kVideo, 300), t("motion", MediaKind::kVideo, 100)});
  ASSERT_EQ(s.size(), 3u);
  const JobTimeSummary& images = s.at({"lighting", MediaKind::kImage});
  EXPECT_EQ(images.jobs, 3);
  EXPECT_EQ(images.median_ms, 5);
  EXPECT_EQ(images.total_ms, 15);
  EXPECT_EQ(s.at({"lighting", MediaKind::kVideo}).median_ms, 40);
  EXPECT_EQ(s.at({"motion", MediaKind::kVideo}).median_ms, 300);  // the upper of two
  EXPECT_TRUE(SummariseJobTimes({}).empty());
}

// Where the median job's time went: its own split (which sums to its time), as `status`
// prints it under time_split_ms.
TEST(SummariseJobTimesTest, TheMedianJobsSplit) {
  auto t = [](int64_t ms, JobTimeSplit split) {
    JobTime j{"faces", MediaKind::kImage, ms, -1, 0};
    j.split = split;
    return j;
  };
  const auto s = SummariseJobTimes({t(100, {10, 20, 60, 10}), t(30, {5, 25, 0, 0}), t(300, {0, 300, 0, 0})});
  const JobTimeSplit& m = s.at({"faces", MediaKind::kImage}).median_split;
  // decode, host, device, wait
  EXPECT_EQ((std::vector<int64_t>{m.decode_ms, m.host_ms, m.device_ms, m.wait_ms}),
            (std::vector<int64_t>{10, 20, 60, 10}));
}

}  // namespace
}  // namespace framemill
