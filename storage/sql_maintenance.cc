// What users ask of the store's jobs: `framemill retry` (failed jobs, and the dependants
// that failed because of them, run again) and `framemill gc` (old history removed).
#include "storage/sql_store_internal.h"

namespace framemill::sql {

template <class Db>
Result<int64_t> SqlMaintenance<Db>::RetryFailed(const std::string& stage,
                                                const std::string& error_class) {
  return InTxn<int64_t>(*db_, TxnKind::kWrite, [&]() -> Result<int64_t> {
    FM_RETURN_IF_ERROR(LockGraph());
    auto retried = ResetFailed(stage, error_class);
    if (!retried.ok()) return retried.status();
    FM_RETURN_IF_ERROR(ReviveDependants(*retried));
    FM_RETURN_IF_ERROR(RefailBlocked(&*retried, Now()));
    const auto n = static_cast<int64_t>(retried->size());
    FM_PREPARE(ready,
               "UPDATE jobs SET state = ? WHERE state = ? AND item_id NOT IN"
               " (SELECT id FROM items WHERE kind = 0) AND NOT EXISTS"
               " (SELECT 1 FROM job_deps d JOIN jobs j ON j.id = d.dep_id"
               "  WHERE d.job_id = jobs.id AND j.state <> ?)");
    FM_RETURN_IF_ERROR(ready.Bind(1, kPending).Bind(2, kWaiting).Bind(3, kDone).Run());
    FM_RETURN_IF_ERROR(this->RearmDatasetJobs());
    if (n > 0) FM_RETURN_IF_ERROR(Notify());
    FM_RETURN_IF_ERROR(this->PromoteDatasetJobs(Now()));
    return n;
  });
}

template <class Db>
Result<std::set<int64_t>> SqlMaintenance<Db>::ResetFailed(const std::string& stage,
                                                          const std::string& error_class) {
  // A job waits again if any dependency is not done (it may itself be retried now).
  std::string sql =
      "UPDATE jobs SET attempts = 0, next_run_at = 0, error_class = NULL, last_error = NULL,"
      " finished_at = NULL, device = NULL, state = ?1 WHERE state = ?2" +
      std::string(stage.empty() ? "" : " AND stage = ?3") +
      std::string(error_class.empty() ? "" : " AND error_class = ?4") + " RETURNING id";
  FM_PREPARE(up, sql);
  up.Bind(1, kWaiting).Bind(2, kFailed);
  if (!stage.empty()) up.Bind(3, stage);
  if (!error_class.empty()) up.Bind(4, error_class);
  std::set<int64_t> retried;
  for (;;) {
    FM_STEP(row, up.Step());
    if (!row) break;
    retried.insert(up.Int(0));
  }
  return retried;
}

template <class Db>
Status SqlMaintenance<Db>::ReviveDependants(const std::set<int64_t>& retried) {
  for (int64_t id : retried) {
    FM_PREPARE(revive,
               "WITH RECURSIVE down(id) AS ("
               "  SELECT job_id FROM job_deps WHERE dep_id = ?"
               "  UNION SELECT d.job_id FROM job_deps d JOIN down ON d.dep_id = down.id)"
               " UPDATE jobs SET state = ?, attempts = 0, next_run_at = 0, error_class = NULL,"
               " last_error = NULL, finished_at = NULL, device = NULL"
               " WHERE id IN (SELECT id FROM down) AND ((state = ?"
               " AND error_class = 'dependency_failed') OR (state = " S_SKIPPED
               " AND error_class = 'fetch_failed'))");
    FM_RETURN_IF_ERROR(revive.Bind(1, id).Bind(2, kWaiting).Bind(3, kFailed).Run());
  }
  return Status::OK();
}

template <class Db>
Status SqlMaintenance<Db>::RefailBlocked(std::set<int64_t>* retried, int64_t now) {
  for (;;) {
    FM_PREPARE(refail,
               "UPDATE jobs SET state = ?, error_class = 'dependency_failed',"
               " last_error = 'a dependency failed', finished_at = ?"
               " WHERE state = ? AND EXISTS (SELECT 1 FROM job_deps d JOIN jobs j"
               "  ON j.id = d.dep_id WHERE d.job_id = jobs.id AND j.state = ?)"
               " RETURNING id");
    refail.Bind(1, kFailed).Bind(2, now).Bind(3, kWaiting).Bind(4, kFailed);
    int changed = 0;
    for (;;) {
      FM_STEP(row, refail.Step());
      if (!row) break;
      ++changed;
      retried->erase(refail.Int(0));
    }
    if (changed == 0) return Status::OK();
  }
}

namespace {
// What gc removes, as conditions over each table; ?1 is the cutoff, ?2 the runs kept.
constexpr char kOldErrors[] =
    "job_errors WHERE at < ?1 AND id NOT IN (SELECT max(id) FROM job_errors GROUP BY job_id)";
constexpr char kOldWorkers[] =
    "workers WHERE coalesce(stopped_at, heartbeat_at) < ?1"
    " AND (stopped_at IS NOT NULL OR heartbeat_at < ?3) AND NOT EXISTS"
    " (SELECT 1 FROM jobs WHERE lease_owner = workers.id)";
// Runs are deleted after the workers, so the subquery sees only the workers that stay.
constexpr char kOldRuns[] =
    "runs WHERE coalesce(finished_at, started_at) < ?1"
    " AND id NOT IN (SELECT id FROM runs ORDER BY id DESC LIMIT ?2)"
    " AND id NOT IN (SELECT run_id FROM workers WHERE run_id IS NOT NULL)";
}  // namespace

template <class Db>
Result<GcStats> SqlMaintenance<Db>::CollectGarbage(const GcOptions& options) {
  GcStats stats;
  auto remove = [&](const char* what, int64_t* count) -> Status {
    FM_PREPARE(q, std::string("DELETE FROM ") + what);
    // Each statement uses some of ?1..?3; binding one it lacks is a no-op.
    FM_RETURN_IF_ERROR(q.Bind(1, options.before_ms)
                           .Bind(2, static_cast<int64_t>(options.keep_runs))
                           .Bind(3, options.silent_before_ms).Run());
    *count = static_cast<int64_t>(db_->Changes());
    return Status::OK();
  };
  // A dry run deletes too, then rolls back: its counts are exactly what gc would remove.
  const Status kDryRun = Status::Aborted("dry run: rolled back");
  Status s = db_->Transaction(TxnKind::kWrite, [&]() -> Status {
    stats = GcStats();
    FM_RETURN_IF_ERROR(remove(kOldErrors, &stats.job_errors));
    FM_RETURN_IF_ERROR(remove(kOldWorkers, &stats.workers));
    FM_RETURN_IF_ERROR(remove(kOldRuns, &stats.runs));
    return options.dry_run ? kDryRun : Status::OK();
  });
  if (!s.ok() && !(options.dry_run && s.IsAborted())) return s;
  return stats;
}

template class SqlMaintenance<SqliteDb>;
template class SqlMaintenance<PgDb>;

}  // namespace framemill::sql
