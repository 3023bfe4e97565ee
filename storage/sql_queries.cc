// The reads behind `status`, the report, `export` and the scheduler's idea of what is left.
// Each reads one snapshot; the exports page through the store, one snapshot per page.
#include <algorithm>

#include "storage/sql_store_internal.h"

namespace framemill::sql {

template <class Db>
Result<JobStore::Outstanding> SqlQueries<Db>::CountOutstanding(
    const std::vector<std::string>& stages) {
  using Outstanding = JobStore::Outstanding;
  if (stages.empty()) return Outstanding();
  std::string sql = "SELECT state, count(*), min(next_run_at) FROM jobs WHERE state IN (" S_PENDING
                    "," S_RUNNING ") AND stage IN (" + Placeholders(stages.size()) + ") GROUP BY state";
  return InTxn<Outstanding>(*db_, TxnKind::kRead, [&]() -> Result<Outstanding> {
    Outstanding o;
    o.now = Now();
    FM_PREPARE(q, sql);
    int i = 1;
    for (const std::string& st : stages) q.Bind(i++, st);
    for (;;) {
      FM_STEP(row, q.Step());
      if (!row) break;
      if (q.Int(0) == kPending) {
        o.pending = q.Int(1);
        o.next_run_at = q.Int(2);
      } else {
        o.running = q.Int(1);
      }
    }
    return o;
  });
}

template <class Db>
Result<std::vector<StageCounts>> SqlQueries<Db>::Counts(int64_t window_ms) {
  using All = std::vector<StageCounts>;
  return InTxn<All>(*db_, TxnKind::kRead, [&]() -> Result<All> {
    std::map<std::string, StageCounts> by;
    const int64_t now = Now();
    FM_RETURN_IF_ERROR(CountStates(&by));
    FM_RETURN_IF_ERROR(CountLater(now, &by));
    FM_RETURN_IF_ERROR(CountRecent(now, window_ms, &by));
    // Report in DAG order, then any stage the graph no longer knows.
    All out;
    for (const StageSpec& spec : graph_->stages()) {
      auto it = by.find(spec.name);
      if (it != by.end()) {
        out.push_back(it->second);
        by.erase(it);
      }
    }
    for (auto& [name, c] : by) out.push_back(c);
    return out;
  });
}

template <class Db>
Status SqlQueries<Db>::CountStates(std::map<std::string, StageCounts>* by) {
  FM_PREPARE(q, "SELECT stage, state, count(*) FROM jobs GROUP BY stage, state");
  for (;;) {
    FM_STEP(row, q.Step());
    if (!row) break;
    StageCounts& c = (*by)[q.Text(0)];
    c.stage = q.Text(0);
    int64_t n = q.Int(2);
    switch (static_cast<JobState>(q.Int(1))) {
      case JobState::kPending: c.pending = n; break;
      case JobState::kRunning: c.running = n; break;
      case JobState::kDone: c.done = n; break;
      case JobState::kFailed: c.failed = n; break;
      case JobState::kSkipped: c.skipped = n; break;
      case JobState::kWaiting: c.waiting = n; break;
    }
  }
  return Status::OK();
}

template <class Db>
Status SqlQueries<Db>::CountLater(int64_t now, std::map<std::string, StageCounts>* by) {
  FM_PREPARE(later, "SELECT stage, count(*), min(next_run_at) FROM jobs"
                    " WHERE state = " S_PENDING " AND next_run_at > ? GROUP BY stage");
  later.Bind(1, now);
  for (;;) {
    FM_STEP(row, later.Step());
    if (!row) break;
    auto it = by->find(later.Text(0));
    if (it == by->end()) continue;
    it->second.retry_later = later.Int(1);
    it->second.next_retry_at = later.Int(2);
  }
  return Status::OK();
}

template <class Db>
Status SqlQueries<Db>::CountRecent(int64_t now, int64_t window_ms,
                                   std::map<std::string, StageCounts>* by) {
  FM_PREPARE(rate, "SELECT stage, count(*), min(finished_at) FROM jobs"
                   " WHERE state = ? AND finished_at >= ? GROUP BY stage");
  rate.Bind(1, kDone).Bind(2, now - window_ms);
  for (;;) {
    FM_STEP(row, rate.Step());
    if (!row) break;
    auto it = by->find(rate.Text(0));
    if (it == by->end()) continue;
    it->second.done_recent = rate.Int(1);
    it->second.window_s = std::max<double>(1.0, (now - rate.Int(2)) / 1000.0);
  }
  return Status::OK();
}

template <class Db>
Result<int64_t> SqlQueries<Db>::ItemCount() {
  return InTxn<int64_t>(*db_, TxnKind::kRead, [&]() -> Result<int64_t> {
    FM_PREPARE(q, "SELECT count(*) FROM items WHERE kind <> 0");
    FM_STEP(row, q.Step());
    return row ? q.Int(0) : 0;
  });
}

template <class Db>
template <class T>
Result<std::vector<T>> SqlQueries<Db>::ReadAll(const std::string& sql,
                                               const std::function<void(Stmt&)>& bind,
                                               const std::function<T(const Stmt&)>& row) {
  return InTxn<std::vector<T>>(*db_, TxnKind::kRead, [&]() -> Result<std::vector<T>> {
    std::vector<T> out;
    FM_PREPARE(q, sql);
    bind(q);
    for (;;) {
      FM_STEP(more, q.Step());
      if (!more) break;
      out.push_back(row(q));
    }
    return out;
  });
}

template <class Db>
Result<std::vector<ErrorClassCount>> SqlQueries<Db>::FailuresByClass() {
  return ReadAll<ErrorClassCount>(
      "SELECT stage, coalesce(error_class, 'unknown'), count(*), min(last_error)"
      " FROM jobs WHERE state = ? GROUP BY 1, 2 ORDER BY 3 DESC",
      [](Stmt& q) { q.Bind(1, kFailed); },
      [](const Stmt& q) { return ErrorClassCount{q.Text(0), q.Text(1), q.Text(3), q.Int(2)}; });
}

template <class Db>
Result<int64_t> SqlQueries<Db>::CountErrorsSince(const std::string& error_class, int64_t since_ms) {
  return InTxn<int64_t>(*db_, TxnKind::kRead, [&]() -> Result<int64_t> {
    FM_PREPARE(q, "SELECT count(*) FROM job_errors WHERE error_class = ? AND at >= ?");
    q.Bind(1, error_class).Bind(2, since_ms);
    FM_STEP(row, q.Step());
    return row ? q.Int(0) : 0;
  });
}

template <class Db>
Result<std::vector<RunRecord>> SqlQueries<Db>::Runs(int limit) {
  auto runs = RunRows(limit);
  if (!runs.ok() || runs->empty()) return runs;
  // Their devices: the workers that used one, grouped (a device's peak is the largest any
  // of its workers saw; its busy time, the growth of the ledger's count over all of them).
  auto devices = ReadAll<std::pair<int64_t, RunDevice>>(
      "SELECT run_id, device, coalesce(max(device_total_mb), 0), coalesce(max(peak_planned_mb), 0),"
      " count(*), sum(oom_events), sum(cpu_fallbacks),"
      " coalesce(max(device_busy_to_ms) - min(device_busy_from_ms), 0) FROM workers"
      " WHERE device IS NOT NULL AND run_id >= ? GROUP BY run_id, device ORDER BY run_id, device",
      [&](Stmt& q) { q.Bind(1, runs->back().id); },
      [](const Stmt& q) {
        return std::pair<int64_t, RunDevice>{
            q.Int(0), RunDevice{q.Text(1), q.Int(2), q.Int(3), static_cast<int>(q.Int(4)),
                                q.Int(5), q.Int(6), std::max<int64_t>(0, q.Int(7))}};
      });
  if (!devices.ok()) return devices.status();
  for (RunRecord& r : *runs)
    for (const auto& [run_id, d] : *devices)
      if (run_id == r.id) r.devices.push_back(d);
  return runs;
}

template <class Db>
Result<std::vector<RunRecord>> SqlQueries<Db>::RunRows(int limit) {
  return ReadAll<RunRecord>(
      "SELECT id, started_at, coalesce(finished_at, 0), jobs_done, jobs_failed,"
      " workers, coalesce(exit_code, -1), oom_events, cpu_fallbacks, stages"
      " FROM runs ORDER BY id DESC LIMIT ?",
      [&](Stmt& q) { q.Bind(1, static_cast<int64_t>(limit)); },
      [](const Stmt& q) {
        return RunRecord{q.Int(0), q.Int(1), q.Int(2), q.Int(3), q.Int(4),
                         static_cast<int>(q.Int(5)), static_cast<int>(q.Int(6)), q.Int(7),
                         q.Int(8), q.Text(9)};
      });
}

template <class Db>
Status SqlQueries<Db>::ForEachItem(const std::function<Status(const ItemView&)>& fn) {
  // A page of items, then their jobs in the same snapshot.
  const int64_t page_items = std::max(1, options_.export_page_rows / 8);
  int64_t after = 0;
  for (;;) {
    using Page = std::vector<ItemView>;
    auto page = InTxn<Page>(*db_, TxnKind::kRead, [&]() -> Result<Page> {
      auto items = ItemPage(after, page_items);
      if (items.ok() && !items->empty()) FM_RETURN_IF_ERROR(AddJobs(&*items));
      return items;
    });
    if (!page.ok()) return page.status();
    for (const ItemView& v : *page) FM_RETURN_IF_ERROR(fn(v));
    if (static_cast<int64_t>(page->size()) < page_items) return Status::OK();
    after = page->back().id;
  }
}

template <class Db>
Result<std::vector<ItemView>> SqlQueries<Db>::ItemPage(int64_t after, int64_t limit) {
  std::vector<ItemView> page;
  FM_PREPARE(items, "SELECT id, source, kind, coalesce(content_hash, ''), media_info,"
                    " coalesce(fetched_path, ''), is_url FROM items WHERE id > ?"
                    " ORDER BY id LIMIT ?");
  items.Bind(1, after).Bind(2, limit);
  for (;;) {
    FM_STEP(row, items.Step());
    if (!row) break;
    ItemView v;
    v.id = items.Int(0);
    v.source = items.Text(1);
    v.kind = static_cast<MediaKind>(items.Int(2));
    v.content_hash = items.Text(3);
    v.media_info = items.Text(4);
    v.fetched_path = items.Text(5);
    v.is_url = items.Int(6) != 0;
    page.push_back(std::move(v));
  }
  return page;
}

template <class Db>
Status SqlQueries<Db>::AddJobs(std::vector<ItemView>* page) {
  FM_PREPARE(jobs, "SELECT j.item_id, j.id, j.stage, j.state, j.attempts,"
                   " coalesce(j.started_at, 0), coalesce(j.finished_at, 0),"
                   " coalesce(r.device, j.device, ''), coalesce(j.error_class, ''),"
                   " coalesce(j.last_error, ''), coalesce(r.result, ''),"
                   " coalesce(r.artifacts, '')"
                   " FROM jobs j LEFT JOIN results r ON r.job_id = j.id"
                   " WHERE j.item_id >= ? AND j.item_id <= ? ORDER BY j.item_id, j.stage");
  jobs.Bind(1, page->front().id).Bind(2, page->back().id);
  size_t at = 0;
  for (;;) {
    FM_STEP(row, jobs.Step());
    if (!row) break;
    while (at < page->size() && (*page)[at].id < jobs.Int(0)) ++at;
    if (at == page->size()) break;
    JobView j;
    j.id = jobs.Int(1);
    j.stage = jobs.Text(2);
    j.state = static_cast<JobState>(jobs.Int(3));
    j.attempts = jobs.Int(4);
    j.started_at = jobs.Int(5);
    j.finished_at = jobs.Int(6);
    j.device = jobs.Text(7);
    j.error_class = jobs.Text(8);
    j.last_error = jobs.Text(9);
    j.result_json = jobs.Text(10);
    j.artifacts_json = jobs.Text(11);
    (*page)[at].jobs.push_back(std::move(j));
  }
  return Status::OK();
}

template <class Db>
Result<std::vector<ErrorRecord>> SqlQueries<Db>::ErrorHistory(int64_t limit) {
  return ReadAll<ErrorRecord>(
      "SELECT e.job_id, e.attempt, e.at, i.source, j.stage, coalesce(e.worker, ''),"
      " e.error_class, e.message, e.transient, j.state"
      " FROM job_errors e JOIN jobs j ON j.id = e.job_id JOIN items i ON i.id = j.item_id"
      " ORDER BY e.at DESC, e.id DESC LIMIT ?",
      [&](Stmt& q) { q.Bind(1, limit); },
      [](const Stmt& q) {
        ErrorRecord e;
        e.job_id = q.Int(0);
        e.attempt = q.Int(1);
        e.at = q.Int(2);
        e.source = q.Text(3);
        e.stage = q.Text(4);
        e.worker = q.Text(5);
        e.error_class = q.Text(6);
        e.message = q.Text(7);
        e.transient = q.Int(8) != 0;
        e.job_state = static_cast<JobState>(q.Int(9));
        return e;
      });
}

template <class Db>
Result<std::vector<JobTime>> SqlQueries<Db>::RecentJobTimes(int64_t limit) {
  // The stages present, one index probe each (a loose index scan: not every job's row).
  auto stages = ReadAll<std::string>(
      "WITH RECURSIVE s(stage) AS (SELECT min(stage) FROM jobs UNION ALL"
      " SELECT (SELECT min(stage) FROM jobs WHERE stage > s.stage) FROM s WHERE s.stage IS NOT NULL)"
      " SELECT stage FROM s WHERE stage IS NOT NULL",
      [](Stmt&) {}, [](const Stmt& q) { return q.Text(0); });
  if (!stages.ok()) return stages.status();
  std::vector<JobTime> out;
  for (const std::string& stage : *stages) {
    auto times = ReadAll<JobTime>(
        "SELECT j.stage, i.kind, r.run_ms, r.media_seconds, i.size, r.device, coalesce(r.decode_ms, 0),"
        " coalesce(r.host_ms, r.run_ms), coalesce(r.device_ms, 0), coalesce(r.wait_ms, 0) FROM jobs j"
        " JOIN results r ON r.job_id = j.id JOIN items i ON i.id = j.item_id"
        " WHERE j.stage = ?1 AND j.state = ?2 AND r.run_ms IS NOT NULL ORDER BY j.id DESC LIMIT ?3",
        [&](Stmt& q) { q.Bind(1, stage).Bind(2, static_cast<int64_t>(kDone)).Bind(3, limit); },
        [](const Stmt& q) {
          JobTime t;
          t.stage = q.Text(0);
          t.kind = static_cast<MediaKind>(q.Int(1));
          t.run_ms = q.Int(2);
          t.media_seconds = q.IsNull(3) ? -1 : q.Double(3);
          t.bytes = q.Int(4);
          t.device = q.Text(5);
          t.split = {q.Int(6), q.Int(7), q.Int(8), q.Int(9)};
          return t;
        });
    if (!times.ok()) return times.status();
    out.insert(out.end(), times->begin(), times->end());
  }
  return out;
}

template <class Db>
Status SqlQueries<Db>::ForEachResult(const std::string& stage,
                                     const std::function<Status(const ExportRow&)>& fn) {
  return WalkResults(stage, -1, fn);
}

template <class Db>
Status SqlQueries<Db>::ForEachResultFinishedSince(const std::string& stage, int64_t since_ms,
                                                  const std::function<Status(const ExportRow&)>& fn) {
  if (stage.empty()) return Status::InvalidArgument("results finished since: no stage named");
  return WalkResults(stage, std::max<int64_t>(0, since_ms), fn);
}

template <class Db>
Status SqlQueries<Db>::WalkResults(const std::string& stage, int64_t since_ms,
                                   const std::function<Status(const ExportRow&)>& fn) {
  // Since a time: read by jobs_stage_finished (stage, state, finished_at), not the whole stage.
  const std::string sql =
      "SELECT i.source, j.stage, r.device, r.result, r.artifacts, j.attempts, j.finished_at, j.id"
      " FROM results r JOIN jobs j ON j.id = r.job_id JOIN items i ON i.id = j.item_id"
      " WHERE j.state = ?1 AND j.id > ?2" + std::string(stage.empty() ? "" : " AND j.stage = ?4") +
      std::string(since_ms >= 0 ? " AND j.finished_at >= ?5" : "") + " ORDER BY j.id LIMIT ?3";
  const int64_t page_rows = std::max(1, options_.export_page_rows);
  int64_t after = 0, last = 0;
  for (;;) {
    using Page = std::vector<ExportRow>;
    auto page = InTxn<Page>(*db_, TxnKind::kRead, [&]() -> Result<Page> {
      Page rows;
      FM_PREPARE(q, sql);
      q.Bind(1, static_cast<int64_t>(kDone)).Bind(2, after).Bind(3, page_rows);
      if (!stage.empty()) q.Bind(4, stage);
      if (since_ms >= 0) q.Bind(5, since_ms);
      for (;;) {
        FM_STEP(row, q.Step());
        if (!row) break;
        rows.push_back({q.Text(0), q.Text(1), q.Text(2), q.Text(3), q.Text(4), q.Int(5), q.Int(6), q.Int(7)});
        last = q.Int(7);  // `after` moves only once the page is read: a retry reads it again
      }
      return rows;
    });
    if (!page.ok()) return page.status();
    after = last;
    for (const ExportRow& r : *page) FM_RETURN_IF_ERROR(fn(r));
    if (static_cast<int64_t>(page->size()) < page_rows) return Status::OK();
  }
}

template <class Db>
Result<std::optional<ExportRow>> SqlQueries<Db>::ResultOf(int64_t item_id,
                                                          const std::string& stage) {
  using Found = std::optional<ExportRow>;
  return InTxn<Found>(*db_, TxnKind::kRead, [&]() -> Result<Found> {
    FM_PREPARE(q,
               "SELECT i.source, j.stage, r.device, r.result, r.artifacts, j.attempts, j.finished_at"
               " FROM jobs j JOIN results r ON r.job_id = j.id JOIN items i ON i.id = j.item_id"
               " WHERE j.item_id = ? AND j.stage = ? AND j.state = ?");
    q.Bind(1, item_id).Bind(2, stage).Bind(3, static_cast<int64_t>(kDone));
    FM_STEP(found, q.Step());
    if (!found) return Found();
    return Found(ExportRow{q.Text(0), q.Text(1), q.Text(2), q.Text(3), q.Text(4), q.Int(5),
                           q.Int(6)});
  });
}

template class SqlQueries<SqliteDb>;
template class SqlQueries<PgDb>;

}  // namespace framemill::sql
