// Bookkeeping: runs and their workers (what `status` and the report say about who ran
// what), GPU events, and the batch tuner's memory of the batch sizes that fit.
#include "storage/sql_store_internal.h"

namespace framemill::sql {

template <class Db>
Result<int64_t> SqlRuns<Db>::BeginRun(int workers, const std::string& stages) {
  return InTxn<int64_t>(*db_, TxnKind::kWrite, [&]() -> Result<int64_t> {
    FM_PREPARE(ins, "INSERT INTO runs (started_at, workers, stages) VALUES (?,?,?) RETURNING id");
    ins.Bind(1, Now()).Bind(2, workers).Bind(3, stages);
    FM_STEP(row, ins.Step());
    if (!row) return Status::Internal("inserting a run returned no id");
    return ins.Int(0);
  });
}

template <class Db>
Status SqlRuns<Db>::EndRun(int64_t run_id, int exit_code) {
  return db_->Transaction(TxnKind::kWrite, [&]() -> Status {
    FM_PREPARE(up, "UPDATE runs SET finished_at = ?, exit_code = ?,"
                   " jobs_done = (SELECT coalesce(sum(jobs_done), 0) FROM workers WHERE run_id = ?),"
                   " jobs_failed = (SELECT coalesce(sum(jobs_failed), 0) FROM workers WHERE run_id = ?),"
                   " oom_events = (SELECT coalesce(sum(oom_events), 0) FROM workers WHERE run_id = ?),"
                   " cpu_fallbacks = (SELECT coalesce(sum(cpu_fallbacks), 0) FROM workers"
                   "                  WHERE run_id = ?)"
                   " WHERE id = ?");
    return up.Bind(1, Now()).Bind(2, exit_code).Bind(3, run_id).Bind(4, run_id)
        .Bind(5, run_id).Bind(6, run_id).Bind(7, run_id).Run();
  });
}

template <class Db>
Status SqlRuns<Db>::RegisterWorker(const std::string& worker, int64_t run_id, int pid,
                                      const std::string& host) {
  return db_->Transaction(TxnKind::kWrite, [&]() -> Status {
    const int64_t now = Now();
    FM_PREPARE(ins, "INSERT INTO workers (id, run_id, pid, host, started_at, heartbeat_at)"
                    " VALUES (?,?,?,?,?,?) ON CONFLICT (id) DO UPDATE SET heartbeat_at = ?");
    ins.Bind(1, worker);
    if (run_id > 0) ins.Bind(2, run_id); else ins.BindNull(2);
    return ins.Bind(3, pid).Bind(4, host).Bind(5, now).Bind(6, now).Bind(7, now).Run();
  });
}

template <class Db>
Status SqlRuns<Db>::WorkerStopped(const std::string& worker) {
  return db_->Transaction(TxnKind::kWrite, [&]() -> Status {
    FM_PREPARE(up, "UPDATE workers SET stopped_at = ? WHERE id = ?");
    return up.Bind(1, Now()).Bind(2, worker).Run();
  });
}

template <class Db>
Status SqlRuns<Db>::AddGpuEvents(const std::string& worker, const DeviceUse& use) {
  return db_->Transaction(TxnKind::kWrite, [&]() -> Status {
    FM_PREPARE(up, "UPDATE workers SET oom_events = oom_events + ?,"
                   " cpu_fallbacks = cpu_fallbacks + ?, device = coalesce(?, device),"
                   " device_total_mb = coalesce(?, device_total_mb),"
                   " peak_planned_mb = CASE WHEN peak_planned_mb > ? THEN peak_planned_mb"
                   " ELSE ? END, device_busy_from_ms = coalesce(device_busy_from_ms, ?),"
                   " device_busy_to_ms = coalesce(?, device_busy_to_ms) WHERE id = ?");
    up.Bind(1, use.oom_events).Bind(2, use.cpu_fallbacks);
    if (use.device.empty()) {  // a worker on the CPU alone: no device to name
      up.BindNull(3).BindNull(4);
    } else {
      up.Bind(3, use.device).Bind(4, use.total_mb);
    }
    up.Bind(5, use.peak_planned_mb).Bind(6, use.peak_planned_mb);
    if (use.busy_from_ms >= 0) up.Bind(7, use.busy_from_ms); else up.BindNull(7);
    if (use.busy_to_ms >= 0) up.Bind(8, use.busy_to_ms); else up.BindNull(8);
    return up.Bind(9, worker).Run();
  });
}

template <class Db>
Result<std::optional<TuningRecord>> SqlRuns<Db>::LoadTuning(const std::string& op,
                                                               const std::string& device,
                                                               int size_bucket) {
  using Found = std::optional<TuningRecord>;
  return InTxn<Found>(*db_, TxnKind::kRead, [&]() -> Result<Found> {
    FM_PREPARE(q, "SELECT batch, bytes_per_item FROM batch_tuning"
                  " WHERE op = ? AND device = ? AND size_bucket = ?");
    q.Bind(1, op).Bind(2, device).Bind(3, size_bucket);
    FM_STEP(row, q.Step());
    if (!row) return Found();
    return Found(TuningRecord{op, device, size_bucket, static_cast<int>(q.Int(0)), q.Int(1)});
  });
}

template <class Db>
Status SqlRuns<Db>::SaveTuning(const TuningRecord& r) {
  return db_->Transaction(TxnKind::kWrite, [&]() -> Status {
    FM_PREPARE(up, "INSERT INTO batch_tuning (op, device, size_bucket, batch, bytes_per_item,"
                   " updated_at) VALUES (?,?,?,?,?,?) ON CONFLICT (op, device, size_bucket)"
                   " DO UPDATE SET batch = excluded.batch,"
                   " bytes_per_item = excluded.bytes_per_item, updated_at = excluded.updated_at");
    return up.Bind(1, r.op).Bind(2, r.device).Bind(3, r.size_bucket).Bind(4, r.batch)
        .Bind(5, r.bytes_per_item).Bind(6, Now()).Run();
  });
}

template class SqlRuns<SqliteDb>;
template class SqlRuns<PgDb>;

}  // namespace framemill::sql
