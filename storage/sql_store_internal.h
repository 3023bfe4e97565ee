// Private to storage/: what the files of the SQL job store share. The store is written once
// for both engines (Db is SqliteDb or PgDb, one statement API) and split by concern, one
// class template per file, each explicitly instantiated for both engines in its own file:
//   sql_graph_moves.cc  state changes that ripple through the job graph (promotion,
//                       cascades, a download's result), shared by the commands below
//   sql_enqueue.cc      items and their jobs, set-wise
//   sql_claim.cc        leases: claim, heartbeat, rescue, release (fencing-critical)
//   sql_complete.cc     outcomes: fenced by the lease token, recorded, promoted
//   sql_runs.cc         runs, workers, GPU events, the batch tuner's memory
//   sql_maintenance.cc  what users ask for: retry, garbage collection
//   sql_queries.cc      the reads behind status, report and export
// What the dialects spell differently is named once, in Dialect<Db>.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>
#include <string>
#include <type_traits>
#include <utility>

#include "jobs/first_state.h"
#include "storage/job_store.h"
#include "storage/pg_db.h"
#include "storage/sqlite_db.h"

#define FM_PREPARE(var, sql)                      \
  auto var##_r = db_->Prepare(sql);               \
  if (!var##_r.ok()) return var##_r.status();     \
  auto& var = *var##_r
#define FM_STEP(var, expr)                        \
  auto var##_s = (expr);                          \
  if (!var##_s.ok()) return var##_s.status();     \
  bool var = *var##_s

// States spelled into the SQL text: SQLite can only match a partial index
// (WHERE state = 0) against a literal, and re-prepares a statement on every bind
// of a parameter compared with such a column.
#define S_PENDING "0"
#define S_RUNNING "1"
#define S_DONE "2"
#define S_FAILED "3"
#define S_SKIPPED "4"
#define S_WAITING "5"

namespace framemill::sql {

// The results row of a done job, as both completion paths write it: its columns (kResultColumns
// values, bound in this order) and what a conflicting row takes from the new one.
inline constexpr int kResultColumns = 12;
inline constexpr char kInsertResult[] =
    "INSERT INTO results (job_id, device, result, artifacts, created_at, started_at, run_ms,"
    " media_seconds, decode_ms, host_ms, device_ms, wait_ms) VALUES ";
inline constexpr char kOnResultConflict[] =
    " ON CONFLICT (job_id) DO UPDATE SET device = excluded.device, result = excluded.result,"
    " artifacts = excluded.artifacts, created_at = excluded.created_at,"
    " started_at = excluded.started_at, run_ms = excluded.run_ms,"
    " media_seconds = excluded.media_seconds, decode_ms = excluded.decode_ms,"
    " host_ms = excluded.host_ms, device_ms = excluded.device_ms, wait_ms = excluded.wait_ms";

// A done job's own time (FinishedJob's started_at_ms, run_ms, media_seconds, then its split:
// decode, host, device, wait) bound from `at` on, seven values; what was not measured as NULL.
template <class Stmt>
void BindJobTime(Stmt& st, int at, const FinishedJob& f) {
  if (f.run_ms >= 0) {
    st.Bind(at, f.started_at_ms).Bind(at + 1, f.run_ms);
  } else {
    st.BindNull(at).BindNull(at + 1);
  }
  if (f.media_seconds >= 0) st.Bind(at + 2, f.media_seconds); else st.BindNull(at + 2);
  const JobTimeSplit& t = f.split;
  if (f.run_ms >= 0)
    st.Bind(at + 3, t.decode_ms).Bind(at + 4, t.host_ms).Bind(at + 5, t.device_ms).Bind(at + 6, t.wait_ms);
  else
    st.BindNull(at + 3).BindNull(at + 4).BindNull(at + 5).BindNull(at + 6);
}

constexpr int kPending = static_cast<int>(JobState::kPending);
constexpr int kRunning = static_cast<int>(JobState::kRunning);
constexpr int kDone = static_cast<int>(JobState::kDone);
constexpr int kFailed = static_cast<int>(JobState::kFailed);
constexpr int kSkipped = static_cast<int>(JobState::kSkipped);
constexpr int kWaiting = static_cast<int>(JobState::kWaiting);
static_assert(kPending == 0 && kRunning == 1 && kDone == 2 && kFailed == 3 && kSkipped == 4 &&
              kWaiting == 5);

// The item that dataset-level jobs belong to.
constexpr char kDatasetSource[] = "dataset:";
// PostgreSQL: the claim's time, ?1 in ms, or the server's clock when ?1 is NULL
// (StoreOptions::server_time).
constexpr char kPgClaimNow[] = "coalesce(?1::int8, (extract(epoch from now()) * 1000)::int8)";
// What Notify says and WaitForWork listens for.
constexpr char kWorkChannel[] = "framemill_work";
// The advisory lock key of LockGraph ("fmgraph").
constexpr int64_t kGraphLock = 0x666d6772617068;

// What the job SQL spells differently per engine.
template <class Db>
struct Dialect;
template <>
struct Dialect<SqliteDb> {
  // Writers are serialised by BEGIN IMMEDIATE: nothing to lock row by row.
  static constexpr const char* kForUpdate = "";
};
template <>
struct Dialect<PgDb> {
  static constexpr const char* kForUpdate = " FOR UPDATE";
};

// "?,?,?" for n placeholders.
std::string Placeholders(size_t n);
// "(?,?),(?,?),(?,?)": `rows` rows of `columns` placeholders, for a multi-row VALUES.
std::string ValueRows(size_t rows, size_t columns);
// Calls fn(first, count) over [0, n) in chunks of at most kMaxRowsPerStatement rows, each a
// power of two, so a multi-row statement has at most eleven texts (prepared once each per
// connection) whatever the sizes of the calls. 1,024 rows of at most 11 columns (items)
// stay under SQLite's 32,766 parameters. (PostgreSQL's enqueue writes by COPY now,
// storage/bulk_rows.h; these chunks are its look-ups by IN lists.)
constexpr size_t kMaxRowsPerStatement = 1024;
Status ForEachChunk(size_t n, const std::function<Status(size_t first, size_t count)>& fn);

// One job_errors row; error_class "" falls back to the Status code's name.
template <class Db>
Status InsertJobError(Db& db, int64_t job_id, int attempt, const std::string& worker,
                      const Status& error, const std::string& error_class, int64_t now) {
  auto e_r = db.Prepare("INSERT INTO job_errors (job_id, attempt, at, worker, error_class,"
                        " message, transient) VALUES (?,?,?,?,?,?,?)");
  if (!e_r.ok()) return e_r.status();
  auto& e = *e_r;
  return e.Bind(1, job_id).Bind(2, attempt).Bind(3, now).Bind(4, worker)
      .Bind(5, error_class.empty() ? std::string(error.CodeName()) : error_class)
      .Bind(6, error.message()).Bind(7, error.IsTransient() ? 1 : 0).Run();
}

// Runs fn (returning Result<T>) in a transaction of `kind` (again, whole, when the engine
// retries it) and returns the value of its last run.
template <class T, class Db, class Fn>
Result<T> InTxn(Db& db, typename Db::TxnKind kind, Fn&& fn) {
  std::optional<T> out;
  Status s = db.Transaction(kind, [&]() -> Status {
    out.reset();
    Result<T> r = fn();
    if (!r.ok()) return r.status();
    out.emplace(std::move(r).value());
    return Status::OK();
  });
  if (!s.ok()) return s;
  return std::move(*out);
}

// What every part of the store shares: the connection (owned by SqlJobStore), the stage
// graph, the clock and the options. Thread-safety: as JobStore.
template <class Db>
class SqlContext {
 public:
  using Stmt = typename Db::Stmt;
  using TxnKind = typename Db::TxnKind;
  SqlContext(Db* db, const StageGraph* graph, const Clock* clock, const StoreOptions& options)
      : db_(db), graph_(graph), clock_(clock), options_(options) {
    for (const StageSpec& spec : graph_->stages())
      for (const std::string& d : spec.deps) stages_with_dependants_.insert(d);
  }

 protected:
  // The time of the transaction: the injected clock (SQLite, and PostgreSQL in tests that
  // drive time), or the PostgreSQL server's clock at BEGIN.
  int64_t Now() const {
    if constexpr (std::is_same_v<Db, PgDb>) {
      if (options_.server_time) return db_->TxnNowMs();
    }
    return clock_->NowMs();
  }
  // Taken first by the PostgreSQL transactions that change jobs other than the one they
  // were asked about; a no-op on SQLite, whose writers are serialised already.
  Status LockGraph() { return db_->LockExclusive(kGraphLock); }
  // Tells waiting workers that jobs may be claimable (PostgreSQL: NOTIFY, delivered when
  // the transaction commits); a no-op on SQLite.
  Status Notify() {
    if constexpr (std::is_same_v<Db, PgDb>) return db_->Exec(std::string("NOTIFY ") + kWorkChannel);
    return Status::OK();
  }
  // Whether outcomes of `stage` can change other jobs (promotion, cascades). Stages that
  // nothing depends on keep completing a job to three statements.
  bool HasDependants(const std::string& stage) const {
    const StageSpec* spec = graph_->Find(stage);
    return (spec != nullptr && spec->downloads) || stages_with_dependants_.count(stage) > 0;
  }

  Db* db_;
  const StageGraph* graph_;
  const Clock* clock_;
  StoreOptions options_;

 private:
  std::set<std::string> stages_with_dependants_;
};

// The members of SqlContext<Db> that the parts of the store (class templates deriving from
// it) use by their plain names: a dependent base's names need a using-declaration each.
#define FM_SQL_CONTEXT_NAMES                   \
  using typename SqlContext<Db>::Stmt;         \
  using typename SqlContext<Db>::TxnKind;      \
  using SqlContext<Db>::db_;                   \
  using SqlContext<Db>::graph_;                \
  using SqlContext<Db>::clock_;                \
  using SqlContext<Db>::options_;              \
  using SqlContext<Db>::Now;                   \
  using SqlContext<Db>::LockGraph;             \
  using SqlContext<Db>::Notify;                \
  using SqlContext<Db>::HasDependants

// State changes that ripple through the job graph, inside a transaction the caller opened
// (sql_graph_moves.cc). The commands that change states derive from it.
template <class Db>
class SqlGraphMoves : public SqlContext<Db> {
 public:
  using SqlContext<Db>::SqlContext;

 protected:
  FM_SQL_CONTEXT_NAMES;
  // The job is done: its waiting dependants whose dependencies are all done become pending.
  Status PromoteDependants(int64_t job_id, int64_t now);
  // Every waiting job downstream of `job_id` ends as `to` with the reason.
  Status CascadeTerminal(int64_t job_id, JobState to, const std::string& error_class,
                         const std::string& reason, int64_t now);
  // A job failed for good: its waiting dependants fail too (or are skipped, for a download).
  Status CascadeFailure(int64_t job_id, const std::string& stage,
                        const std::string& error_class, int64_t now);
  // A download job is done: the item becomes its local file, of the kind fetched.
  Status ApplyFetched(int64_t fetch_job_id, const FetchedFile& file, int64_t now);
  // The item's kind is known at last: its waiting jobs that do not apply are skipped.
  Status SkipNotApplicable(int64_t item_id, MediaKind kind, int64_t now);
  // Dataset-level jobs whose dependency stages have no work left become pending.
  Status PromoteDatasetJobs(int64_t now);
  // A dataset-level job whose dependency stages have work again (a retry) waits again.
  Status RearmDatasetJobs();
};

// Items and their jobs (sql_enqueue.cc). Set-wise: an enqueue of n new items writes each
// table in one go (storage/bulk_rows.h: a COPY on PostgreSQL, statements of 1,024 rows on
// SQLite), so round trips do not bound it.
template <class Db>
class SqlEnqueue : public SqlGraphMoves<Db> {
 public:
  using SqlGraphMoves<Db>::SqlGraphMoves;
  Result<std::unordered_map<std::string, ItemRecord>> LoadItems();
  Result<EnqueueStats> Enqueue(const std::vector<NewItem>& items, const EnqueueOptions& options);

 private:
  FM_SQL_CONTEXT_NAMES;
  struct KnownItem {  // an items row, as enqueue compares it
    int64_t id = 0, size = 0, mtime_ns = 0;
    std::string content_hash;
    bool hash_null = false, is_url = false;
    MediaKind kind = MediaKind::kImage;
  };
  struct Target {  // an item whose jobs enqueue makes sure of
    int64_t item_id;
    MediaKind kind;
    bool is_url, is_new;  // is_new: inserted by this enqueue, so it has no jobs yet
  };
  struct JobRef {
    int64_t id;
    JobState state;
  };
  using JobsByItem = std::unordered_map<int64_t, std::map<std::string, JobRef>>;
  struct NewJob {
    int64_t item_id;
    FirstState first;
    std::vector<int64_t> deps;
  };
  Result<EnqueueStats> EnqueueLocked(const std::vector<NewItem>& items,
                                     const EnqueueOptions& options);
  Result<std::unordered_map<std::string, KnownItem>> FindItems(
      const std::vector<const NewItem*>& items);
  // Inserts the items the store does not have (not `known`; a source's first mention) and
  // adds them to `targets`; the others go to `not_inserted`, in order.
  Status InsertItems(const std::vector<const NewItem*>& items,
                     const std::unordered_map<std::string, KnownItem>& known, int64_t now,
                     std::vector<Target>* targets, std::vector<const NewItem*>* not_inserted);
  // An item the store knows: its row updated if the file changed, its jobs queued again if
  // its content did.
  Status UpdateKnownItem(const NewItem& it, KnownItem& row, int64_t now,
                         EnqueueStats* stats, std::vector<Target>* targets);
  Status RequeueItemJobs(int64_t item_id, MediaKind kind, EnqueueStats* stats);
  Result<int64_t> JobState_(int64_t item_id, const std::string& stage, int* state);
  Result<JobsByItem> LoadJobs(const std::vector<Target>& targets);
  // The jobs of options.stages the targets lack, stage by stage in dependency order, each
  // in the first state DecideFirstState gives it.
  Status InsertMissingJobs(const std::vector<Target>& targets, const EnqueueOptions& options,
                           int64_t now, EnqueueStats* stats);
  Result<NewJob> PlanJob(const StageSpec& spec, const Target& t,
                         const std::map<std::string, JobRef>& has, const StageSpec* downloader);
  Status InsertJobs(const std::string& stage, const std::vector<NewJob>& rows,
                    const EnqueueOptions& options, int64_t now, JobsByItem* jobs,
                    EnqueueStats* stats);
  Status EnsureDatasetJobs(const EnqueueOptions& options, bool items_arrived);
  // PostgreSQL: after an enqueue that grew the jobs table by a tenth or more, ANALYZE it, so
  // the claim is not planned on statistics of a nearly empty table (it then sorted every
  // pending job: 3 ms at 10,000, and growing) until autovacuum comes round.
  void RefreshPlannerStatistics(int64_t jobs_added);
};

// What a claim's limit counts: jobs (JobStore::Claim), or items whose claimable jobs come
// along (JobStore::ClaimItems).
enum class ClaimBy { kJobs, kItems };

// Leases (sql_claim.cc): claim, heartbeat, rescue of leases whose worker is gone, release,
// and waiting for work. A job's lease token fences every later write for it.
template <class Db>
class SqlClaim : public SqlGraphMoves<Db> {
 public:
  SqlClaim(Db* db, const StageGraph* graph, const Clock* clock, const StoreOptions& options);
  Result<std::vector<ClaimedJob>> Claim(const std::string& worker,
                                        const std::vector<std::string>& stages, int limit,
                                        int64_t lease_ms, ClaimBy by);
  Result<int> Heartbeat(const std::string& worker, int64_t lease_ms);
  Result<int> RescueExpired();
  Result<int> RescueWorkerJobs(int64_t run_id, int pid, const std::string& error_class,
                               const std::string& reason);
  Result<int> ReleaseWorkerJobs(int64_t run_id, int pid);
  Result<int> Release(const std::vector<ClaimedJob>& jobs);
  Result<bool> WaitForWork(int64_t ms);

 private:
  FM_SQL_CONTEXT_NAMES;
  using SqlGraphMoves<Db>::CascadeFailure;
  using SqlGraphMoves<Db>::PromoteDatasetJobs;
  Result<std::vector<ClaimedJob>> ClaimPg(const std::string& worker,
                                          const std::vector<std::string>& stages, int limit,
                                          int64_t lease_ms, ClaimBy by);
  Result<std::vector<ClaimedJob>> ClaimSqlite(const std::string& worker,
                                              const std::vector<std::string>& stages, int limit,
                                              int64_t lease_ms, ClaimBy by);
  int64_t NewLeaseToken();
  // A claim's row: id, item_id, stage, attempts, max_attempts in columns 0-4.
  ClaimedJob ClaimedRow(const Stmt& st, int64_t token) const;
  // The item's source (or fetched file), kind and media_info from columns col..col+3
  // (source, fetched_path, kind, media_info).
  void SetItem(const Stmt& st, int col, ClaimedJob* j) const;
  // Each claimed job's item (SetItem), read by id: SQLite's RETURNING cannot join.
  Status ReadItems(std::vector<ClaimedJob>* jobs) const;
  Result<int> RescueExpiredLocked(int64_t now);
  // Runs a rescue statement (RescueSql in the .cc; `bind` binds its own parameters past
  // ?2) and records each rescued job's error; failed ones cascade.
  Result<int> RescueLocked(const std::string& sql, const std::function<void(Stmt&)>& bind,
                           const std::string& error_class, int64_t now);
  // A rescued job failed: its lost owner's jobs_failed counts it; its owner is cleared.
  Status CountFailedLease(int64_t job_id, const std::string& owner);

  std::mt19937_64 rng_;  // lease tokens
  bool listening_ = false;  // PostgreSQL: LISTEN issued on this connection
};

// Outcomes (sql_complete.cc): each fenced by its lease token, recorded, and the states it
// changes downstream changed with it, in one transaction per batch.
template <class Db>
class SqlComplete : public SqlGraphMoves<Db> {
 public:
  using SqlGraphMoves<Db>::SqlGraphMoves;
  Result<CompleteStats> Complete(const std::vector<FinishedJob>& batch);

 private:
  FM_SQL_CONTEXT_NAMES;
  struct SerializedDone {  // a done outcome's JSON, made before the write lock
    std::string result, artifacts;
  };
  struct HeldJob {  // a job whose lease the completion holds
    int64_t id;
    int attempts;
    std::string worker, stage;
  };
  struct WorkerTally {
    int done = 0, failed = 0;
  };
  using Tallies = std::map<std::string, WorkerTally>;
  struct Fenced {  // a running job's lease, as the leaf path's fence read it
    int64_t token;
    std::string worker, stage;
  };
  // Done outcomes of stages nothing depends on, fenced, marked and stored with one
  // statement each for the whole batch (the common case); marks what it recorded.
  Status CompleteLeavesDone(const std::vector<FinishedJob>& batch,
                            const std::vector<SerializedDone>& done, int64_t now,
                            std::vector<bool>* recorded, CompleteStats* stats, Tallies* per_worker);
  Result<std::map<int64_t, Fenced>> FenceAll(const std::vector<FinishedJob>& batch,
                                             const std::vector<size_t>& rows);
  Status MarkDone(const std::vector<FinishedJob>& batch, const std::vector<size_t>& rows,
                  const std::string& device, int64_t now);
  Status StoreResults(const std::vector<FinishedJob>& batch,
                      const std::vector<SerializedDone>& done, const std::vector<size_t>& rows,
                      int64_t now);
  Status CompleteOne(const FinishedJob& f, const SerializedDone& done, int64_t now,
                     CompleteStats* stats, Tallies* per_worker);
  Status RecordDone(const HeldJob& job, const FinishedJob& f, const SerializedDone& done, int64_t now);
  Status RecordSkipped(const HeldJob& job, const Outcome& o, int64_t now);
  Status RecordFailed(const HeldJob& job, const Outcome& o, int64_t retry_at_ms, int64_t now);
  Status AddWorkerTallies(const Tallies& per_worker, int64_t now);
  // When a failed job is due again, on the store's clock (FinishedJob::decided_at_ms).
  int64_t RetryAt(const FinishedJob& f, int64_t now) const;

  // Jobs the Complete transaction in progress has recorded done: a second outcome for one of
  // them is stale, not a replay of a commit whose reply was lost.
  std::set<int64_t> done_in_txn_;
};

// Runs, workers, GPU events and the batch tuner's memory (sql_runs.cc).
template <class Db>
class SqlRuns : public SqlContext<Db> {
 public:
  using SqlContext<Db>::SqlContext;
  Result<int64_t> BeginRun(int workers, const std::string& stages);
  Status EndRun(int64_t run_id, int exit_code);
  Status RegisterWorker(const std::string& worker, int64_t run_id, int pid,
                        const std::string& host);
  Status WorkerStopped(const std::string& worker);
  Status AddGpuEvents(const std::string& worker, const DeviceUse& use);
  Result<std::optional<TuningRecord>> LoadTuning(const std::string& op, const std::string& device,
                                                 int size_bucket);
  Status SaveTuning(const TuningRecord& record);

 private:
  FM_SQL_CONTEXT_NAMES;
};

// What users ask of the store's jobs (sql_maintenance.cc): retry, garbage collection.
template <class Db>
class SqlMaintenance : public SqlGraphMoves<Db> {
 public:
  using SqlGraphMoves<Db>::SqlGraphMoves;
  Result<int64_t> RetryFailed(const std::string& stage, const std::string& error_class);
  Result<GcStats> CollectGarbage(const GcOptions& options);

 private:
  FM_SQL_CONTEXT_NAMES;
  // Failed jobs of the stage and class go back to waiting; their ids.
  Result<std::set<int64_t>> ResetFailed(const std::string& stage, const std::string& error_class);
  // Dependants that failed only because a retried job did wait for it again.
  Status ReviveDependants(const std::set<int64_t>& retried);
  // A retried job whose dependency is still failed fails again at once, as its dependants
  // do: waiting on it would be forever. Removes them from `retried`.
  Status RefailBlocked(std::set<int64_t>* retried, int64_t now);
};

// The reads behind status, report, export and the scheduler's idea of what is left
// (sql_queries.cc). Each reads one snapshot (exports: one per page).
template <class Db>
class SqlQueries : public SqlContext<Db> {
 public:
  using SqlContext<Db>::SqlContext;
  Result<JobStore::Outstanding> CountOutstanding(const std::vector<std::string>& stages);
  Result<std::vector<StageCounts>> Counts(int64_t window_ms);
  Result<int64_t> ItemCount();
  Result<std::vector<ErrorClassCount>> FailuresByClass();
  Result<int64_t> CountErrorsSince(const std::string& error_class, int64_t since_ms);
  Result<std::vector<RunRecord>> Runs(int limit);
  Result<std::vector<RunRecord>> RunRows(int limit);  // without their devices
  Status ForEachItem(const std::function<Status(const ItemView&)>& fn);
  Result<std::vector<ErrorRecord>> ErrorHistory(int64_t limit);
  Result<std::vector<JobTime>> RecentJobTimes(int64_t limit);
  Status ForEachResult(const std::string& stage, const std::function<Status(const ExportRow&)>& fn);
  Status ForEachResultFinishedSince(const std::string& stage, int64_t since_ms,
                                    const std::function<Status(const ExportRow&)>& fn);
  // ForEachResult's walk; since_ms >= 0: only jobs of `stage` finished at or after it.
  Status WalkResults(const std::string& stage, int64_t since_ms, const std::function<Status(const ExportRow&)>& fn);
  Result<std::optional<ExportRow>> ResultOf(int64_t item_id, const std::string& stage);

 private:
  FM_SQL_CONTEXT_NAMES;
  // Every row of `sql` (its parameters bound by `bind`), each made by `row`, in one snapshot.
  template <class T>
  Result<std::vector<T>> ReadAll(const std::string& sql, const std::function<void(Stmt&)>& bind,
                                 const std::function<T(const Stmt&)>& row);
  // Counts' parts: jobs by stage and state, retries not yet due, recent throughput.
  Status CountStates(std::map<std::string, StageCounts>* by);
  Status CountLater(int64_t now, std::map<std::string, StageCounts>* by);
  Status CountRecent(int64_t now, int64_t window_ms, std::map<std::string, StageCounts>* by);
  // ForEachItem's page: up to `limit` items after `after`, with their jobs.
  Result<std::vector<ItemView>> ItemPage(int64_t after, int64_t limit);
  Status AddJobs(std::vector<ItemView>* page);
};

}  // namespace framemill::sql
