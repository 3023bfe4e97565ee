#include "storage/sqlite_db.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <random>
#include <thread>

namespace framemill {

Stmt::~Stmt() {
  if (s_ != nullptr) {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
}

Stmt& Stmt::Bind(int i, int64_t v) {
  sqlite3_bind_int64(s_, i, v);
  return *this;
}
Stmt& Stmt::Bind(int i, double v) {
  sqlite3_bind_double(s_, i, v);
  return *this;
}
Stmt& Stmt::Bind(int i, std::string_view v) {
  sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::BindNull(int i) {
  sqlite3_bind_null(s_, i);
  return *this;
}

Result<bool> Stmt::Step() {
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteDb::FromSqlite(rc, sqlite3_sql(s_), sqlite3_db_handle(s_));
}

Status Stmt::Run() {
  for (;;) {
    auto r = Step();
    if (!r.ok()) return r.status();
    if (!*r) return Status::OK();
  }
}

std::string Stmt::Text(int col) const {
  const unsigned char* t = sqlite3_column_text(s_, col);
  if (t == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(t),
                     static_cast<size_t>(sqlite3_column_bytes(s_, col)));
}

Status SqliteDb::FromSqlite(int rc, std::string_view what, sqlite3* db) {
  std::string msg = std::string(db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  if (!what.empty()) msg += " [" + std::string(what.substr(0, 120)) + "]";
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return Status::Busy(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return Status::Corruption(msg);
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY: return Status::IOError(msg);
    case SQLITE_CONSTRAINT: return Status::InvalidArgument(msg);
    case SQLITE_NOMEM: return Status::OutOfMemory(msg);
    default: return Status::Internal(msg);
  }
}

namespace {
// Waits for a lock in short, jittered sleeps (SQLite's default handler sleeps 1, 2,
// 5, 10... ms, so a process that releases and retakes the lock at once starves the
// others). Gives up after busy_wait_ms; Transaction() then restarts the transaction.
int JitteredBusyHandler(void* arg, int count) {
  thread_local std::chrono::steady_clock::time_point wait_started;
  thread_local std::mt19937 rng(std::random_device{}());
  auto now = std::chrono::steady_clock::now();
  if (count == 0) wait_started = now;
  const int limit_ms = *static_cast<const int*>(arg);
  if (now - wait_started > std::chrono::milliseconds(limit_ms)) return 0;
  int cap_us = std::min(2000, 50 << std::min(count, 6));
  std::this_thread::sleep_for(
      std::chrono::microseconds(std::uniform_int_distribution<int>(cap_us / 4, cap_us)(rng)));
  return 1;
}
}  // namespace

Result<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path,
                                                 const SqliteOptions& options) {
  sqlite3* db = nullptr;
  int flags = options.read_only ? SQLITE_OPEN_READONLY
                                : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  flags |= SQLITE_OPEN_NOMUTEX;  // one connection per thread by contract
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    Status s = FromSqlite(rc, "open " + path, db);
    sqlite3_close(db);
    return s;
  }
  std::unique_ptr<SqliteDb> out(new SqliteDb(db, path));
  out->busy_wait_ms_ = options.busy_wait_ms;
  sqlite3_busy_handler(db, JitteredBusyHandler, &out->busy_wait_ms_);
  // journal_mode itself needs a lock; retry it like any write.
  for (int i = 0;; ++i) {
    Status s = out->Exec(options.read_only ? "PRAGMA foreign_keys=ON"
                                           : "PRAGMA journal_mode=WAL");
    if (s.ok()) break;
    if (!s.IsBusy() || i > 100) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + i * 5));
  }
  FM_RETURN_IF_ERROR(out->Exec("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"));
  // A file that is not a database, or is damaged, fails here with Corruption rather
  // than on the first query in some worker.
  auto probe = out->Prepare("SELECT count(*) FROM sqlite_master");
  if (!probe.ok()) return probe.status();
  auto step = probe->Step();
  if (!step.ok()) return step.status();
  return out;
}

SqliteDb::~SqliteDb() {
  for (auto& [sql, st] : cache_) sqlite3_finalize(st);
  sqlite3_close_v2(db_);
}

Status SqliteDb::Exec(std::string_view sql) {
  std::string s(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string m = err != nullptr ? err : "";
    sqlite3_free(err);
    Status st = FromSqlite(rc, sql, db_);
    return st;
  }
  return Status::OK();
}

Result<Stmt> SqliteDb::Prepare(std::string_view sql) {
  std::string key(sql);
  auto it = cache_.find(key);
  if (it != cache_.end()) return Stmt(it->second);
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v3(db_, key.c_str(), static_cast<int>(key.size()),
                              SQLITE_PREPARE_PERSISTENT, &st, nullptr);
  if (rc != SQLITE_OK) return FromSqlite(rc, sql, db_);
  cache_.emplace(std::move(key), st);
  return Stmt(st);
}

Status SqliteDb::Transaction(TxnKind kind, const std::function<Status()>& fn) {
  if (in_txn_) return fn();  // nested: join the outer transaction
  thread_local std::mt19937_64 rng(std::random_device{}());
  auto started = std::chrono::steady_clock::now();
  auto last_log = started;
  for (int attempt = 0;; ++attempt) {
    Status s = Exec(kind == TxnKind::kRead ? "BEGIN" : "BEGIN IMMEDIATE");
    if (s.ok()) {
      in_txn_ = true;
      s = fn();
      in_txn_ = false;
      if (s.ok()) s = Exec("COMMIT");
      if (s.ok()) return s;
      Exec("ROLLBACK");  // may fail if SQLite already rolled back; nothing to do then
    }
    if (!s.IsBusy()) return s;
    // Busy: back off with full jitter so contending workers spread out.
    int cap_ms = std::min(200, 5 << std::min(attempt, 6));
    std::uniform_int_distribution<int> d(1, cap_ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(d(rng)));
    auto now = std::chrono::steady_clock::now();
    if (now - last_log > std::chrono::seconds(10)) {
      last_log = now;
      spdlog::warn("database {} busy for {}s, still retrying", path_,
                   std::chrono::duration_cast<std::chrono::seconds>(now - started).count());
    }
  }
}

}  // namespace framemill
