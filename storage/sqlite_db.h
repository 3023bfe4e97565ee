// A thin owner of one sqlite3 connection: prepared-statement cache, typed binding,
// and write transactions that retry SQLITE_BUSY with jitter instead of failing.
// Thread-safety: one SqliteDb per thread (or per process); not safe to share.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/status.h"

namespace framemill {

// A cached prepared statement, reset and unbound when the handle goes out of scope.
class Stmt {
 public:
  explicit Stmt(sqlite3_stmt* s) : s_(s) {}
  Stmt(Stmt&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt();

  // Binding is 1-based, as in SQLite.
  Stmt& Bind(int i, int64_t v);
  Stmt& Bind(int i, int v) { return Bind(i, static_cast<int64_t>(v)); }
  Stmt& Bind(int i, double v);
  Stmt& Bind(int i, std::string_view v);
  Stmt& Bind(int i, const char* v) { return Bind(i, std::string_view(v)); }
  Stmt& BindNull(int i);

  // Advances; true when a row is available. Errors (busy included) come back as Status.
  Result<bool> Step();
  // Steps to completion, discarding rows.
  Status Run();

  int64_t Int(int col) const { return sqlite3_column_int64(s_, col); }
  double Double(int col) const { return sqlite3_column_double(s_, col); }
  std::string Text(int col) const;
  bool IsNull(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }

 private:
  sqlite3_stmt* s_;
};

struct SqliteOptions {
  // How long one lock wait may take inside SQLite before we retry the whole
  // transaction with jitter; short so a waiting writer notices a stop request.
  int busy_wait_ms = 2000;
  bool read_only = false;
};

class SqliteDb {
 public:
  using Stmt = framemill::Stmt;
  // Opens (creating if needed) and sets WAL, synchronous=NORMAL, foreign_keys.
  static Result<std::unique_ptr<SqliteDb>> Open(const std::string& path,
                                                const SqliteOptions& options = {});
  ~SqliteDb();

  Status Exec(std::string_view sql);
  // Cached by SQL text; the returned handle resets the statement when destroyed.
  Result<Stmt> Prepare(std::string_view sql);

  // kAutocommit: statements that are each atomic alone; here the same as kWrite.
  enum class TxnKind { kRead, kWrite, kAutocommit };
  // Runs fn inside BEGIN (read) or BEGIN IMMEDIATE (write) .. COMMIT. A busy
  // database restarts the whole transaction after a jittered backoff, for as long
  // as it takes (logging while it waits); any other error, or fn's, rolls back.
  Status Transaction(TxnKind kind, const std::function<Status()>& fn);
  // A write transaction already excludes every other writer (BEGIN IMMEDIATE).
  Status LockExclusive(int64_t /*key*/) { return Status::OK(); }

  int64_t LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
  int Changes() const { return sqlite3_changes(db_); }
  sqlite3* raw() { return db_; }
  const std::string& path() const { return path_; }

  // Maps an SQLite result code to a Status (busy/locked to Busy, corrupt to Corruption...).
  static Status FromSqlite(int rc, std::string_view what, sqlite3* db);

 private:
  SqliteDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
  bool in_txn_ = false;
  int busy_wait_ms_ = 2000;  // read by the busy handler
};

}  // namespace framemill
