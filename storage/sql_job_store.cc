// The SQL job store's entry: opening a store on either engine, and the JobStore interface
// handed to the part that owns each concern (sql_store_internal.h lists them).
#include "storage/sql_job_store.h"

#include <bit>

#include "storage/migrations.h"
#include "storage/sql_store_internal.h"

namespace framemill {

Result<std::unique_ptr<JobStore>> OpenSqliteJobStore(const std::string& path,
                                                     const StageGraph* graph,
                                                     const Clock* clock,
                                                     const StoreOptions& options) {
  SqliteOptions so;
  so.busy_wait_ms = options.busy_wait_ms;
  auto db = SqliteDb::Open(path, so);
  if (!db.ok()) return db.status();
  FM_RETURN_IF_ERROR(Migrate(**db, EmbeddedMigrations()));
  return std::unique_ptr<JobStore>(
      new SqlJobStore<SqliteDb>(std::move(db).value(), graph, clock, options));
}

Result<std::unique_ptr<JobStore>> OpenPgJobStore(const std::string& uri, const StageGraph* graph,
                                                 const Clock* clock, const StoreOptions& options) {
  PgOptions po;
  po.reconnect_for_ms = options.reconnect_for_ms;
  po.connect_wait_ms = options.connect_wait_ms;
  auto db = PgDb::Open(uri, po);
  if (!db.ok()) return db.status();
  FM_RETURN_IF_ERROR(Migrate(**db, EmbeddedMigrations(SqlDialect::kPostgres)));
  return std::unique_ptr<JobStore>(
      new SqlJobStore<PgDb>(std::move(db).value(), graph, clock, options));
}

namespace sql {

std::string Placeholders(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += i ? ",?" : "?";
  return s;
}

std::string ValueRows(size_t rows, size_t columns) {
  const std::string row = "(" + Placeholders(columns) + ")";
  std::string s;
  for (size_t i = 0; i < rows; ++i) s += (i ? "," : "") + row;
  return s;
}

Status ForEachChunk(size_t n, const std::function<Status(size_t first, size_t count)>& fn) {
  for (size_t first = 0; first < n;) {
    const size_t count = std::bit_floor(std::min(n - first, kMaxRowsPerStatement));
    FM_RETURN_IF_ERROR(fn(first, count));
    first += count;
  }
  return Status::OK();
}

}  // namespace sql

template <class Db>
SqlJobStore<Db>::SqlJobStore(std::unique_ptr<Db> db, const StageGraph* graph,
                             const Clock* clock, StoreOptions options)
    : db_(std::move(db)),
      enqueue_(std::make_unique<sql::SqlEnqueue<Db>>(db_.get(), graph, clock, options)),
      claim_(std::make_unique<sql::SqlClaim<Db>>(db_.get(), graph, clock, options)),
      complete_(std::make_unique<sql::SqlComplete<Db>>(db_.get(), graph, clock, options)),
      runs_(std::make_unique<sql::SqlRuns<Db>>(db_.get(), graph, clock, options)),
      maintenance_(std::make_unique<sql::SqlMaintenance<Db>>(db_.get(), graph, clock, options)),
      queries_(std::make_unique<sql::SqlQueries<Db>>(db_.get(), graph, clock, options)) {}

template <class Db>
SqlJobStore<Db>::~SqlJobStore() = default;

// Enqueue (sql_enqueue.cc).
template <class Db>
Result<std::unordered_map<std::string, ItemRecord>> SqlJobStore<Db>::LoadItems() {
  return enqueue_->LoadItems();
}
template <class Db>
Result<EnqueueStats> SqlJobStore<Db>::Enqueue(const std::vector<NewItem>& items,
                                              const EnqueueOptions& options) {
  return enqueue_->Enqueue(items, options);
}

// Leases (sql_claim.cc).
template <class Db>
Result<std::vector<ClaimedJob>> SqlJobStore<Db>::Claim(const std::string& worker,
                                                       const std::vector<std::string>& stages,
                                                       int limit, int64_t lease_ms) {
  return claim_->Claim(worker, stages, limit, lease_ms, sql::ClaimBy::kJobs);
}
template <class Db>
Result<std::vector<ClaimedJob>> SqlJobStore<Db>::ClaimItems(const std::string& worker,
                                                            const std::vector<std::string>& stages,
                                                            int items, int64_t lease_ms) {
  return claim_->Claim(worker, stages, items, lease_ms, sql::ClaimBy::kItems);
}
template <class Db>
Result<int> SqlJobStore<Db>::Heartbeat(const std::string& worker, int64_t lease_ms) {
  return claim_->Heartbeat(worker, lease_ms);
}
template <class Db>
Result<int> SqlJobStore<Db>::RescueExpired() {
  return claim_->RescueExpired();
}
template <class Db>
Result<int> SqlJobStore<Db>::RescueWorkerJobs(int64_t run_id, int pid,
                                              const std::string& error_class,
                                              const std::string& reason) {
  return claim_->RescueWorkerJobs(run_id, pid, error_class, reason);
}
template <class Db>
Result<int> SqlJobStore<Db>::ReleaseWorkerJobs(int64_t run_id, int pid) {
  return claim_->ReleaseWorkerJobs(run_id, pid);
}
template <class Db>
Result<int> SqlJobStore<Db>::Release(const std::vector<ClaimedJob>& jobs) {
  return claim_->Release(jobs);
}
template <class Db>
Result<bool> SqlJobStore<Db>::WaitForWork(int64_t ms) {
  return claim_->WaitForWork(ms);
}

// Outcomes (sql_complete.cc).
template <class Db>
Result<CompleteStats> SqlJobStore<Db>::Complete(const std::vector<FinishedJob>& batch) {
  return complete_->Complete(batch);
}

// Bookkeeping (sql_runs.cc).
template <class Db>
Result<int64_t> SqlJobStore<Db>::BeginRun(int workers, const std::string& stages) {
  return runs_->BeginRun(workers, stages);
}
template <class Db>
Status SqlJobStore<Db>::EndRun(int64_t run_id, int exit_code) {
  return runs_->EndRun(run_id, exit_code);
}
template <class Db>
Status SqlJobStore<Db>::RegisterWorker(const std::string& worker, int64_t run_id, int pid,
                                       const std::string& host) {
  return runs_->RegisterWorker(worker, run_id, pid, host);
}
template <class Db>
Status SqlJobStore<Db>::WorkerStopped(const std::string& worker) {
  return runs_->WorkerStopped(worker);
}
template <class Db>
Status SqlJobStore<Db>::AddGpuEvents(const std::string& worker, const DeviceUse& use) {
  return runs_->AddGpuEvents(worker, use);
}
template <class Db>
Result<std::optional<TuningRecord>> SqlJobStore<Db>::LoadTuning(const std::string& op,
                                                                const std::string& device,
                                                                int size_bucket) {
  return runs_->LoadTuning(op, device, size_bucket);
}
template <class Db>
Status SqlJobStore<Db>::SaveTuning(const TuningRecord& record) {
  return runs_->SaveTuning(record);
}

// User commands (sql_maintenance.cc).
template <class Db>
Result<int64_t> SqlJobStore<Db>::RetryFailed(const std::string& stage,
                                             const std::string& error_class) {
  return maintenance_->RetryFailed(stage, error_class);
}
template <class Db>
Result<GcStats> SqlJobStore<Db>::CollectGarbage(const GcOptions& options) {
  return maintenance_->CollectGarbage(options);
}

// Reads (sql_queries.cc).
template <class Db>
Result<JobStore::Outstanding> SqlJobStore<Db>::CountOutstanding(
    const std::vector<std::string>& stages) {
  return queries_->CountOutstanding(stages);
}
template <class Db>
Result<std::vector<StageCounts>> SqlJobStore<Db>::Counts(int64_t window_ms) {
  return queries_->Counts(window_ms);
}
template <class Db>
Result<int64_t> SqlJobStore<Db>::ItemCount() {
  return queries_->ItemCount();
}
template <class Db>
Result<std::vector<ErrorClassCount>> SqlJobStore<Db>::FailuresByClass() {
  return queries_->FailuresByClass();
}
template <class Db>
Result<int64_t> SqlJobStore<Db>::CountErrorsSince(const std::string& error_class, int64_t since_ms) {
  return queries_->CountErrorsSince(error_class, since_ms);
}
template <class Db>
Result<std::vector<RunRecord>> SqlJobStore<Db>::Runs(int limit) {
  return queries_->Runs(limit);
}
template <class Db>
Status SqlJobStore<Db>::ForEachItem(const std::function<Status(const ItemView&)>& fn) {
  return queries_->ForEachItem(fn);
}
template <class Db>
Result<std::vector<JobTime>> SqlJobStore<Db>::RecentJobTimes(int64_t limit) {
  return queries_->RecentJobTimes(limit);
}

template <class Db>
Result<std::vector<ErrorRecord>> SqlJobStore<Db>::ErrorHistory(int64_t limit) {
  return queries_->ErrorHistory(limit);
}
template <class Db>
Status SqlJobStore<Db>::ForEachResult(const std::string& stage,
                                      const std::function<Status(const ExportRow&)>& fn) {
  return queries_->ForEachResult(stage, fn);
}
template <class Db>
Status SqlJobStore<Db>::ForEachResultFinishedSince(const std::string& stage, int64_t since_ms,
                                                   const std::function<Status(const ExportRow&)>& fn) {
  return queries_->ForEachResultFinishedSince(stage, since_ms, fn);
}
template <class Db>
Result<std::optional<ExportRow>> SqlJobStore<Db>::ResultOf(int64_t item_id,
                                                           const std::string& stage) {
  return queries_->ResultOf(item_id, stage);
}

template class SqlJobStore<SqliteDb>;
template class SqlJobStore<PgDb>;

}  // namespace framemill
