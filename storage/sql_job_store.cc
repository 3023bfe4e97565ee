#include "storage/sql_job_store.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>
#include <set>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "jobs/first_state.h"
#include "storage/migrations.h"
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

namespace framemill {
namespace {

constexpr int kPending = static_cast<int>(JobState::kPending);
constexpr int kRunning = static_cast<int>(JobState::kRunning);
constexpr int kDone = static_cast<int>(JobState::kDone);
constexpr int kFailed = static_cast<int>(JobState::kFailed);
constexpr int kSkipped = static_cast<int>(JobState::kSkipped);
constexpr int kWaiting = static_cast<int>(JobState::kWaiting);
constexpr char kDatasetSource[] = "dataset:";

// States spelled into the SQL text: SQLite can only match a partial index
// (WHERE state = 0) against a literal, and re-prepares a statement on every bind
// of a parameter compared with such a column.
#define S_PENDING "0"
#define S_RUNNING "1"
#define S_DONE "2"
#define S_FAILED "3"
#define S_SKIPPED "4"
#define S_WAITING "5"
static_assert(kPending == 0 && kRunning == 1 && kDone == 2 && kFailed == 3 && kSkipped == 4 &&
              kWaiting == 5);

// "?,?,?" for n placeholders.
std::string Placeholders(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += i ? ",?" : "?";
  return s;
}

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
// PostgreSQL: the claim's time, ?1 in ms, or the server's clock when ?1 is NULL
// (StoreOptions::server_time).
constexpr char kPgClaimNow[] = "coalesce(?1::int8, (extract(epoch from now()) * 1000)::int8)";
// What Notify says and WaitForWork listens for.
constexpr char kWorkChannel[] = "framemill_work";
// The advisory lock key of LockGraph ("fmgraph").
constexpr int64_t kGraphLock = 0x666d6772617068;

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

}  // namespace

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

template <class Db>
int64_t SqlJobStore<Db>::Now() const {
  if constexpr (std::is_same_v<Db, PgDb>) {
    if (options_.server_time) return db_->TxnNowMs();
  }
  return clock_->NowMs();
}

template <class Db>
int64_t SqlJobStore<Db>::RetryAt(const FinishedJob& f, int64_t now) const {
  if (f.retry_at_ms <= 0 || f.decided_at_ms <= 0) return f.retry_at_ms;
  return now + std::max<int64_t>(0, f.retry_at_ms - f.decided_at_ms);
}

template <class Db>
Status SqlJobStore<Db>::Notify() {
  if constexpr (std::is_same_v<Db, PgDb>) return db_->Exec(std::string("NOTIFY ") + kWorkChannel);
  return Status::OK();
}

template <class Db>
Result<bool> SqlJobStore<Db>::WaitForWork(int64_t ms) {
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

template <class Db>
void SqlJobStore<Db>::RefreshPlannerStatistics(int64_t jobs_added) {
  if constexpr (std::is_same_v<Db, PgDb>) {
    if (jobs_added < 1000) return;
    auto q = db_->Prepare("SELECT reltuples FROM pg_class WHERE oid = 'jobs'::regclass");
    if (!q.ok() || !q->Step().ok()) return;
    const double known = q->Double(0);  // -1: never analysed
    if (known >= 0 && static_cast<double>(jobs_added) < 0.1 * known) return;
    if (Status a = db_->Exec("ANALYZE jobs"); !a.ok())
      spdlog::warn("ANALYZE jobs after an enqueue: {}", a.ToString());
  }
}

template <class Db>
Status SqlJobStore<Db>::LockGraph() {
  return db_->LockExclusive(kGraphLock);
}

template <class Db>
SqlJobStore<Db>::SqlJobStore(std::unique_ptr<Db> db, const StageGraph* graph,
                               const Clock* clock, StoreOptions options)
    : db_(std::move(db)),
      graph_(graph),
      clock_(clock),
      options_(options),
      rng_(std::random_device{}()) {
  for (const StageSpec& spec : graph_->stages())
    for (const std::string& d : spec.deps) stages_with_dependants_.insert(d);
}

// ---------------------------------------------------------------- enqueue

template <class Db>
Result<std::unordered_map<std::string, ItemRecord>> SqlJobStore<Db>::LoadItems() {
  std::unordered_map<std::string, ItemRecord> out;
  Status s = db_->Transaction(Db::TxnKind::kRead, [&]() -> Status {
    out.clear();  // a busy retry starts over
    FM_PREPARE(q, "SELECT id, source, kind, size, mtime_ns, coalesce(content_hash,'') "
                  "FROM items WHERE kind <> 0");
    for (;;) {
      FM_STEP(row, q.Step());
      if (!row) break;
      ItemRecord r;
      r.id = q.Int(0);
      r.source = q.Text(1);
      r.kind = static_cast<MediaKind>(q.Int(2));
      r.size = q.Int(3);
      r.mtime_ns = q.Int(4);
      r.content_hash = q.Text(5);
      out.emplace(r.source, std::move(r));
    }
    return Status::OK();
  });
  if (!s.ok()) return s;
  return out;
}

template <class Db>
Result<int64_t> SqlJobStore<Db>::JobState_(int64_t item_id, const std::string& stage,
                                          int* state) {
  FM_PREPARE(q, "SELECT id, state FROM jobs WHERE item_id = ? AND stage = ?");
  q.Bind(1, item_id).Bind(2, stage);
  FM_STEP(row, q.Step());
  if (!row) return Status::NotFound("no job for stage " + stage);
  *state = static_cast<int>(q.Int(1));
  return q.Int(0);
}

template <class Db>
Status SqlJobStore<Db>::InsertJobsForItem(int64_t item_id, MediaKind kind,
                                         const EnqueueOptions& options, EnqueueStats* stats,
                                         bool is_url) {
  const int64_t now = Now();
  // A URL item's jobs all wait on its download job; what applies to it is known only
  // once the download has found out whether it is an image or a video.
  const StageSpec* downloader = is_url ? graph_->Downloader() : nullptr;
  int64_t fetch_id = 0;
  int fetch_state = kPending;
  if (is_url) {
    if (downloader == nullptr)
      return Status::InvalidArgument(
          "URL items need a downloading stage (fetch), which this stage graph does not have");
    FM_PREPARE(ins, "INSERT INTO jobs (item_id, stage, state, priority, max_attempts, created_at)"
                    " VALUES (?, ?, " S_PENDING ", ?, ?, ?) ON CONFLICT (item_id, stage) DO NOTHING");
    FM_RETURN_IF_ERROR(ins.Bind(1, item_id).Bind(2, downloader->name).Bind(3, options.priority)
                           .Bind(4, options.max_attempts).Bind(5, now).Run());
    if (db_->Changes() > 0) ++stats->jobs_added;
    auto id = JobState_(item_id, downloader->name, &fetch_state);
    if (!id.ok()) return id.status();
    fetch_id = *id;
  }
  for (const std::string& name : options.stages) {
    const StageSpec* spec = graph_->Find(name);
    if (spec == nullptr) return Status::InvalidArgument("unknown stage " + name);
    if (spec->dataset_level || spec->downloads) continue;  // downloads: URL items, above
    // Dependencies come earlier in options.stages (dependency order), so they exist.
    std::vector<int64_t> dep_ids;
    std::vector<DependencyNow> now_in;
    if (is_url) dep_ids.push_back(fetch_id);
    for (const std::string& d : spec->deps) {
      int dep_state = 0;
      auto dep_id = JobState_(item_id, d, &dep_state);
      if (!dep_id.ok()) return dep_id.status();
      dep_ids.push_back(*dep_id);
      now_in.push_back({d, static_cast<JobState>(dep_state)});
    }
    const FirstState first = DecideFirstState(
        *spec, kind, is_url ? std::optional(static_cast<JobState>(fetch_state)) : std::nullopt,
        now_in);
    const int state = static_cast<int>(first.state);
    const std::string& reason = first.reason;
    const std::string& error_class = first.error_class;
    FM_PREPARE(ins,
               "INSERT INTO jobs (item_id, stage, state, priority, max_attempts, created_at,"
               " error_class, last_error, finished_at) VALUES (?,?,?,?,?,?,?,?,?)"
               " ON CONFLICT (item_id, stage) DO NOTHING RETURNING id");
    ins.Bind(1, item_id).Bind(2, name).Bind(3, state).Bind(4, options.priority)
        .Bind(5, options.max_attempts).Bind(6, now);
    if (reason.empty()) {
      ins.BindNull(7).BindNull(8).BindNull(9);
    } else {
      ins.Bind(7, error_class).Bind(8, reason).Bind(9, now);
    }
    FM_STEP(inserted, ins.Step());
    if (!inserted) continue;  // the job was there already
    const int64_t job_id = ins.Int(0);
    ++stats->jobs_added;
    if (state == kSkipped) ++stats->jobs_not_applicable;
    for (int64_t dep_id : dep_ids) {
      FM_PREPARE(e, "INSERT INTO job_deps (job_id, dep_id) VALUES (?, ?)");
      FM_RETURN_IF_ERROR(e.Bind(1, job_id).Bind(2, dep_id).Run());
    }
  }
  return Status::OK();
}

template <class Db>
Status SqlJobStore<Db>::RequeueItemJobs(int64_t item_id, MediaKind kind, EnqueueStats* stats) {
  // Results describe the old content: drop them. The error history stays.
  FM_PREPARE(del, "DELETE FROM results WHERE job_id IN (SELECT id FROM jobs WHERE item_id = ?)");
  FM_RETURN_IF_ERROR(del.Bind(1, item_id).Run());
  // Dependency order, so a dependant sees its dependencies' new states.
  for (const StageSpec& spec : graph_->stages()) {
    if (spec.dataset_level) continue;
    int state = 0;
    auto job = JobState_(item_id, spec.name, &state);
    if (!job.ok()) {
      if (job.status().IsNotFound()) continue;
      return job.status();
    }
    int to = spec.deps.empty() ? kPending : kWaiting;
    std::string reason;
    // Dependencies were requeued earlier in this loop: one that is skipped now (does not
    // apply to this kind) skips this job too, or it would wait forever.
    for (const std::string& d : spec.deps) {
      int dep_state = 0;
      auto dep = JobState_(item_id, d, &dep_state);
      if (!dep.ok()) {
        if (dep.status().IsNotFound()) continue;
        return dep.status();
      }
      if (dep_state == kSkipped) {
        to = kSkipped;
        reason = "dependency " + d + " was skipped";
      }
    }
    if (!spec.AppliesTo(kind)) {
      to = kSkipped;
      reason = spec.name + " does not apply to " + std::string(MediaKindName(kind)) + " items";
    }
    FM_PREPARE(up,
               "UPDATE jobs SET state = ?, attempts = 0, next_run_at = 0, lease_owner = NULL,"
               " lease_token = NULL, lease_expires_at = NULL, started_at = NULL,"
               " finished_at = ?, device = NULL, error_class = ?, last_error = ? WHERE id = ?");
    up.Bind(1, to);
    if (reason.empty()) {
      up.BindNull(2).BindNull(3).BindNull(4);
    } else {
      up.Bind(2, Now()).Bind(3, "not_applicable").Bind(4, reason);
    }
    FM_RETURN_IF_ERROR(up.Bind(5, *job).Run());
    ++stats->jobs_requeued;
    if (to == kSkipped) {
      FM_RETURN_IF_ERROR(CascadeTerminal(*job, JobState::kSkipped, "not_applicable",
                                         "dependency " + spec.name + " was skipped",
                                         Now()));
    }
  }
  return Status::OK();
}

template <class Db>
Status SqlJobStore<Db>::EnsureDatasetJobs(const EnqueueOptions& options, bool items_arrived) {
  const int64_t now = Now();
  bool any = false;
  for (const std::string& name : options.stages) {
    const StageSpec* spec = graph_->Find(name);
    if (spec == nullptr) return Status::InvalidArgument("unknown stage " + name);
    any |= spec->dataset_level;
  }
  if (!any) return Status::OK();
  FM_PREPARE(item, "INSERT INTO items (source, kind, created_at, updated_at) VALUES (?, 0, ?, ?)"
                   " ON CONFLICT (source) DO NOTHING");
  FM_RETURN_IF_ERROR(item.Bind(1, kDatasetSource).Bind(2, now).Bind(3, now).Run());
  FM_PREPARE(find, "SELECT id FROM items WHERE source = ?");
  find.Bind(1, kDatasetSource);
  FM_STEP(row, find.Step());
  if (!row) return Status::Internal("dataset item missing");
  int64_t dataset_item = find.Int(0);
  for (const std::string& name : options.stages) {
    if (!graph_->Find(name)->dataset_level) continue;
    FM_PREPARE(ins, "INSERT INTO jobs (item_id, stage, state, priority, max_attempts, created_at)"
                    " VALUES (?,?," S_WAITING ",?,?,?) ON CONFLICT (item_id, stage) DO NOTHING");
    FM_RETURN_IF_ERROR(ins.Bind(1, dataset_item).Bind(2, name)
                           .Bind(3, options.priority).Bind(4, options.max_attempts)
                           .Bind(5, now).Run());
    if (items_arrived) {
      // New data: run the dataset stage again. Its previous result stays until the new
      // one replaces it, so it can work incrementally. A pending job waits again for the
      // new items' jobs; a running one cannot have seen them, so it loses its lease (its
      // completion is then stale) and runs again too.
      FM_PREPARE(re, "UPDATE jobs SET state = " S_WAITING ", attempts = 0, next_run_at = 0,"
                     " lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,"
                     " error_class = NULL, last_error = NULL"
                     " WHERE item_id = ? AND stage = ? AND state <> " S_WAITING);
      FM_RETURN_IF_ERROR(re.Bind(1, dataset_item).Bind(2, name).Run());
    }
  }
  return Status::OK();
}

template <class Db>
Status SqlJobStore<Db>::RearmDatasetJobs() {
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
Status SqlJobStore<Db>::PromoteDatasetJobs(int64_t now) {
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

template <class Db>
Result<EnqueueStats> SqlJobStore<Db>::Enqueue(const std::vector<NewItem>& items,
                                             const EnqueueOptions& options) {
  EnqueueStats stats;
  Status s = db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    stats = EnqueueStats();
    FM_RETURN_IF_ERROR(LockGraph());
    const int64_t now = Now();
    for (const NewItem& it : items) {
      FM_PREPARE(find, "SELECT id, coalesce(content_hash, ''), kind, is_url FROM items"
                       " WHERE source = ?");
      find.Bind(1, it.source);
      FM_STEP(exists, find.Step());
      if (!exists) {
        FM_PREPARE(ins, "INSERT INTO items (source, kind, size, mtime_ns, content_hash,"
                        " media_info, created_at, updated_at, is_url, metadata)"
                        " VALUES (?,?,?,?,?,?,?,?,?,?) RETURNING id");
        ins.Bind(1, it.source).Bind(2, static_cast<int>(it.kind)).Bind(3, it.size)
            .Bind(4, it.mtime_ns);
        if (it.is_url) ins.BindNull(5); else ins.Bind(5, it.content_hash);
        ins.Bind(6, it.media_info).Bind(7, now).Bind(8, now).Bind(9, it.is_url ? 1 : 0);
        if (it.is_url) ins.Bind(10, it.metadata); else ins.BindNull(10);
        FM_STEP(added, ins.Step());
        if (!added) return Status::Internal("inserting item " + it.source + " returned no id");
        const int64_t item_id = ins.Int(0);
        ++stats.items_added;
        FM_RETURN_IF_ERROR(InsertJobsForItem(item_id, it.kind, options, &stats, it.is_url));
        continue;
      }
      int64_t id = find.Int(0);
      if (it.is_url || find.Int(3) != 0) {
        // Known by its URL: the content is whatever its fetch found (or will find).
        ++stats.items_unchanged;
        FM_RETURN_IF_ERROR(InsertJobsForItem(id, static_cast<MediaKind>(find.Int(2)), options,
                                             &stats, find.Int(3) != 0));
        continue;
      }
      bool changed = find.Text(1) != it.content_hash ||
                     static_cast<MediaKind>(find.Int(2)) != it.kind;
      FM_PREPARE(up, "UPDATE items SET kind = ?, size = ?, mtime_ns = ?, content_hash = ?,"
                     " media_info = ?, updated_at = ? WHERE id = ?"
                     " AND (size <> ? OR mtime_ns <> ? OR content_hash IS DISTINCT FROM ? OR kind <> ?)");
      FM_RETURN_IF_ERROR(up.Bind(1, static_cast<int>(it.kind)).Bind(2, it.size)
                             .Bind(3, it.mtime_ns).Bind(4, it.content_hash)
                             .Bind(5, it.media_info).Bind(6, now).Bind(7, id).Bind(8, it.size)
                             .Bind(9, it.mtime_ns).Bind(10, it.content_hash)
                             .Bind(11, static_cast<int>(it.kind)).Run());
      if (changed) {
        ++stats.items_changed;
        FM_RETURN_IF_ERROR(RequeueItemJobs(id, it.kind, &stats));
      } else {
        ++stats.items_unchanged;
      }
      FM_RETURN_IF_ERROR(InsertJobsForItem(id, it.kind, options, &stats, false));
    }
    FM_RETURN_IF_ERROR(
        EnsureDatasetJobs(options, stats.items_added + stats.items_changed > 0));
    // An enqueue that names only upstream stages still gives a finished dataset job new
    // inputs (faces of new items for face_clusters): it must wait for them again.
    FM_RETURN_IF_ERROR(RearmDatasetJobs());
    if (stats.jobs_added + stats.jobs_requeued > 0) FM_RETURN_IF_ERROR(Notify());
    return PromoteDatasetJobs(now);
  });
  if (!s.ok()) return s;
  RefreshPlannerStatistics(stats.jobs_added);
  return stats;
}

// ---------------------------------------------------------------- workers

template <class Db>
Status SqlJobStore<Db>::RecordError(int64_t job_id, int attempt, const std::string& worker,
                                   const Status& error, int64_t now) {
  return InsertJobError(*db_, job_id, attempt, worker, error, "", now);
}

template <class Db>
Status SqlJobStore<Db>::PromoteDependants(int64_t job_id, int64_t now) {
  FM_PREPARE(up,
             "UPDATE jobs SET state = " S_PENDING ", next_run_at = ? WHERE state = " S_WAITING
             " AND id IN (SELECT job_id FROM job_deps WHERE dep_id = ?)"
             " AND NOT EXISTS (SELECT 1 FROM job_deps d JOIN jobs j ON j.id = d.dep_id"
             "                 WHERE d.job_id = jobs.id AND j.state <> " S_DONE ")");
  FM_RETURN_IF_ERROR(up.Bind(1, now).Bind(2, job_id).Run());
  return db_->Changes() > 0 ? Notify() : Status::OK();
}

template <class Db>
Status SqlJobStore<Db>::CascadeTerminal(int64_t job_id, JobState to,
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
Status SqlJobStore<Db>::CascadeFailure(int64_t job_id, const std::string& stage,
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
Status SqlJobStore<Db>::ApplyFetched(int64_t job_id, const FetchedFile& file, int64_t now) {
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
Status SqlJobStore<Db>::SkipNotApplicable(int64_t item_id, MediaKind kind, int64_t now) {
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

namespace {
// The UPDATE behind every rescue: running jobs matching `where` go back to pending as
// suspects, or fail at max attempts, with `why_sql` as the reason. ?1 is now, ?2 the class.
std::string RescueSql(const std::string& where, const std::string& why_sql) {
  return "UPDATE jobs SET state = CASE WHEN attempts >= max_attempts THEN " S_FAILED
         " ELSE " S_PENDING " END,"
         " lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, suspect = 1,"
         " next_run_at = ?1, error_class = ?2, last_error = " + why_sql + ","
         " finished_at = CASE WHEN attempts >= max_attempts THEN ?1 ELSE NULL END"
         " WHERE state = " S_RUNNING " AND " + where +
         " RETURNING id, state, attempts, last_error, stage";
}
constexpr char kHeldByWorker[] =
    "lease_owner IN (SELECT id FROM workers WHERE run_id = ?4 AND pid = ?5)";
}  // namespace

template <class Db>
Result<int> SqlJobStore<Db>::RescueExpiredLocked(int64_t now) {
  // Runs in every claim: the statement's text is made once.
  static const std::string kSql = RescueSql(
      "lease_expires_at < ?1",
      "'worker ' || coalesce(lease_owner, '?') || ' stopped renewing its lease (crashed or hung)'");
  // PostgreSQL's claim looks for expired leases before it comes here (ClaimPg).
  FM_RETURN_IF_ERROR(LockGraph());
  return RescueLocked(kSql, [](typename Db::Stmt&) {}, "lease_expired", now);
}

template <class Db>
Result<int> SqlJobStore<Db>::RescueLocked(const std::string& sql,
                                         const std::function<void(typename Db::Stmt&)>& bind,
                                         const std::string& error_class, int64_t now) {
  FM_PREPARE(up, sql);
  up.Bind(1, now).Bind(2, error_class);
  bind(up);
  struct Rescued {
    int64_t id;
    int state, attempts;
    std::string why, stage;
  };
  std::vector<Rescued> rescued;
  for (;;) {
    FM_STEP(row, up.Step());
    if (!row) break;
    rescued.push_back({up.Int(0), static_cast<int>(up.Int(1)), static_cast<int>(up.Int(2)),
                       up.Text(3), up.Text(4)});
  }
  for (const Rescued& r : rescued) {
    // A lost worker is not the input's fault, so it counts as transient.
    FM_RETURN_IF_ERROR(RecordError(r.id, r.attempts, "", Status::Aborted(r.why), now));
    if (r.state == kFailed) FM_RETURN_IF_ERROR(CascadeFailure(r.id, r.stage, error_class, now));
  }
  if (!rescued.empty()) {
    spdlog::info("rescued {} job(s): {}", rescued.size(), error_class);
    FM_RETURN_IF_ERROR(Notify());
    FM_RETURN_IF_ERROR(PromoteDatasetJobs(now));
  }
  return static_cast<int>(rescued.size());
}

template <class Db>
Result<int> SqlJobStore<Db>::RescueWorkerJobs(int64_t run_id, int pid,
                                             const std::string& error_class,
                                             const std::string& reason) {
  int n = 0;
  Status s = db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    FM_RETURN_IF_ERROR(LockGraph());
    static const std::string kSql = RescueSql(kHeldByWorker, "?3");
    auto r = RescueLocked(
        kSql,
        [&](typename Db::Stmt& st) { st.Bind(3, reason).Bind(4, run_id).Bind(5, static_cast<int64_t>(pid)); },
        error_class, Now());
    if (!r.ok()) return r.status();
    n = *r;
    return Status::OK();
  });
  if (!s.ok()) return s;
  return n;
}

template <class Db>
Result<int> SqlJobStore<Db>::ReleaseWorkerJobs(int64_t run_id, int pid) {
  int n = 0;
  Status s = db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    FM_PREPARE(up, std::string("UPDATE jobs SET state = " S_PENDING
                               ", attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, lease_owner = NULL,"
                               " lease_token = NULL, lease_expires_at = NULL, started_at = NULL"
                               " WHERE state = " S_RUNNING " AND ") + kHeldByWorker);
    FM_RETURN_IF_ERROR(up.Bind(4, run_id).Bind(5, static_cast<int64_t>(pid)).Run());
    n = static_cast<int>(db_->Changes());
    return n > 0 ? Notify() : Status::OK();
  });
  if (!s.ok()) return s;
  return n;
}

template <class Db>
Result<int> SqlJobStore<Db>::RescueExpired() {
  int n = 0;
  Status s = db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    auto r = RescueExpiredLocked(Now());
    if (!r.ok()) return r.status();
    n = *r;
    return Status::OK();
  });
  if (!s.ok()) return s;
  return n;
}

template <class Db>
Result<std::vector<ClaimedJob>> SqlJobStore<Db>::Claim(const std::string& worker,
                                                      const std::vector<std::string>& stages,
                                                      int limit, int64_t lease_ms) {
  if (stages.empty() || limit <= 0) return std::vector<ClaimedJob>();
  if constexpr (std::is_same_v<Db, PgDb>) return ClaimPg(worker, stages, limit, lease_ms);
  else return ClaimSqlite(worker, stages, limit, lease_ms);
}

template <class Db>
int64_t SqlJobStore<Db>::NewLeaseToken() {
  const int64_t token = static_cast<int64_t>(rng_() >> 1);
  return token == 0 ? 1 : token;
}

template <class Db>
ClaimedJob SqlJobStore<Db>::ClaimedRow(const Stmt& st, int64_t token) const {
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
void SqlJobStore<Db>::SetItem(const Stmt& st, int col, ClaimedJob* j) const {
  // A fetched URL item is its local file for every stage but the download itself.
  const StageSpec* spec = graph_->Find(j->stage);
  const bool downloads = spec != nullptr && spec->downloads;
  j->source = st.IsNull(col + 1) || downloads ? st.Text(col) : st.Text(col + 1);
  j->kind = static_cast<MediaKind>(st.Int(col + 2));
  j->media_info = st.Text(col + 3);
}

template <class Db>
Result<std::vector<ClaimedJob>> SqlJobStore<Db>::ClaimSqlite(const std::string& worker,
                                                            const std::vector<std::string>& stages,
                                                            int limit, int64_t lease_ms) {
  std::vector<ClaimedJob> out;
  // Both claims lease what a subquery picks: pending, due, of these stages, in order.
  // Literal state and `+stage` so the planner walks the partial index in order and
  // stops after LIMIT rows, instead of sorting every pending job of the stages.
  const std::string lease =
      "UPDATE jobs SET state = " S_RUNNING ", lease_token = ?, lease_owner = ?,"
      " lease_expires_at = ?, attempts = attempts + 1, started_at = ?"
      " WHERE id IN (SELECT id FROM jobs WHERE state = " S_PENDING " AND next_run_at <= ?"
      " AND +stage IN (" + Placeholders(stages.size()) + ")";
  const std::string order = " ORDER BY priority DESC, id LIMIT ";
  const std::string returning = ") RETURNING id, item_id, stage, attempts, max_attempts";
  // A suspect (its last worker died holding it) is claimed alone, ahead of others.
  const std::string suspect_sql = lease + " AND suspect = 1" + order + "1" + returning;
  const std::string sql = lease + order + "?" + returning;
  Status s = db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    out.clear();
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
      if (with_limit) up.Bind(i++, limit);
      for (;;) {
        FM_STEP(row, up.Step());
        if (!row) break;
        out.push_back(ClaimedRow(up, token));
      }
      return Status::OK();
    };
    FM_RETURN_IF_ERROR(claim(suspect_sql, false));
    if (out.empty()) FM_RETURN_IF_ERROR(claim(sql, true));
    for (ClaimedJob& j : out) {
      FM_PREPARE(item, "SELECT source, fetched_path, kind, media_info FROM items WHERE id = ?");
      item.Bind(1, j.item_id);
      FM_STEP(row, item.Step());
      if (!row) return Status::Internal("job " + std::to_string(j.id) + " has no item");
      SetItem(item, 0, &j);
    }
    return Status::OK();
  });
  if (!s.ok()) return s;
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return out;
}

// PostgreSQL: every round trip to the server costs more than the SQL itself, so a claim is
// one statement (its own transaction, committed without waiting for the WAL flush: a claim
// lost in a server crash only makes its jobs claimable again), preceded by a probe for
// expired leases that runs the rescue transaction only when there are some. A suspect is
// claimed alone, ahead of the rest, as on SQLite; the items come back with the jobs.
template <class Db>
Result<std::vector<ClaimedJob>> SqlJobStore<Db>::ClaimPg(const std::string& worker,
                                                        const std::vector<std::string>& stages,
                                                        int limit, int64_t lease_ms) {
  // ?1: now (NULL: the server's clock), ?2 token, ?3 worker, ?4 lease, ?5 limit, ?6.. stages.
  std::string in = "?6";
  for (size_t i = 1; i < stages.size(); ++i) in += ",?" + std::to_string(6 + i);
  const std::string now = "(SELECT now FROM t)";
  // Not indexable on purpose, as SQLite's `+stage`: the planner then walks the partial
  // claim index in order and stops at the limit, even on statistics from before a large
  // enqueue (which made it sort every pending job of the stage: 3 ms at 10,000).
  const std::string kStage = "(stage || '')";
  const std::string sql =
      "WITH t AS (SELECT " + std::string(kPgClaimNow) + " AS now),"
      " s AS (SELECT id FROM jobs WHERE state = " S_PENDING " AND suspect = 1 AND next_run_at <= " +
      now + " AND " + kStage + " IN (" + in + ") ORDER BY priority DESC, id LIMIT 1"
      " FOR UPDATE SKIP LOCKED),"
      " p AS (SELECT id FROM jobs WHERE state = " S_PENDING " AND next_run_at <= " + now +
      " AND " + kStage + " IN (" + in + ") AND NOT EXISTS (SELECT 1 FROM s)"
      " ORDER BY priority DESC, id LIMIT ?5 FOR UPDATE SKIP LOCKED),"
      " c AS (UPDATE jobs SET state = " S_RUNNING ", lease_token = ?2, lease_owner = ?3,"
      " lease_expires_at = " + now + " + ?4, attempts = attempts + 1, started_at = " + now +
      " WHERE id IN (SELECT id FROM s UNION ALL SELECT id FROM p)"
      " RETURNING id, item_id, stage, attempts, max_attempts)"
      " SELECT c.id, c.item_id, c.stage, c.attempts, c.max_attempts, i.source, i.fetched_path,"
      " i.kind, i.media_info FROM c JOIN items i ON i.id = c.item_id";
  auto bind_now = [&](typename Db::Stmt& st) {
    if (options_.server_time) st.BindNull(1); else st.Bind(1, clock_->NowMs());
  };
  bool expired = false;
  FM_RETURN_IF_ERROR(db_->Transaction(Db::TxnKind::kAutocommit, [&]() -> Status {
    FM_PREPARE(any, "SELECT 1 FROM jobs WHERE state = " S_RUNNING " AND lease_expires_at < " +
                        std::string(kPgClaimNow) + " LIMIT 1");
    bind_now(any);
    FM_STEP(row, any.Step());
    expired = row;
    return Status::OK();
  }));
  if (expired) {
    auto r = RescueExpired();
    if (!r.ok()) return r.status();
  }
  std::vector<ClaimedJob> out;
  const int64_t token = NewLeaseToken();
  FM_RETURN_IF_ERROR(db_->Transaction(Db::TxnKind::kAutocommit, [&]() -> Status {
    out.clear();
    FM_PREPARE(up, sql);
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
    return Status::OK();
  }));
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
  return out;
}

template <class Db>
Result<int> SqlJobStore<Db>::Heartbeat(const std::string& worker, int64_t lease_ms) {
  int n = 0;
  Status s = db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    const int64_t now = Now();
    FM_PREPARE(up, "UPDATE jobs SET lease_expires_at = ? WHERE state = " S_RUNNING
                   " AND lease_owner = ?");
    FM_RETURN_IF_ERROR(up.Bind(1, now + lease_ms).Bind(2, worker).Run());
    n = static_cast<int>(db_->Changes());
    FM_PREPARE(w, "UPDATE workers SET heartbeat_at = ? WHERE id = ?");
    return w.Bind(1, now).Bind(2, worker).Run();
  });
  if (!s.ok()) return s;
  return n;
}

template <class Db>
Result<CompleteStats> SqlJobStore<Db>::Complete(const std::vector<FinishedJob>& batch) {
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
  CompleteStats stats;
  Status s = db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    stats = CompleteStats();
    if (graph) FM_RETURN_IF_ERROR(LockGraph());
    std::map<std::string, WorkerTally> per_worker;
    const int64_t now = Now();
    done_in_txn_.clear();
    std::vector<bool> recorded(batch.size(), false);
    FM_RETURN_IF_ERROR(CompleteLeavesDone(batch, done, now, &recorded, &stats, &per_worker));
    for (size_t i = 0; i < batch.size(); ++i)
      if (!recorded[i]) FM_RETURN_IF_ERROR(CompleteOne(batch[i], done[i], now, &stats, &per_worker));
    FM_RETURN_IF_ERROR(AddWorkerTallies(per_worker, now));
    return PromoteDatasetJobs(now);
  });
  if (!s.ok()) return s;
  return stats;
}

template <class Db>
Status SqlJobStore<Db>::CompleteLeavesDone(const std::vector<FinishedJob>& batch,
                                           const std::vector<SerializedDone>& done, int64_t now,
                                           std::vector<bool>* recorded, CompleteStats* stats,
                                           std::map<std::string, WorkerTally>* per_worker) {
  std::vector<size_t> candidates;
  for (size_t i = 0; i < batch.size(); ++i)
    if (batch[i].outcome.done() && !batch[i].outcome.fetched) candidates.push_back(i);
  if (candidates.size() < 2) return Status::OK();
  // Fence, as CompleteOne does, for all of them at once.
  FM_PREPARE(own, "SELECT id, lease_token, lease_owner, stage FROM jobs WHERE state = " S_RUNNING
                  " AND id IN (" + Placeholders(candidates.size()) + ")" +
                  Dialect<Db>::kForUpdate);
  for (size_t k = 0; k < candidates.size(); ++k)
    own.Bind(static_cast<int>(k + 1), batch[candidates[k]].job_id);
  struct Held {
    int64_t token;
    std::string worker, stage;
  };
  std::map<int64_t, Held> held;
  for (;;) {
    FM_STEP(row, own.Step());
    if (!row) break;
    held[own.Int(0)] = {own.Int(1), own.Text(2), own.Text(3)};
  }
  std::map<std::string, std::vector<size_t>> by_device;  // what we hold, of leaf stages
  std::set<int64_t> seen;
  for (size_t i : candidates) {
    auto it = held.find(batch[i].job_id);
    if (it == held.end() || it->second.token != batch[i].lease_token ||
        HasDependants(it->second.stage) || !seen.insert(batch[i].job_id).second)
      continue;  // stale, promotes others, or given twice: CompleteOne says which
    by_device[batch[i].outcome.device].push_back(i);
  }
  std::vector<size_t> mine;
  for (const auto& [device, rows] : by_device) {
    FM_PREPARE(up, "UPDATE jobs SET state = " S_DONE ", finished_at = ?, device = ?,"
                   " done_token = lease_token, lease_owner = NULL, lease_token = NULL,"
                   " lease_expires_at = NULL, suspect = 0, error_class = NULL, last_error = NULL"
                   " WHERE id IN (" + Placeholders(rows.size()) + ")");
    up.Bind(1, now).Bind(2, device);
    for (size_t k = 0; k < rows.size(); ++k) up.Bind(static_cast<int>(k + 3), batch[rows[k]].job_id);
    FM_RETURN_IF_ERROR(up.Run());
    mine.insert(mine.end(), rows.begin(), rows.end());
  }
  if (mine.empty()) return Status::OK();
  std::string values;
  for (size_t k = 0; k < mine.size(); ++k) values += k ? ",(?,?,?,?,?)" : "(?,?,?,?,?)";
  FM_PREPARE(res, "INSERT INTO results (job_id, device, result, artifacts, created_at) VALUES " +
                      values + " ON CONFLICT (job_id) DO UPDATE SET device = excluded.device,"
                      " result = excluded.result, artifacts = excluded.artifacts,"
                      " created_at = excluded.created_at");
  for (size_t k = 0; k < mine.size(); ++k) {
    const size_t i = mine[k];
    const int at = static_cast<int>(5 * k);
    res.Bind(at + 1, batch[i].job_id).Bind(at + 2, batch[i].outcome.device)
        .Bind(at + 3, done[i].result).Bind(at + 4, done[i].artifacts).Bind(at + 5, now);
  }
  FM_RETURN_IF_ERROR(res.Run());
  for (size_t i : mine) {
    done_in_txn_.insert(batch[i].job_id);
    (*recorded)[i] = true;
    ++stats->done;
    ++(*per_worker)[held[batch[i].job_id].worker].done;
  }
  return Status::OK();
}

template <class Db>
Status SqlJobStore<Db>::CompleteOne(const FinishedJob& f, const SerializedDone& done, int64_t now,
                                   CompleteStats* stats,
                                   std::map<std::string, WorkerTally>* per_worker) {
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
      return RecordDone(job, f.outcome, done, now);
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
bool SqlJobStore<Db>::HasDependants(const std::string& stage) const {
  const StageSpec* spec = graph_->Find(stage);
  return (spec != nullptr && spec->downloads) || stages_with_dependants_.count(stage) > 0;
}

template <class Db>
Status SqlJobStore<Db>::RecordDone(const HeldJob& job, const Outcome& o, const SerializedDone& done,
                                  int64_t now) {
  FM_PREPARE(up, "UPDATE jobs SET state = " S_DONE ", finished_at = ?, device = ?,"
                 " done_token = lease_token, lease_owner = NULL, lease_token = NULL,"
                 " lease_expires_at = NULL, suspect = 0, error_class = NULL, last_error = NULL"
                 " WHERE id = ?");
  FM_RETURN_IF_ERROR(up.Bind(1, now).Bind(2, o.device).Bind(3, job.id).Run());
  done_in_txn_.insert(job.id);
  FM_PREPARE(res, "INSERT INTO results (job_id, device, result, artifacts, created_at)"
                  " VALUES (?,?,?,?,?) ON CONFLICT (job_id) DO UPDATE SET"
                  " device = excluded.device, result = excluded.result,"
                  " artifacts = excluded.artifacts, created_at = excluded.created_at");
  FM_RETURN_IF_ERROR(res.Bind(1, job.id).Bind(2, o.device).Bind(3, done.result)
                         .Bind(4, done.artifacts).Bind(5, now).Run());
  if (o.fetched) {
    FM_RETURN_IF_ERROR(ApplyFetched(job.id, *o.fetched, now));
  } else if (const StageSpec* spec = graph_->Find(job.stage); spec != nullptr && spec->downloads) {
    // A download that says done without a file: nothing can run on this item.
    FM_RETURN_IF_ERROR(CascadeTerminal(job.id, JobState::kSkipped, "fetch_failed",
                                       "the fetch recorded no local file", now));
  }
  if (HasDependants(job.stage)) FM_RETURN_IF_ERROR(PromoteDependants(job.id, now));
  return Status::OK();
}

template <class Db>
Status SqlJobStore<Db>::RecordSkipped(const HeldJob& job, const Outcome& o, int64_t now) {
  FM_PREPARE(up, "UPDATE jobs SET state = " S_SKIPPED ", finished_at = ?, lease_owner = NULL,"
                 " lease_token = NULL, lease_expires_at = NULL,"
                 " error_class = 'not_applicable', last_error = ? WHERE id = ?");
  FM_RETURN_IF_ERROR(up.Bind(1, now).Bind(2, o.error.message()).Bind(3, job.id).Run());
  if (!HasDependants(job.stage)) return Status::OK();
  return CascadeTerminal(job.id, JobState::kSkipped, "not_applicable", "a dependency was skipped",
                         now);
}

template <class Db>
Status SqlJobStore<Db>::RecordFailed(const HeldJob& job, const Outcome& o, int64_t retry_at_ms,
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
  return CascadeFailure(job.id, job.stage, why_class, now);
}

template <class Db>
Status SqlJobStore<Db>::AddWorkerTallies(const std::map<std::string, WorkerTally>& per_worker,
                                        int64_t now) {
  for (const auto& [worker, t] : per_worker) {
    FM_PREPARE(w, "UPDATE workers SET heartbeat_at = ?, jobs_done = jobs_done + ?,"
                  " jobs_failed = jobs_failed + ? WHERE id = ?");
    FM_RETURN_IF_ERROR(w.Bind(1, now).Bind(2, t.done).Bind(3, t.failed).Bind(4, worker).Run());
  }
  return Status::OK();
}

template <class Db>
Result<int> SqlJobStore<Db>::Release(const std::vector<ClaimedJob>& jobs) {
  int n = 0;
  Status s = db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    n = 0;
    for (const ClaimedJob& j : jobs) {
      FM_PREPARE(up, "UPDATE jobs SET state = " S_PENDING ", attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END,"
                     " lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,"
                     " started_at = NULL WHERE id = ? AND state = " S_RUNNING " AND lease_token = ?");
      FM_RETURN_IF_ERROR(up.Bind(1, j.id).Bind(2, j.lease_token).Run());
      n += static_cast<int>(db_->Changes());
    }
    return n > 0 ? Notify() : Status::OK();
  });
  if (!s.ok()) return s;
  return n;
}

template <class Db>
Result<JobStore::Outstanding> SqlJobStore<Db>::CountOutstanding(
    const std::vector<std::string>& stages) {
  Outstanding o;
  if (stages.empty()) return o;
  std::string sql = "SELECT state, count(*), min(next_run_at) FROM jobs WHERE state IN (" S_PENDING
                    "," S_RUNNING ") AND stage IN (" + Placeholders(stages.size()) + ") GROUP BY state";
  Status s = db_->Transaction(Db::TxnKind::kRead, [&]() -> Status {
    o = Outstanding();
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
    return Status::OK();
  });
  if (!s.ok()) return s;
  return o;
}

// ---------------------------------------------------------------- bookkeeping

template <class Db>
Result<int64_t> SqlJobStore<Db>::BeginRun(int workers, const std::string& stages) {
  int64_t id = 0;
  Status s = db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    FM_PREPARE(ins, "INSERT INTO runs (started_at, workers, stages) VALUES (?,?,?) RETURNING id");
    ins.Bind(1, Now()).Bind(2, workers).Bind(3, stages);
    FM_STEP(row, ins.Step());
    if (!row) return Status::Internal("inserting a run returned no id");
    id = ins.Int(0);
    return Status::OK();
  });
  if (!s.ok()) return s;
  return id;
}

template <class Db>
Status SqlJobStore<Db>::EndRun(int64_t run_id, int exit_code) {
  return db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
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
Status SqlJobStore<Db>::RegisterWorker(const std::string& worker, int64_t run_id, int pid,
                                      const std::string& host) {
  return db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    const int64_t now = Now();
    FM_PREPARE(ins, "INSERT INTO workers (id, run_id, pid, host, started_at, heartbeat_at)"
                    " VALUES (?,?,?,?,?,?) ON CONFLICT (id) DO UPDATE SET heartbeat_at = ?");
    ins.Bind(1, worker);
    if (run_id > 0) ins.Bind(2, run_id); else ins.BindNull(2);
    return ins.Bind(3, pid).Bind(4, host).Bind(5, now).Bind(6, now).Bind(7, now).Run();
  });
}

template <class Db>
Status SqlJobStore<Db>::WorkerStopped(const std::string& worker) {
  return db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    FM_PREPARE(up, "UPDATE workers SET stopped_at = ? WHERE id = ?");
    return up.Bind(1, Now()).Bind(2, worker).Run();
  });
}

template <class Db>
Status SqlJobStore<Db>::AddGpuEvents(const std::string& worker, int64_t oom_events,
                                    int64_t cpu_fallbacks) {
  if (oom_events == 0 && cpu_fallbacks == 0) return Status::OK();
  return db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    FM_PREPARE(up, "UPDATE workers SET oom_events = oom_events + ?,"
                   " cpu_fallbacks = cpu_fallbacks + ? WHERE id = ?");
    return up.Bind(1, oom_events).Bind(2, cpu_fallbacks).Bind(3, worker).Run();
  });
}

template <class Db>
Result<std::optional<TuningRecord>> SqlJobStore<Db>::LoadTuning(const std::string& op,
                                                               const std::string& device,
                                                               int size_bucket) {
  std::optional<TuningRecord> out;
  Status s = db_->Transaction(Db::TxnKind::kRead, [&]() -> Status {
    out.reset();
    FM_PREPARE(q, "SELECT batch, bytes_per_item FROM batch_tuning"
                  " WHERE op = ? AND device = ? AND size_bucket = ?");
    q.Bind(1, op).Bind(2, device).Bind(3, size_bucket);
    FM_STEP(row, q.Step());
    if (row) out = TuningRecord{op, device, size_bucket, static_cast<int>(q.Int(0)), q.Int(1)};
    return Status::OK();
  });
  if (!s.ok()) return s;
  return out;
}

template <class Db>
Status SqlJobStore<Db>::SaveTuning(const TuningRecord& r) {
  return db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    FM_PREPARE(up, "INSERT INTO batch_tuning (op, device, size_bucket, batch, bytes_per_item,"
                   " updated_at) VALUES (?,?,?,?,?,?) ON CONFLICT (op, device, size_bucket)"
                   " DO UPDATE SET batch = excluded.batch,"
                   " bytes_per_item = excluded.bytes_per_item, updated_at = excluded.updated_at");
    return up.Bind(1, r.op).Bind(2, r.device).Bind(3, r.size_bucket).Bind(4, r.batch)
        .Bind(5, r.bytes_per_item).Bind(6, Now()).Run();
  });
}

// ---------------------------------------------------------------- user commands

template <class Db>
Result<int64_t> SqlJobStore<Db>::RetryFailed(const std::string& stage,
                                             const std::string& error_class) {
  int64_t n = 0;
  Status s = db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    FM_RETURN_IF_ERROR(LockGraph());
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
    // Dependants that failed only because a retried job did wait for it again.
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
    // A retried job whose dependency is still failed (it was not retried) fails again at
    // once, as its dependants do: waiting on it would be forever.
    const int64_t now = Now();
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
        retried.erase(refail.Int(0));
      }
      if (changed == 0) break;
    }
    n = static_cast<int64_t>(retried.size());
    FM_PREPARE(ready,
               "UPDATE jobs SET state = ? WHERE state = ? AND item_id NOT IN"
               " (SELECT id FROM items WHERE kind = 0) AND NOT EXISTS"
               " (SELECT 1 FROM job_deps d JOIN jobs j ON j.id = d.dep_id"
               "  WHERE d.job_id = jobs.id AND j.state <> ?)");
    FM_RETURN_IF_ERROR(ready.Bind(1, kPending).Bind(2, kWaiting).Bind(3, kDone).Run());
    FM_RETURN_IF_ERROR(RearmDatasetJobs());
    if (n > 0) FM_RETURN_IF_ERROR(Notify());
    return PromoteDatasetJobs(Now());
  });
  if (!s.ok()) return s;
  return n;
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
Result<GcStats> SqlJobStore<Db>::CollectGarbage(const GcOptions& options) {
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
  Status s = db_->Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    stats = GcStats();
    FM_RETURN_IF_ERROR(remove(kOldErrors, &stats.job_errors));
    FM_RETURN_IF_ERROR(remove(kOldWorkers, &stats.workers));
    FM_RETURN_IF_ERROR(remove(kOldRuns, &stats.runs));
    return options.dry_run ? kDryRun : Status::OK();
  });
  if (!s.ok() && !(options.dry_run && s.IsAborted())) return s;
  return stats;
}

template <class Db>
Result<std::vector<StageCounts>> SqlJobStore<Db>::Counts(int64_t window_ms) {
  std::vector<StageCounts> out;
  Status s = db_->Transaction(Db::TxnKind::kRead, [&]() -> Status {
    out.clear();
    FM_PREPARE(q, "SELECT stage, state, count(*) FROM jobs GROUP BY stage, state");
    std::map<std::string, StageCounts> by;
    for (;;) {
      FM_STEP(row, q.Step());
      if (!row) break;
      StageCounts& c = by[q.Text(0)];
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
    const int64_t now = Now();
    FM_PREPARE(later, "SELECT stage, count(*), min(next_run_at) FROM jobs"
                      " WHERE state = " S_PENDING " AND next_run_at > ? GROUP BY stage");
    later.Bind(1, now);
    for (;;) {
      FM_STEP(row, later.Step());
      if (!row) break;
      auto it = by.find(later.Text(0));
      if (it == by.end()) continue;
      it->second.retry_later = later.Int(1);
      it->second.next_retry_at = later.Int(2);
    }
    FM_PREPARE(rate, "SELECT stage, count(*), min(finished_at) FROM jobs"
                     " WHERE state = ? AND finished_at >= ? GROUP BY stage");
    rate.Bind(1, kDone).Bind(2, now - window_ms);
    for (;;) {
      FM_STEP(row, rate.Step());
      if (!row) break;
      auto it = by.find(rate.Text(0));
      if (it == by.end()) continue;
      it->second.done_recent = rate.Int(1);
      it->second.window_s = std::max<double>(1.0, (now - rate.Int(2)) / 1000.0);
    }
    // Report in DAG order, then any stage the graph no longer knows.
    for (const StageSpec& spec : graph_->stages()) {
      auto it = by.find(spec.name);
      if (it != by.end()) {
        out.push_back(it->second);
        by.erase(it);
      }
    }
    for (auto& [name, c] : by) out.push_back(c);
    return Status::OK();
  });
  if (!s.ok()) return s;
  return out;
}

template <class Db>
Result<int64_t> SqlJobStore<Db>::ItemCount() {
  int64_t n = 0;
  Status s = db_->Transaction(Db::TxnKind::kRead, [&]() -> Status {
    FM_PREPARE(q, "SELECT count(*) FROM items WHERE kind <> 0");
    FM_STEP(row, q.Step());
    n = row ? q.Int(0) : 0;
    return Status::OK();
  });
  if (!s.ok()) return s;
  return n;
}

template <class Db>
Result<std::vector<ErrorClassCount>> SqlJobStore<Db>::FailuresByClass() {
  std::vector<ErrorClassCount> out;
  Status s = db_->Transaction(Db::TxnKind::kRead, [&]() -> Status {
    out.clear();
    FM_PREPARE(q, "SELECT stage, coalesce(error_class, 'unknown'), count(*), min(last_error)"
                  " FROM jobs WHERE state = ? GROUP BY 1, 2 ORDER BY 3 DESC");
    q.Bind(1, kFailed);
    for (;;) {
      FM_STEP(row, q.Step());
      if (!row) break;
      out.push_back({q.Text(0), q.Text(1), q.Text(3), q.Int(2)});
    }
    return Status::OK();
  });
  if (!s.ok()) return s;
  return out;
}

template <class Db>
Result<std::vector<RunRecord>> SqlJobStore<Db>::Runs(int limit) {
  std::vector<RunRecord> out;
  Status s = db_->Transaction(Db::TxnKind::kRead, [&]() -> Status {
    out.clear();
    FM_PREPARE(q, "SELECT id, started_at, coalesce(finished_at, 0), jobs_done, jobs_failed,"
                  " workers, coalesce(exit_code, -1), oom_events, cpu_fallbacks, stages"
                  " FROM runs ORDER BY id DESC LIMIT ?");
    q.Bind(1, static_cast<int64_t>(limit));
    for (;;) {
      FM_STEP(row, q.Step());
      if (!row) break;
      out.push_back(RunRecord{q.Int(0), q.Int(1), q.Int(2), q.Int(3), q.Int(4),
                              static_cast<int>(q.Int(5)), static_cast<int>(q.Int(6)), q.Int(7),
                              q.Int(8), q.Text(9)});
    }
    return Status::OK();
  });
  if (!s.ok()) return s;
  return out;
}

template <class Db>
Status SqlJobStore<Db>::ForEachItem(const std::function<Status(const ItemView&)>& fn) {
  // A page of items, then their jobs in the same snapshot.
  const int64_t page_items = std::max(1, options_.export_page_rows / 8);
  std::vector<ItemView> page;
  int64_t after = 0;
  do {
    Status s = db_->Transaction(Db::TxnKind::kRead, [&]() -> Status {
      page.clear();
      FM_PREPARE(items, "SELECT id, source, kind, coalesce(content_hash, ''), media_info,"
                        " coalesce(fetched_path, ''), is_url FROM items WHERE id > ?"
                        " ORDER BY id LIMIT ?");
      items.Bind(1, after).Bind(2, page_items);
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
      if (page.empty()) return Status::OK();
      FM_PREPARE(jobs, "SELECT j.item_id, j.id, j.stage, j.state, j.attempts,"
                       " coalesce(j.started_at, 0), coalesce(j.finished_at, 0),"
                       " coalesce(r.device, j.device, ''), coalesce(j.error_class, ''),"
                       " coalesce(j.last_error, ''), coalesce(r.result, ''),"
                       " coalesce(r.artifacts, '')"
                       " FROM jobs j LEFT JOIN results r ON r.job_id = j.id"
                       " WHERE j.item_id >= ? AND j.item_id <= ? ORDER BY j.item_id, j.stage");
      jobs.Bind(1, page.front().id).Bind(2, page.back().id);
      size_t at = 0;
      for (;;) {
        FM_STEP(row, jobs.Step());
        if (!row) break;
        while (at < page.size() && page[at].id < jobs.Int(0)) ++at;
        if (at == page.size()) break;
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
        page[at].jobs.push_back(std::move(j));
      }
      after = page.back().id;
      return Status::OK();
    });
    if (!s.ok()) return s;
    for (const ItemView& v : page) FM_RETURN_IF_ERROR(fn(v));
  } while (static_cast<int64_t>(page.size()) == page_items);
  return Status::OK();
}

template <class Db>
Result<std::vector<ErrorRecord>> SqlJobStore<Db>::ErrorHistory(int64_t limit) {
  std::vector<ErrorRecord> out;
  Status s = db_->Transaction(Db::TxnKind::kRead, [&]() -> Status {
    out.clear();
    FM_PREPARE(q, "SELECT e.job_id, e.attempt, e.at, i.source, j.stage, coalesce(e.worker, ''),"
                  " e.error_class, e.message, e.transient, j.state"
                  " FROM job_errors e JOIN jobs j ON j.id = e.job_id JOIN items i ON i.id = j.item_id"
                  " ORDER BY e.at DESC, e.id DESC LIMIT ?");
    q.Bind(1, limit);
    for (;;) {
      FM_STEP(row, q.Step());
      if (!row) break;
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
      out.push_back(std::move(e));
    }
    return Status::OK();
  });
  if (!s.ok()) return s;
  return out;
}

template <class Db>
Status SqlJobStore<Db>::ForEachResult(const std::string& stage,
                                     const std::function<Status(const ExportRow&)>& fn) {
  const std::string sql =
      "SELECT i.source, j.stage, r.device, r.result, r.artifacts, j.attempts, j.finished_at, j.id"
      " FROM results r JOIN jobs j ON j.id = r.job_id JOIN items i ON i.id = j.item_id"
      " WHERE j.state = ?1 AND j.id > ?2" + std::string(stage.empty() ? "" : " AND j.stage = ?4") +
      " ORDER BY j.id LIMIT ?3";
  const int64_t page_rows = std::max(1, options_.export_page_rows);
  std::vector<ExportRow> page;
  int64_t after = 0;
  do {
    Status s = db_->Transaction(Db::TxnKind::kRead, [&]() -> Status {
      page.clear();
      FM_PREPARE(q, sql);
      q.Bind(1, static_cast<int64_t>(kDone)).Bind(2, after).Bind(3, page_rows);
      if (!stage.empty()) q.Bind(4, stage);
      for (;;) {
        FM_STEP(row, q.Step());
        if (!row) break;
        page.push_back({q.Text(0), q.Text(1), q.Text(2), q.Text(3), q.Text(4), q.Int(5), q.Int(6)});
        after = q.Int(7);
      }
      return Status::OK();
    });
    if (!s.ok()) return s;
    for (const ExportRow& r : page) FM_RETURN_IF_ERROR(fn(r));
  } while (static_cast<int64_t>(page.size()) == page_rows);
  return Status::OK();
}

template <class Db>
Result<std::optional<ExportRow>> SqlJobStore<Db>::ResultOf(int64_t item_id,
                                                          const std::string& stage) {
  std::optional<ExportRow> row;
  Status s = db_->Transaction(Db::TxnKind::kRead, [&]() -> Status {
    FM_PREPARE(q,
               "SELECT i.source, j.stage, r.device, r.result, r.artifacts, j.attempts, j.finished_at"
               " FROM jobs j JOIN results r ON r.job_id = j.id JOIN items i ON i.id = j.item_id"
               " WHERE j.item_id = ? AND j.stage = ? AND j.state = ?");
    q.Bind(1, item_id).Bind(2, stage).Bind(3, static_cast<int64_t>(kDone));
    FM_STEP(found, q.Step());
    if (found) row = ExportRow{q.Text(0), q.Text(1), q.Text(2), q.Text(3), q.Text(4), q.Int(5), q.Int(6)};
    return Status::OK();
  });
  if (!s.ok()) return s;
  return row;
}

template class SqlJobStore<SqliteDb>;
template class SqlJobStore<PgDb>;

}  // namespace framemill
