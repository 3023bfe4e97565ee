// Leases: a claim marks jobs running under a fresh lease token that fences every later
// write for them; heartbeats extend it; a worker that stops renewing loses it (rescue), and
// a worker that stops cleanly gives its jobs back (release).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "storage/sql_store_internal.h"

namespace framemill::sql {

template <class Db>
SqlClaim<Db>::SqlClaim(Db* db, const StageGraph* graph, const Clock* clock,
                       const StoreOptions& options)
    : SqlGraphMoves<Db>(db, graph, clock, options), rng_(std::random_device{}()) {}

namespace {
// The UPDATE behind every rescue: running jobs matching `where` go back to pending as
// suspects, or fail at max attempts, with `why_sql` as the reason. ?1 is now, ?2 the class.
// A job that fails keeps its lease owner for RescueLocked to count the failure in that
// worker's (and so its run's) tally, then to clear.
std::string RescueSql(const std::string& where, const std::string& why_sql) {
  return "UPDATE jobs SET state = CASE WHEN attempts >= max_attempts THEN " S_FAILED
         " ELSE " S_PENDING " END,"
         " lease_owner = CASE WHEN attempts >= max_attempts THEN lease_owner ELSE NULL END,"
         " lease_token = NULL, lease_expires_at = NULL, suspect = 1,"
         " next_run_at = ?1, error_class = ?2, last_error = " + why_sql + ","
         " finished_at = CASE WHEN attempts >= max_attempts THEN ?1 ELSE NULL END"
         " WHERE state = " S_RUNNING " AND " + where +
         " RETURNING id, state, attempts, last_error, stage, coalesce(lease_owner, '')";
}
constexpr char kHeldByWorker[] =
    "lease_owner IN (SELECT id FROM workers WHERE run_id = ?4 AND pid = ?5)";
}  // namespace

template <class Db>
Result<int> SqlClaim<Db>::RescueExpiredLocked(int64_t now) {
  // Runs in every claim: the statement's text is made once.
  static const std::string kSql = RescueSql(
      "lease_expires_at < ?1",
      "'worker ' || coalesce(lease_owner, '?') || ' stopped renewing its lease (crashed or hung)'");
  // PostgreSQL's claim looks for expired leases before it comes here (ClaimPg).
  FM_RETURN_IF_ERROR(LockGraph());
  return RescueLocked(kSql, [](Stmt&) {}, "lease_expired", now);
}

template <class Db>
Result<int> SqlClaim<Db>::RescueLocked(const std::string& sql,
                                         const std::function<void(Stmt&)>& bind,
                                         const std::string& error_class, int64_t now) {
  FM_PREPARE(up, sql);
  up.Bind(1, now).Bind(2, error_class);
  bind(up);
  struct Rescued {
    int64_t id;
    int state, attempts;
    std::string why, stage, owner;
  };
  std::vector<Rescued> rescued;
  for (;;) {
    FM_STEP(row, up.Step());
    if (!row) break;
    rescued.push_back({up.Int(0), static_cast<int>(up.Int(1)), static_cast<int>(up.Int(2)),
                       up.Text(3), up.Text(4), up.Text(5)});
  }
  for (const Rescued& r : rescued) {
    // A lost worker is not the input's fault, so it counts as transient. Recorded under the
    // rescue's class (lease_expired, timeout), as the job is: run --metrics counts them.
    FM_RETURN_IF_ERROR(InsertJobError(*db_, r.id, r.attempts, "", Status::Aborted(r.why), error_class, now));
    if (r.state != kFailed) continue;
    FM_RETURN_IF_ERROR(CountFailedLease(r.id, r.owner));
    FM_RETURN_IF_ERROR(CascadeFailure(r.id, r.stage, error_class, now));
  }
  if (!rescued.empty()) {
    spdlog::info("rescued {} job(s): {}", rescued.size(), error_class);
    FM_RETURN_IF_ERROR(Notify());
    FM_RETURN_IF_ERROR(PromoteDatasetJobs(now));
  }
  return static_cast<int>(rescued.size());
}

template <class Db>
Status SqlClaim<Db>::CountFailedLease(int64_t job_id, const std::string& owner) {
  // The run's summary sums its workers' tallies (EndRun): a job a lost worker held and that
  // failed for it is that worker's failure.
  FM_PREPARE(w, "UPDATE workers SET jobs_failed = jobs_failed + 1 WHERE id = ?");
  FM_RETURN_IF_ERROR(w.Bind(1, owner).Run());
  FM_PREPARE(j, "UPDATE jobs SET lease_owner = NULL WHERE id = ?");
  return j.Bind(1, job_id).Run();
}

template <class Db>
Result<int> SqlClaim<Db>::RescueWorkerJobs(int64_t run_id, int pid,
                                             const std::string& error_class,
                                             const std::string& reason) {
  return InTxn<int>(*db_, TxnKind::kWrite, [&]() -> Result<int> {
    FM_RETURN_IF_ERROR(LockGraph());
    static const std::string kSql = RescueSql(kHeldByWorker, "?3");
    return RescueLocked(
        kSql,
        [&](Stmt& st) { st.Bind(3, reason).Bind(4, run_id).Bind(5, static_cast<int64_t>(pid)); },
        error_class, Now());
  });
}

template <class Db>
Result<int> SqlClaim<Db>::ReleaseWorkerJobs(int64_t run_id, int pid) {
  return InTxn<int>(*db_, TxnKind::kWrite, [&]() -> Result<int> {
    FM_PREPARE(up, std::string("UPDATE jobs SET state = " S_PENDING
                               ", attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, lease_owner = NULL,"
                               " lease_token = NULL, lease_expires_at = NULL, started_at = NULL"
                               " WHERE state = " S_RUNNING " AND ") + kHeldByWorker);
    FM_RETURN_IF_ERROR(up.Bind(4, run_id).Bind(5, static_cast<int64_t>(pid)).Run());
    const int n = static_cast<int>(db_->Changes());
    if (n > 0) FM_RETURN_IF_ERROR(Notify());
    return n;
  });
}

template <class Db>
Result<int> SqlClaim<Db>::RescueExpired() {
  return InTxn<int>(*db_, TxnKind::kWrite,
                    [&]() -> Result<int> { return RescueExpiredLocked(Now()); });
}

template <class Db>
Result<std::vector<ClaimedJob>> SqlClaim<Db>::Claim(const std::string& worker,
                                                      const std::vector<std::string>& stages,
                                                      int limit, int64_t lease_ms, ClaimBy by) {
  if (stages.empty() || limit <= 0) return std::vector<ClaimedJob>();
  if constexpr (std::is_same_v<Db, PgDb>) return ClaimPg(worker, stages, limit, lease_ms, by);
  else return ClaimSqlite(worker, stages, limit, lease_ms, by);
}

template <class Db>
int64_t SqlClaim<Db>::NewLeaseToken() {
  const int64_t token = static_cast<int64_t>(rng_() >> 1);
  return token == 0 ? 1 : token;
}

template <class Db>
ClaimedJob SqlClaim<Db>::ClaimedRow(const Stmt& st, int64_t token) const {
  ClaimedJob j;
  j.id = st.Int(0);
  j.item_id = st.Int(1);
  j.stage = st.Text(2);
  j.attempts = static_cast<int>(st.Int(3));
  j.max_attempts = static_cast<int>(st.Int(4));
  j.lease_token = token;
  return j;
}

template <class Db>
void SqlClaim<Db>::SetItem(const Stmt& st, int col, ClaimedJob* j) const {
  // A fetched URL item is its local file for every stage but the download itself.
  const StageSpec* spec = graph_->Find(j->stage);
  const bool downloads = spec != nullptr && spec->downloads;
  j->source = st.IsNull(col + 1) || downloads ? st.Text(col) : st.Text(col + 1);
  j->kind = static_cast<MediaKind>(st.Int(col + 2));
  j->media_info = st.Text(col + 3);
  j->size = st.Int(col + 4);
}

// SQLite's claims: both lease what a subquery picks: pending, due, of these stages, in order.
// Literal state and `+stage` so the planner walks the partial index in order and stops after
// LIMIT rows, instead of sorting every pending job of the stages. Binds: token, worker, lease
// end, now (started_at), then the subquery's now and stages (twice by items), then the limit.
// (Outside the anonymous namespace: SqlClaim's template members hold it, which GCC's
// -Wsubobject-linkage reports in a unity build.)
struct SqliteClaimSql {
  std::string suspect;  // a suspect (its last worker died holding it), claimed alone, first
  std::string claim;    // the claim itself, by jobs or by items
};

static SqliteClaimSql SqliteClaimSqlOf(size_t stages, ClaimBy by) {
  const std::string due = "SELECT {} FROM jobs WHERE state = " S_PENDING " AND next_run_at <= ?"
                          " AND +stage IN (" + Placeholders(stages) + ")";
  const std::string lease =
      "UPDATE jobs SET state = " S_RUNNING ", lease_token = ?, lease_owner = ?,"
      " lease_expires_at = ?, attempts = attempts + 1, started_at = ? WHERE id IN (";
  const std::string order = " ORDER BY priority DESC, id LIMIT ";
  const std::string returning = ") RETURNING id, item_id, stage, attempts, max_attempts";
  auto select = [&](const char* what) {
    std::string q = due;
    return q.replace(q.find("{}"), 2, what);
  };
  // By items: every due job of the items of the first `limit` due jobs (the unique
  // (item_id, stage) index finds them).
  return {lease + select("id") + " AND suspect = 1" + order + "1" + returning,
          by == ClaimBy::kJobs
              ? lease + select("id") + order + "?" + returning
              : lease + select("id") + " AND item_id IN (" + select("item_id") + order + "?)" + returning};
}

template <class Db>
Result<std::vector<ClaimedJob>> SqlClaim<Db>::ClaimSqlite(const std::string& worker,
                                                            const std::vector<std::string>& stages,
                                                            int limit, int64_t lease_ms, ClaimBy by) {
  const SqliteClaimSql sql = SqliteClaimSqlOf(stages.size(), by);
  using Jobs = std::vector<ClaimedJob>;
  auto claimed = InTxn<Jobs>(*db_, TxnKind::kWrite, [&]() -> Result<Jobs> {
    std::vector<ClaimedJob> out;
    const int64_t now = Now();
    auto rescued = RescueExpiredLocked(now);
    if (!rescued.ok()) return rescued.status();
    const int64_t token = NewLeaseToken();
    auto claim = [&](const std::string& text, bool with_limit) -> Status {
      FM_PREPARE(up, text);
      int i = 1;
      up.Bind(i++, token);
      up.Bind(i++, worker);
      up.Bind(i++, now + lease_ms);
      up.Bind(i++, now);
      up.Bind(i++, now);
      for (const std::string& st : stages) up.Bind(i++, st);
      if (with_limit && by == ClaimBy::kItems) {
        up.Bind(i++, now);
        for (const std::string& st : stages) up.Bind(i++, st);
      }
      if (with_limit) up.Bind(i++, limit);
      for (;;) {
        FM_STEP(row, up.Step());
        if (!row) break;
        out.push_back(ClaimedRow(up, token));
      }
      return Status::OK();
    };
    FM_RETURN_IF_ERROR(claim(sql.suspect, false));
    if (out.empty()) FM_RETURN_IF_ERROR(claim(sql.claim, true));
    FM_RETURN_IF_ERROR(ReadItems(&out));
    return out;
  });
  if (claimed.ok())
    std::sort(claimed->begin(), claimed->end(), [](auto& a, auto& b) { return a.id < b.id; });
  return claimed;
}

template <class Db>
Status SqlClaim<Db>::ReadItems(std::vector<ClaimedJob>* jobs) const {
  for (ClaimedJob& j : *jobs) {
    FM_PREPARE(item, "SELECT source, fetched_path, kind, media_info, size FROM items WHERE id = ?");
    item.Bind(1, j.item_id);
    FM_STEP(row, item.Step());
    if (!row) return Status::Internal("job " + std::to_string(j.id) + " has no item");
    SetItem(item, 0, &j);
  }
  return Status::OK();
}

namespace {
// PostgreSQL's claim: one statement. ?1: now (NULL: the server's clock), ?2 token,
// ?3 worker, ?4 lease, ?5 limit (jobs, or items whose due jobs come along), ?6.. the stages.
std::string PgClaimSql(size_t stages, ClaimBy by) {
  std::string in = "?6";
  for (size_t i = 1; i < stages; ++i) in += ",?" + std::to_string(6 + i);
  const std::string now = "(SELECT now FROM t)";
  // Not indexable on purpose, as SQLite's `+stage`: the planner then walks the partial
  // claim index in order and stops at the limit, even on statistics from before a large
  // enqueue (which made it sort every pending job of the stage: 3 ms at 10,000).
  const std::string kStage = "(stage || '')";
  return "WITH t AS (SELECT " + std::string(kPgClaimNow) + " AS now),"
         " s AS (SELECT id FROM jobs WHERE state = " S_PENDING " AND suspect = 1 AND next_run_at <= " +
         now + " AND " + kStage + " IN (" + in + ") ORDER BY priority DESC, id LIMIT 1"
         " FOR UPDATE SKIP LOCKED),"
         " f AS (SELECT id, item_id FROM jobs WHERE state = " S_PENDING " AND next_run_at <= " + now +
         " AND " + kStage + " IN (" + in + ") AND NOT EXISTS (SELECT 1 FROM s)"
         " ORDER BY priority DESC, id LIMIT ?5 FOR UPDATE SKIP LOCKED)," +
         // By items: the first jobs' items, each with its other due jobs of the stages.
         // (they hold f's own rows: SKIP LOCKED skips only other transactions' locks).
         (by == ClaimBy::kJobs
              ? std::string(" p AS (SELECT id FROM f),")
              : " p AS (SELECT id FROM jobs WHERE state = " S_PENDING " AND next_run_at <= " + now +
                " AND stage IN (" + in + ") AND item_id IN (SELECT item_id FROM f)"
                " FOR UPDATE SKIP LOCKED),") +
         " c AS (UPDATE jobs SET state = " S_RUNNING ", lease_token = ?2, lease_owner = ?3,"
         " lease_expires_at = " + now + " + ?4, attempts = attempts + 1, started_at = " + now +
         " WHERE id IN (SELECT id FROM s UNION ALL SELECT id FROM p)"
         " RETURNING id, item_id, stage, attempts, max_attempts)"
         " SELECT c.id, c.item_id, c.stage, c.attempts, c.max_attempts, i.source, i.fetched_path,"
         " i.kind, i.media_info, i.size FROM c JOIN items i ON i.id = c.item_id";
}
}  // namespace

// PostgreSQL: every round trip to the server costs more than the SQL itself, so a claim is
// one statement (its own transaction, committed without waiting for the WAL flush: a claim
// lost in a server crash only makes its jobs claimable again), preceded by a probe for
// expired leases that runs the rescue transaction only when there are some. A suspect is
// claimed alone, ahead of the rest, as on SQLite; the items come back with the jobs.
template <class Db>
Result<std::vector<ClaimedJob>> SqlClaim<Db>::ClaimPg(const std::string& worker,
                                                      const std::vector<std::string>& stages,
                                                      int limit, int64_t lease_ms, ClaimBy by) {
  auto bind_now = [&](Stmt& st) {
    if (options_.server_time) st.BindNull(1); else st.Bind(1, clock_->NowMs());
  };
  auto expired = InTxn<bool>(*db_, TxnKind::kAutocommit, [&]() -> Result<bool> {
    FM_PREPARE(any, "SELECT 1 FROM jobs WHERE state = " S_RUNNING " AND lease_expires_at < " +
                        std::string(kPgClaimNow) + " LIMIT 1");
    bind_now(any);
    return any.Step();
  });
  if (!expired.ok()) return expired.status();
  if (*expired) {
    auto r = RescueExpired();
    if (!r.ok()) return r.status();
  }
  const int64_t token = NewLeaseToken();
  using Jobs = std::vector<ClaimedJob>;
  auto claimed = InTxn<Jobs>(*db_, TxnKind::kAutocommit, [&]() -> Result<Jobs> {
    Jobs out;
    FM_PREPARE(up, PgClaimSql(stages.size(), by));
    bind_now(up);
    up.Bind(2, token).Bind(3, worker).Bind(4, lease_ms).Bind(5, limit);
    for (size_t i = 0; i < stages.size(); ++i) up.Bind(static_cast<int>(6 + i), stages[i]);
    for (;;) {
      FM_STEP(row, up.Step());
      if (!row) break;
      ClaimedJob j = ClaimedRow(up, token);
      SetItem(up, 5, &j);
      out.push_back(std::move(j));
    }
    return out;
  });
  if (claimed.ok())
    std::sort(claimed->begin(), claimed->end(), [](auto& a, auto& b) { return a.id < b.id; });
  return claimed;
}

template <class Db>
Result<int> SqlClaim<Db>::Heartbeat(const std::string& worker, int64_t lease_ms) {
  return InTxn<int>(*db_, TxnKind::kWrite, [&]() -> Result<int> {
    const int64_t now = Now();
    FM_PREPARE(up, "UPDATE jobs SET lease_expires_at = ? WHERE state = " S_RUNNING
                   " AND lease_owner = ?");
    FM_RETURN_IF_ERROR(up.Bind(1, now + lease_ms).Bind(2, worker).Run());
    const int n = static_cast<int>(db_->Changes());
    FM_PREPARE(w, "UPDATE workers SET heartbeat_at = ? WHERE id = ?");
    FM_RETURN_IF_ERROR(w.Bind(1, now).Bind(2, worker).Run());
    return n;
  });
}

template <class Db>
Result<int> SqlClaim<Db>::Release(const std::vector<ClaimedJob>& jobs) {
  return InTxn<int>(*db_, TxnKind::kWrite, [&]() -> Result<int> {
    int n = 0;
    for (const ClaimedJob& j : jobs) {
      FM_PREPARE(up, "UPDATE jobs SET state = " S_PENDING ", attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,"
                     " lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,"
                     " started_at = NULL WHERE id = ? AND state = " S_RUNNING " AND lease_token = ?");
      FM_RETURN_IF_ERROR(up.Bind(1, j.id).Bind(2, j.lease_token).Run());
      n += static_cast<int>(db_->Changes());
    }
    if (n > 0) FM_RETURN_IF_ERROR(Notify());
    return n;
  });
}

template <class Db>
Result<bool> SqlClaim<Db>::WaitForWork(int64_t ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  if constexpr (std::is_same_v<Db, PgDb>) {
    // A server that is down is not this call's failure: it sleeps, the next claim reconnects.
    if (!listening_) listening_ = db_->Listen(kWorkChannel).ok();
    if (listening_) {
      auto woke = db_->WaitNotification(ms);
      if (woke.ok() && *woke) return true;
    }
  }
  std::this_thread::sleep_until(until);
  return false;
}

template class SqlClaim<SqliteDb>;
template class SqlClaim<PgDb>;

}  // namespace framemill::sql
