// The JobStore on SQL, written once for both engines: Db is SqliteDb (one machine) or
// PgDb (PostgreSQL, many machines), which share one statement API. All of framemill's job
// SQL lives here; what differs between the dialects is named once, in Dialect<Db> (.cc).
// PostgreSQL runs writes at READ COMMITTED: claims lock with SKIP LOCKED, completions
// lock the row they fence, and the few transactions that read one job's state to change
// another's (promotion, cascades, enqueue, retry, rescue) take one advisory lock, so
// they see each other's commits as SQLite's single writer does.
// Thread-safety: as JobStore (one instance per thread/process).
#pragma once

#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>

#include "storage/job_store.h"

namespace framemill {

template <class Db>
class SqlJobStore : public JobStore {
 public:
  using Stmt = typename Db::Stmt;
  SqlJobStore(std::unique_ptr<Db> db, const StageGraph* graph, const Clock* clock,
              StoreOptions options);

  Result<std::unordered_map<std::string, ItemRecord>> LoadItems() override;
  Result<EnqueueStats> Enqueue(const std::vector<NewItem>& items,
                               const EnqueueOptions& options) override;
  Result<std::vector<ClaimedJob>> Claim(const std::string& worker,
                                        const std::vector<std::string>& stages, int limit,
                                        int64_t lease_ms) override;
  Result<int> Heartbeat(const std::string& worker, int64_t lease_ms) override;
  Result<int> RescueExpired() override;
  Result<int> RescueWorkerJobs(int64_t run_id, int pid, const std::string& error_class,
                               const std::string& reason) override;
  Result<int> ReleaseWorkerJobs(int64_t run_id, int pid) override;
  Result<CompleteStats> Complete(const std::vector<FinishedJob>& batch) override;
  Result<int> Release(const std::vector<ClaimedJob>& jobs) override;
  Result<Outstanding> CountOutstanding(const std::vector<std::string>& stages) override;
  Result<bool> WaitForWork(int64_t ms) override;
  Result<int64_t> BeginRun(int workers, const std::string& stages) override;
  Status EndRun(int64_t run_id, int exit_code) override;
  Status RegisterWorker(const std::string& worker, int64_t run_id, int pid,
                        const std::string& host) override;
  Status WorkerStopped(const std::string& worker) override;
  Status AddGpuEvents(const std::string& worker, int64_t oom_events,
                      int64_t cpu_fallbacks) override;
  Result<std::optional<TuningRecord>> LoadTuning(const std::string& op, const std::string& device,
                                                 int size_bucket) override;
  Status SaveTuning(const TuningRecord& record) override;
  Result<int64_t> RetryFailed(const std::string& stage, const std::string& error_class) override;
  Result<GcStats> CollectGarbage(const GcOptions& options) override;
  Result<std::vector<StageCounts>> Counts(int64_t window_ms) override;
  Result<int64_t> ItemCount() override;
  Result<std::vector<ErrorClassCount>> FailuresByClass() override;
  Result<std::vector<RunRecord>> Runs(int limit) override;
  Status ForEachItem(const std::function<Status(const ItemView&)>& fn) override;
  Result<std::vector<ErrorRecord>> ErrorHistory(int64_t limit) override;
  Status ForEachResult(const std::string& stage,
                       const std::function<Status(const ExportRow&)>& fn) override;
  Result<std::optional<ExportRow>> ResultOf(int64_t item_id, const std::string& stage) override;

  Db& db() { return *db_; }

 private:
  // The time of the transaction: the injected clock (SQLite, and PostgreSQL in tests that
  // drive time), or the PostgreSQL server's clock at BEGIN.
  int64_t Now() const;
  // Taken first by the PostgreSQL transactions that change jobs other than the one they
  // were asked about; a no-op on SQLite, whose writers are serialised already.
  Status LockGraph();
  // Tells waiting workers that jobs may be claimable (PostgreSQL: NOTIFY, delivered when
  // the transaction commits); a no-op on SQLite.
  Status Notify();
  Result<std::vector<ClaimedJob>> ClaimPg(const std::string& worker,
                                          const std::vector<std::string>& stages, int limit,
                                          int64_t lease_ms);
  Result<std::vector<ClaimedJob>> ClaimSqlite(const std::string& worker,
                                              const std::vector<std::string>& stages, int limit,
                                              int64_t lease_ms);
  int64_t NewLeaseToken();
  // A claim's row: id, item_id, stage, attempts, max_attempts in columns 0-4.
  ClaimedJob ClaimedRow(const Stmt& st, int64_t token) const;
  // The item's source (or fetched file), kind and media_info from columns col..col+3
  // (source, fetched_path, kind, media_info).
  void SetItem(const Stmt& st, int col, ClaimedJob* j) const;
  // PostgreSQL: after an enqueue that grew the jobs table by a tenth or more, ANALYZE it, so
  // the claim is not planned on statistics of a nearly empty table (it then sorted every
  // pending job: 3 ms at 10,000, and growing) until autovacuum comes round.
  void RefreshPlannerStatistics(int64_t jobs_added);
  // When a failed job is due again, on the store's clock (FinishedJob::decided_at_ms).
  int64_t RetryAt(const FinishedJob& f, int64_t now) const;
  // Inside a transaction: the helpers below assume one is open.
  Status InsertJobsForItem(int64_t item_id, MediaKind kind, const EnqueueOptions& options,
                           EnqueueStats* stats, bool is_url);
  // A download job is done: the item becomes its local file, of the kind fetched.
  Status ApplyFetched(int64_t fetch_job_id, const FetchedFile& file, int64_t now);
  // The item's kind is known at last: its waiting jobs that do not apply are skipped.
  Status SkipNotApplicable(int64_t item_id, MediaKind kind, int64_t now);
  // A job failed for good: its waiting dependants fail too (or are skipped, for a download).
  Status CascadeFailure(int64_t job_id, const std::string& stage,
                        const std::string& error_class, int64_t now);
  Status RequeueItemJobs(int64_t item_id, MediaKind kind, EnqueueStats* stats);
  Result<int64_t> JobState_(int64_t item_id, const std::string& stage, int* state);
  Status PromoteDependants(int64_t job_id, int64_t now);
  Status CascadeTerminal(int64_t job_id, JobState to, const std::string& error_class,
                         const std::string& reason, int64_t now);
  Status EnsureDatasetJobs(const EnqueueOptions& options, bool items_arrived);
  Status PromoteDatasetJobs(int64_t now);
  // A dataset-level job whose dependency stages have work again (a retry) waits again.
  Status RearmDatasetJobs();
  Status RecordError(int64_t job_id, int attempt, const std::string& worker,
                     const Status& error, int64_t now);
  Result<int> RescueExpiredLocked(int64_t now);
  // Runs a rescue statement (RescueSql in the .cc; `bind` binds its own parameters past
  // ?2) and records each rescued job's error; failed ones cascade.
  Result<int> RescueLocked(const std::string& sql, const std::function<void(Stmt&)>& bind,
                           const std::string& error_class, int64_t now);

  // Complete, one job at a time, inside its transaction.
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
  // Done outcomes of stages nothing depends on, fenced, marked and stored with one
  // statement each for the whole batch (the common case); marks what it recorded.
  Status CompleteLeavesDone(const std::vector<FinishedJob>& batch,
                            const std::vector<SerializedDone>& done, int64_t now,
                            std::vector<bool>* recorded, CompleteStats* stats,
                            std::map<std::string, WorkerTally>* per_worker);
  Status CompleteOne(const FinishedJob& f, const SerializedDone& done, int64_t now,
                     CompleteStats* stats, std::map<std::string, WorkerTally>* per_worker);
  Status RecordDone(const HeldJob& job, const Outcome& o, const SerializedDone& done, int64_t now);
  Status RecordSkipped(const HeldJob& job, const Outcome& o, int64_t now);
  Status RecordFailed(const HeldJob& job, const Outcome& o, int64_t retry_at_ms, int64_t now);
  Status AddWorkerTallies(const std::map<std::string, WorkerTally>& per_worker, int64_t now);
  // Whether outcomes of `stage` can change other jobs (promotion, cascades).
  bool HasDependants(const std::string& stage) const;

  std::unique_ptr<Db> db_;
  const StageGraph* graph_;
  const Clock* clock_;
  StoreOptions options_;
  std::mt19937_64 rng_;  // lease tokens
  // Stages some other stage depends on: only their outcomes need promotion or
  // cascade queries, which keeps completing a leaf stage's job to three statements.
  std::set<std::string> stages_with_dependants_;
  bool listening_ = false;  // PostgreSQL: LISTEN issued on this connection
  // Jobs the Complete transaction in progress has recorded done: a second outcome for one of
  // them is stale, not a replay of a commit whose reply was lost.
  std::set<int64_t> done_in_txn_;
};

}  // namespace framemill
