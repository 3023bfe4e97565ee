// Completion: a batch of outcomes in one transaction. Each is fenced by its lease token
// (a worker that lost its lease cannot overwrite the job), recorded, and what it changes
// downstream (promotion, cascades, a download's file) changed with it. Done outcomes of
// stages nothing depends on, the common case, take one statement each for the batch.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "storage/sql_store_internal.h"

namespace framemill::sql {
namespace {
// A job done: its lease ends and its error is cleared; the ids follow ("IN (...)" or "= ?").
constexpr const char* kMarkDone =
    "UPDATE jobs SET state = " S_DONE ", finished_at = ?, device = ?,"
    " done_token = lease_token, lease_owner = NULL, lease_token = NULL,"
    " lease_expires_at = NULL, suspect = 0, error_class = NULL, last_error = NULL WHERE id ";
}  // namespace

template <class Db>
Result<CompleteStats> SqlComplete<Db>::Complete(const std::vector<FinishedJob>& batch) {
  // Serialised before the write lock is taken: the lock is held only for the writes.
  std::vector<SerializedDone> done(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const Outcome& o = batch[i].outcome;
    if (!o.done()) continue;
    done[i].result = JsonDump(o.result);
    done[i].artifacts = JsonDump(nlohmann::json(o.artifacts));
  }
  // Outcomes that can change other jobs (promotion, cascades) serialise on the graph.
  const bool graph = std::any_of(batch.begin(), batch.end(), [&](const FinishedJob& f) {
    return f.stage.empty() || HasDependants(f.stage);
  });
  return InTxn<CompleteStats>(*db_, TxnKind::kWrite, [&]() -> Result<CompleteStats> {
    CompleteStats stats;
    if (graph) FM_RETURN_IF_ERROR(LockGraph());
    Tallies per_worker;
    const int64_t now = Now();
    done_in_txn_.clear();
    std::vector<bool> recorded(batch.size(), false);
    FM_RETURN_IF_ERROR(CompleteLeavesDone(batch, done, now, &recorded, &stats, &per_worker));
    for (size_t i = 0; i < batch.size(); ++i)
      if (!recorded[i]) FM_RETURN_IF_ERROR(CompleteOne(batch[i], done[i], now, &stats, &per_worker));
    FM_RETURN_IF_ERROR(AddWorkerTallies(per_worker, now));
    FM_RETURN_IF_ERROR(this->PromoteDatasetJobs(now));
    return stats;
  });
}

template <class Db>
Status SqlComplete<Db>::CompleteLeavesDone(const std::vector<FinishedJob>& batch,
                                           const std::vector<SerializedDone>& done, int64_t now,
                                           std::vector<bool>* recorded, CompleteStats* stats,
                                           Tallies* per_worker) {
  std::vector<size_t> candidates;
  for (size_t i = 0; i < batch.size(); ++i)
    if (batch[i].outcome.done() && !batch[i].outcome.fetched) candidates.push_back(i);
  if (candidates.size() < 2) return Status::OK();
  auto held = FenceAll(batch, candidates);
  if (!held.ok()) return held.status();
  std::map<std::string, std::vector<size_t>> by_device;  // what we hold, of leaf stages
  std::set<int64_t> seen;
  for (size_t i : candidates) {
    auto it = held->find(batch[i].job_id);
    if (it == held->end() || it->second.token != batch[i].lease_token ||
        HasDependants(it->second.stage) || !seen.insert(batch[i].job_id).second)
      continue;  // stale, promotes others, or given twice: CompleteOne says which
    by_device[batch[i].outcome.device].push_back(i);
  }
  std::vector<size_t> mine;
  for (const auto& [device, rows] : by_device) {
    FM_RETURN_IF_ERROR(MarkDone(batch, rows, device, now));
    mine.insert(mine.end(), rows.begin(), rows.end());
  }
  if (mine.empty()) return Status::OK();
  FM_RETURN_IF_ERROR(StoreResults(batch, done, mine, now));
  for (size_t i : mine) {
    done_in_txn_.insert(batch[i].job_id);
    (*recorded)[i] = true;
    ++stats->done;
    ++(*per_worker)[held->at(batch[i].job_id).worker].done;
  }
  return Status::OK();
}

// Fence, as CompleteOne does, for all of `rows` at once: the running ones' leases.
template <class Db>
Result<std::map<int64_t, typename SqlComplete<Db>::Fenced>> SqlComplete<Db>::FenceAll(
    const std::vector<FinishedJob>& batch, const std::vector<size_t>& rows) {
  FM_PREPARE(own, "SELECT id, lease_token, lease_owner, stage FROM jobs WHERE state = " S_RUNNING
                  " AND id IN (" + Placeholders(rows.size()) + ")" +
                  Dialect<Db>::kForUpdate);
  for (size_t k = 0; k < rows.size(); ++k) own.Bind(static_cast<int>(k + 1), batch[rows[k]].job_id);
  std::map<int64_t, Fenced> held;
  for (;;) {
    FM_STEP(row, own.Step());
    if (!row) break;
    held[own.Int(0)] = {own.Int(1), own.Text(2), own.Text(3)};
  }
  return held;
}

template <class Db>
Status SqlComplete<Db>::MarkDone(const std::vector<FinishedJob>& batch,
                                 const std::vector<size_t>& rows, const std::string& device,
                                 int64_t now) {
  FM_PREPARE(up, std::string(kMarkDone) + "IN (" + Placeholders(rows.size()) + ")");
  up.Bind(1, now).Bind(2, device);
  for (size_t k = 0; k < rows.size(); ++k) up.Bind(static_cast<int>(k + 3), batch[rows[k]].job_id);
  return up.Run();
}

template <class Db>
Status SqlComplete<Db>::StoreResults(const std::vector<FinishedJob>& batch,
                                     const std::vector<SerializedDone>& done,
                                     const std::vector<size_t>& rows, int64_t now) {
  FM_PREPARE(res, kInsertResult + ValueRows(rows.size(), kResultColumns) + kOnResultConflict);
  for (size_t k = 0; k < rows.size(); ++k) {
    const size_t i = rows[k];
    const int at = kResultColumns * static_cast<int>(k);
    res.Bind(at + 1, batch[i].job_id).Bind(at + 2, batch[i].outcome.device)
        .Bind(at + 3, done[i].result).Bind(at + 4, done[i].artifacts).Bind(at + 5, now);
    BindJobTime(res, at + 6, batch[i]);
  }
  return res.Run();
}

template <class Db>
Status SqlComplete<Db>::CompleteOne(const FinishedJob& f, const SerializedDone& done, int64_t now,
                                   CompleteStats* stats,
                                   Tallies* per_worker) {
  // Fence: only the holder of the current lease may record an outcome.
  static const std::string kFence = std::string(
      "SELECT attempts, lease_owner, stage FROM jobs"
      " WHERE id = ? AND state = " S_RUNNING " AND lease_token = ?") + Dialect<Db>::kForUpdate;
  FM_PREPARE(own, kFence);
  own.Bind(1, f.job_id).Bind(2, f.lease_token);
  FM_STEP(held, own.Step());
  if (!held) {
    if (f.outcome.done() && done_in_txn_.count(f.job_id) == 0) {
      // This very completion, committed once already (its reply was lost with the
      // connection, and the transaction ran again): done, and its artifacts are the result's.
      FM_PREPARE(mine, "SELECT 1 FROM jobs WHERE id = ? AND state = " S_DONE " AND done_token = ?");
      mine.Bind(1, f.job_id).Bind(2, f.lease_token);
      FM_STEP(replay, mine.Step());
      if (replay) {
        ++stats->done;
        return Status::OK();
      }
    }
    ++stats->stale;
    stats->stale_jobs.push_back(f.job_id);
    return Status::OK();
  }
  const HeldJob job{f.job_id, static_cast<int>(own.Int(0)), own.Text(1), own.Text(2)};
  switch (f.outcome.kind) {
    case Outcome::Kind::kDone:
      ++stats->done;
      ++(*per_worker)[job.worker].done;
      return RecordDone(job, f, done, now);
    case Outcome::Kind::kSkipped:
      ++stats->skipped;
      return RecordSkipped(job, f.outcome, now);
    case Outcome::Kind::kFailed:
      if (f.retry_at_ms > 0) {
        ++stats->retried;
      } else {
        ++stats->failed;
        ++(*per_worker)[job.worker].failed;
      }
      return RecordFailed(job, f.outcome, RetryAt(f, now), now);
  }
  return Status::Internal("unknown outcome kind");
}

template <class Db>
Status SqlComplete<Db>::RecordDone(const HeldJob& job, const FinishedJob& f, const SerializedDone& done,
                                  int64_t now) {
  const Outcome& o = f.outcome;
  FM_PREPARE(up, std::string(kMarkDone) + "= ?");
  FM_RETURN_IF_ERROR(up.Bind(1, now).Bind(2, o.device).Bind(3, job.id).Run());
  done_in_txn_.insert(job.id);
  FM_PREPARE(res, kInsertResult + ValueRows(1, kResultColumns) + kOnResultConflict);
  res.Bind(1, job.id).Bind(2, o.device).Bind(3, done.result).Bind(4, done.artifacts).Bind(5, now);
  BindJobTime(res, 6, f);
  FM_RETURN_IF_ERROR(res.Run());
  if (o.fetched) {
    FM_RETURN_IF_ERROR(this->ApplyFetched(job.id, *o.fetched, now));
  } else if (const StageSpec* spec = graph_->Find(job.stage); spec != nullptr && spec->downloads) {
    // A download that says done without a file: nothing can run on this item.
    FM_RETURN_IF_ERROR(this->CascadeTerminal(job.id, JobState::kSkipped, "fetch_failed",
                                       "the fetch recorded no local file", now));
  }
  if (HasDependants(job.stage)) FM_RETURN_IF_ERROR(this->PromoteDependants(job.id, now));
  return Status::OK();
}

template <class Db>
Status SqlComplete<Db>::RecordSkipped(const HeldJob& job, const Outcome& o, int64_t now) {
  FM_PREPARE(up, "UPDATE jobs SET state = " S_SKIPPED ", finished_at = ?, lease_owner = NULL,"
                 " lease_token = NULL, lease_expires_at = NULL,"
                 " error_class = 'not_applicable', last_error = ? WHERE id = ?");
  FM_RETURN_IF_ERROR(up.Bind(1, now).Bind(2, o.error.message()).Bind(3, job.id).Run());
  if (!HasDependants(job.stage)) return Status::OK();
  return this->CascadeTerminal(job.id, JobState::kSkipped, "not_applicable", "a dependency was skipped",
                         now);
}

template <class Db>
Status SqlComplete<Db>::RecordFailed(const HeldJob& job, const Outcome& o, int64_t retry_at_ms,
                                    int64_t now) {
  const std::string why_class = o.ErrorClass();
  FM_RETURN_IF_ERROR(InsertJobError(*db_, job.id, job.attempts, job.worker, o.error, why_class, now));
  if (retry_at_ms > 0) {
    FM_PREPARE(up, "UPDATE jobs SET state = " S_PENDING ", next_run_at = ?,"
                   " lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,"
                   " error_class = ?, last_error = ? WHERE id = ?");
    return up.Bind(1, retry_at_ms).Bind(2, why_class).Bind(3, o.error.message())
        .Bind(4, job.id).Run();
  }
  FM_PREPARE(up, "UPDATE jobs SET state = " S_FAILED ", finished_at = ?, device = ?,"
                 " lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,"
                 " error_class = ?, last_error = ? WHERE id = ?");
  FM_RETURN_IF_ERROR(up.Bind(1, now).Bind(2, o.device).Bind(3, why_class)
                         .Bind(4, o.error.message()).Bind(5, job.id).Run());
  if (!HasDependants(job.stage)) return Status::OK();
  return this->CascadeFailure(job.id, job.stage, why_class, now);
}

template <class Db>
Status SqlComplete<Db>::AddWorkerTallies(const Tallies& per_worker,
                                        int64_t now) {
  for (const auto& [worker, t] : per_worker) {
    FM_PREPARE(w, "UPDATE workers SET heartbeat_at = ?, jobs_done = jobs_done + ?,"
                  " jobs_failed = jobs_failed + ? WHERE id = ?");
    FM_RETURN_IF_ERROR(w.Bind(1, now).Bind(2, t.done).Bind(3, t.failed).Bind(4, worker).Run());
  }
  return Status::OK();
}

template <class Db>
int64_t SqlComplete<Db>::RetryAt(const FinishedJob& f, int64_t now) const {
  if (f.retry_at_ms <= 0 || f.decided_at_ms <= 0) return f.retry_at_ms;
  return now + std::max<int64_t>(0, f.retry_at_ms - f.decided_at_ms);
}

template class SqlComplete<SqliteDb>;
template class SqlComplete<PgDb>;

}  // namespace framemill::sql
