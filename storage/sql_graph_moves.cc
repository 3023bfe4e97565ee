// State changes that ripple through the job graph: promotion of dependants, cascades of a
// terminal state downstream, a download's result, dataset-level jobs. Shared by enqueue,
// rescue, completion and retry; each runs inside the caller's transaction.
#include <utility>
#include <vector>

#include "base/json_text.h"
#include "storage/sql_store_internal.h"

namespace framemill::sql {

template <class Db>
Status SqlGraphMoves<Db>::PromoteDependants(int64_t job_id, int64_t now) {
  FM_PREPARE(up,
             "UPDATE jobs SET state = " S_PENDING ", next_run_at = ? WHERE state = " S_WAITING
             " AND id IN (SELECT job_id FROM job_deps WHERE dep_id = ?)"
             " AND NOT EXISTS (SELECT 1 FROM job_deps d JOIN jobs j ON j.id = d.dep_id"
             "                 WHERE d.job_id = jobs.id AND j.state <> " S_DONE ")");
  FM_RETURN_IF_ERROR(up.Bind(1, now).Bind(2, job_id).Run());
  return db_->Changes() > 0 ? Notify() : Status::OK();
}

template <class Db>
Status SqlGraphMoves<Db>::CascadeTerminal(int64_t job_id, JobState to,
                                          const std::string& error_class,
                                          const std::string& reason, int64_t now) {
  FM_PREPARE(up,
             "WITH RECURSIVE down(id) AS ("
             "  SELECT job_id FROM job_deps WHERE dep_id = ?"
             "  UNION SELECT d.job_id FROM job_deps d JOIN down ON d.dep_id = down.id)"
             " UPDATE jobs SET state = ?, error_class = ?, last_error = ?, finished_at = ?"
             " WHERE id IN (SELECT id FROM down) AND state = " S_WAITING);
  return up.Bind(1, job_id).Bind(2, static_cast<int>(to)).Bind(3, error_class)
      .Bind(4, reason).Bind(5, now).Run();
}

template <class Db>
Status SqlGraphMoves<Db>::CascadeFailure(int64_t job_id, const std::string& stage,
                                         const std::string& error_class, int64_t now) {
  // A URL that could not be downloaded has no media to analyse: its other jobs are
  // skipped (the failure is the download's), not failed.
  const StageSpec* spec = graph_->Find(stage);
  if (spec != nullptr && spec->downloads)
    return CascadeTerminal(job_id, JobState::kSkipped, "fetch_failed",
                           "the fetch of this URL failed (" + error_class + ")", now);
  return CascadeTerminal(job_id, JobState::kFailed, "dependency_failed", "a dependency failed",
                         now);
}

template <class Db>
Status SqlGraphMoves<Db>::ApplyFetched(int64_t job_id, const FetchedFile& file, int64_t now) {
  FM_PREPARE(up, "UPDATE items SET fetched_path = ?, kind = ?, content_hash = ?, size = ?,"
                 " media_info = ?, updated_at = ? WHERE id = (SELECT item_id FROM jobs WHERE id = ?)"
                 " RETURNING id");
  up.Bind(1, file.path).Bind(2, static_cast<int>(file.kind)).Bind(3, file.content_hash)
      .Bind(4, file.bytes).Bind(5, JsonDump(file.media_info)).Bind(6, now).Bind(7, job_id);
  FM_STEP(row, up.Step());
  if (!row) return Status::Internal("fetch job " + std::to_string(job_id) + " has no item");
  return SkipNotApplicable(up.Int(0), file.kind, now);
}

template <class Db>
Status SqlGraphMoves<Db>::SkipNotApplicable(int64_t item_id, MediaKind kind, int64_t now) {
  FM_PREPARE(waiting, "SELECT id, stage FROM jobs WHERE item_id = ? AND state = " S_WAITING);
  waiting.Bind(1, item_id);
  std::vector<std::pair<int64_t, std::string>> not_applicable;
  for (;;) {
    FM_STEP(w, waiting.Step());
    if (!w) break;
    const StageSpec* spec = graph_->Find(waiting.Text(1));
    if (spec != nullptr && !spec->AppliesTo(kind)) not_applicable.emplace_back(waiting.Int(0), spec->name);
  }
  for (const auto& [id, name] : not_applicable) {
    FM_PREPARE(skip, "UPDATE jobs SET state = " S_SKIPPED ", error_class = 'not_applicable',"
                     " last_error = ?, finished_at = ? WHERE id = ? AND state = " S_WAITING);
    FM_RETURN_IF_ERROR(skip.Bind(1, name + " does not apply to " +
                                        std::string(MediaKindName(kind)) + " items")
                           .Bind(2, now).Bind(3, id).Run());
    FM_RETURN_IF_ERROR(CascadeTerminal(id, JobState::kSkipped, "not_applicable",
                                       "dependency " + name + " was skipped", now));
  }
  return Status::OK();
}

template <class Db>
Status SqlGraphMoves<Db>::RearmDatasetJobs() {
  for (const StageSpec& spec : graph_->stages()) {
    if (!spec.dataset_level || spec.deps.empty()) continue;
    // Its inputs are being redone: a finished (or running) dataset job saw stale ones.
    // A running one loses its lease, so its completion is refused.
    std::string sql =
        "UPDATE jobs SET state = " S_WAITING ", attempts = 0, next_run_at = 0,"
        " lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,"
        " error_class = NULL, last_error = NULL, finished_at = NULL"
        " WHERE stage = ? AND state <> " S_WAITING " AND EXISTS (SELECT 1 FROM jobs u WHERE"
        " u.stage IN (" + Placeholders(spec.deps.size()) + ") AND u.state IN (" S_PENDING
        "," S_RUNNING "," S_WAITING "))";
    FM_PREPARE(up, sql);
    int i = 1;
    up.Bind(i++, spec.name);
    for (const std::string& d : spec.deps) up.Bind(i++, d);
    FM_RETURN_IF_ERROR(up.Run());
  }
  return Status::OK();
}

template <class Db>
Status SqlGraphMoves<Db>::PromoteDatasetJobs(int64_t now) {
  for (const StageSpec& spec : graph_->stages()) {
    if (!spec.dataset_level) continue;
    std::string sql =
        "UPDATE jobs SET state = " S_PENDING ", next_run_at = ? WHERE state = " S_WAITING
        " AND stage = ? AND NOT EXISTS (SELECT 1 FROM jobs u WHERE u.stage IN (" +
        Placeholders(spec.deps.size()) + ") AND u.state IN (" S_PENDING "," S_RUNNING "," S_WAITING "))";
    FM_PREPARE(up, sql);
    int i = 1;
    up.Bind(i++, now);
    up.Bind(i++, spec.name);
    for (const std::string& d : spec.deps) up.Bind(i++, d);
    FM_RETURN_IF_ERROR(up.Run());
    if (db_->Changes() > 0) FM_RETURN_IF_ERROR(Notify());
  }
  return Status::OK();
}

template class SqlGraphMoves<SqliteDb>;
template class SqlGraphMoves<PgDb>;

}  // namespace framemill::sql
