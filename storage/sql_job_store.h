// The JobStore on SQL, written once for both engines: Db is SqliteDb (one machine) or
// PgDb (PostgreSQL, many machines), which share one statement API. All of framemill's job
// SQL lives in storage/sql_*.cc, one file per concern (sql_store_internal.h lists them);
// what differs between the dialects is named once, in Dialect<Db>.
// PostgreSQL runs writes at READ COMMITTED: claims lock with SKIP LOCKED, completions
// lock the row they fence, and the few transactions that read one job's state to change
// another's (promotion, cascades, enqueue, retry, rescue) take one advisory lock, so
// they see each other's commits as SQLite's single writer does.
// Thread-safety: as JobStore (one instance per thread/process).
#pragma once

#include <memory>
#include <string>

#include "storage/job_store.h"

namespace framemill {
namespace sql {
template <class Db> class SqlEnqueue;
template <class Db> class SqlClaim;
template <class Db> class SqlComplete;
template <class Db> class SqlRuns;
template <class Db> class SqlMaintenance;
template <class Db> class SqlQueries;
}  // namespace sql

template <class Db>
class SqlJobStore : public JobStore {
 public:
  SqlJobStore(std::unique_ptr<Db> db, const StageGraph* graph, const Clock* clock,
              StoreOptions options);
  ~SqlJobStore() override;

  Result<std::unordered_map<std::string, ItemRecord>> LoadItems() override;
  Result<EnqueueStats> Enqueue(const std::vector<NewItem>& items,
                               const EnqueueOptions& options) override;
  Result<std::vector<ClaimedJob>> Claim(const std::string& worker,
                                        const std::vector<std::string>& stages, int limit,
                                        int64_t lease_ms) override;
  Result<std::vector<ClaimedJob>> ClaimItems(const std::string& worker,
                                             const std::vector<std::string>& stages, int items,
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
  Status AddGpuEvents(const std::string& worker, const DeviceUse& use) override;
  Result<std::optional<TuningRecord>> LoadTuning(const std::string& op, const std::string& device,
                                                 int size_bucket) override;
  Status SaveTuning(const TuningRecord& record) override;
  Result<int64_t> RetryFailed(const std::string& stage, const std::string& error_class) override;
  Result<GcStats> CollectGarbage(const GcOptions& options) override;
  Result<std::vector<StageCounts>> Counts(int64_t window_ms) override;
  Result<int64_t> ItemCount() override;
  Result<std::vector<ErrorClassCount>> FailuresByClass() override;
  Result<int64_t> CountErrorsSince(const std::string& error_class, int64_t since_ms) override;
  Result<std::vector<RunRecord>> Runs(int limit) override;
  Status ForEachItem(const std::function<Status(const ItemView&)>& fn) override;
  Result<std::vector<ErrorRecord>> ErrorHistory(int64_t limit) override;
  Result<std::vector<JobTime>> RecentJobTimes(int64_t limit) override;
  Status ForEachResult(const std::string& stage,
                       const std::function<Status(const ExportRow&)>& fn) override;
  Status ForEachResultFinishedSince(const std::string& stage, int64_t since_ms,
                                    const std::function<Status(const ExportRow&)>& fn) override;
  Result<std::optional<ExportRow>> ResultOf(int64_t item_id, const std::string& stage) override;

  Db& db() { return *db_; }

 private:
  std::unique_ptr<Db> db_;  // the connection every part below uses
  std::unique_ptr<sql::SqlEnqueue<Db>> enqueue_;
  std::unique_ptr<sql::SqlClaim<Db>> claim_;
  std::unique_ptr<sql::SqlComplete<Db>> complete_;
  std::unique_ptr<sql::SqlRuns<Db>> runs_;
  std::unique_ptr<sql::SqlMaintenance<Db>> maintenance_;
  std::unique_ptr<sql::SqlQueries<Db>> queries_;
};

}  // namespace framemill
