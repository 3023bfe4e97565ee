// One libpq connection to PostgreSQL with the same shape as SqliteDb (storage/sqlite_db.h),
// so the job store's logic is written once (storage/sql_job_store.h): statements written
// with SQLite's `?`/`?N` placeholders, prepared once per connection and cached by text,
// typed binding, and transactions that are retried whole on a serialization failure, a
// deadlock or a lost connection (reconnecting with backoff: a server restart costs a
// retry, not a job). Thread-safety: one PgDb per thread; not safe to share.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "storage/job_store.h"  // RedactedUri, IsPostgresUri

struct pg_conn;
struct pg_result;

namespace framemill {

class PgDb;

// A statement's parameters and, once stepped, its result. Binding is 1-based; binding
// an index the statement does not use is ignored (as SQLite's is an error we never check).
class PgStmt {
 public:
  PgStmt(PgDb* db, std::string name, int params);
  PgStmt(PgStmt&& o) noexcept;
  PgStmt(const PgStmt&) = delete;
  PgStmt& operator=(const PgStmt&) = delete;
  ~PgStmt();

  PgStmt& Bind(int i, int64_t v) { return Set(i, std::to_string(v)); }
  PgStmt& Bind(int i, int v) { return Bind(i, static_cast<int64_t>(v)); }
  PgStmt& Bind(int i, double v);
  PgStmt& Bind(int i, std::string_view v) { return Set(i, std::string(v)); }
  PgStmt& Bind(int i, const char* v) { return Bind(i, std::string_view(v)); }
  PgStmt& BindNull(int i);

  // Runs the statement on the first call; true while a row is available.
  Result<bool> Step();
  Status Run();

  int64_t Int(int col) const;
  double Double(int col) const;
  std::string Text(int col) const;
  bool IsNull(int col) const;

 private:
  PgStmt& Set(int i, std::string v);
  PgDb* db_;
  std::string name_;
  std::vector<std::string> values_;
  std::vector<char> null_;
  pg_result* res_ = nullptr;
  int row_ = -1, rows_ = 0;
};

struct PgOptions {
  // How long a lost server is waited for (reconnecting with backoff) before a
  // transaction gives up with IOError.
  int reconnect_for_ms = 60'000;
  int connect_timeout_s = 5;
  int connect_wait_ms = 0;  // Open retries (with backoff) for this long
};

class PgDb {
 public:
  using Stmt = PgStmt;
  // kAutocommit: no BEGIN/COMMIT (each statement is its own transaction, committed without
  // waiting for the WAL flush), still retried and reconnected as a whole.
  enum class TxnKind { kRead, kWrite, kAutocommit };

  // Connects to `uri` (a libpq connection URI). A server that cannot be reached is an
  // IOError naming the URI without its password.
  static Result<std::unique_ptr<PgDb>> Open(const std::string& uri, const PgOptions& options = {});
  ~PgDb();

  // One or more statements as a simple query, no parameters.
  Status Exec(std::string_view sql);
  // `COPY table (columns) FROM STDIN` with the data in COPY's text format, piece by piece:
  // `next` fills a piece (storage/bulk_rows.h writes them) and returns false after the last.
  // Changes() is then the number of rows copied.
  Status CopyIn(std::string_view copy_sql, const std::function<bool(std::string* piece)>& next);
  Result<PgStmt> Prepare(std::string_view sql);
  // BEGIN (READ COMMITTED for writes, REPEATABLE READ READ ONLY for reads) .. COMMIT.
  // Serialization failures and deadlocks restart the whole transaction after a jittered
  // backoff; a lost connection is re-established first. Nested calls join the outer one.
  Status Transaction(TxnKind kind, const std::function<Status()>& fn);
  // Blocks other transactions taking the same key until this one ends.
  Status LockExclusive(int64_t key);
  // Subscribes this connection to `channel` (again after every reconnect).
  Status Listen(const std::string& channel);
  // Waits up to `ms` for a notification on the channels listened to; true when one came.
  // A lost connection is not an error here: the next transaction reconnects.
  Result<bool> WaitNotification(int64_t ms);
  // The server's clock (ms since the epoch) when the current transaction began.
  int64_t TxnNowMs() const { return txn_now_ms_; }

  int64_t Changes() const { return changes_; }
  const std::string& path() const { return display_; }
  pg_conn* raw() { return conn_; }

  // The statement's text with `?` and `?N` placeholders as `$N` (outside quotes), the
  // number of parameters it takes, and which of them the text uses.
  static std::string Rewrite(std::string_view sql, int* params, std::vector<bool>* used);
  // Maps a failed result (or a dead connection) to a Status by its SQLSTATE: serialization
  // failure and deadlock to Busy, a broken connection to IOError, constraint violations
  // to InvalidArgument.
  Status FromResult(pg_result* res, std::string_view what) const;

 private:
  friend class PgStmt;
  PgDb(pg_conn* conn, std::string uri, std::string display, PgOptions options)
      : conn_(conn), uri_(std::move(uri)), display_(std::move(display)), options_(options) {}
  Status Reconnect();
  // Per-connection settings (again after a reconnect).
  Status SetUpSession();
  Status Begin(TxnKind kind);
  bool Broken() const;

  struct Prepared {
    std::string name;
    int params = 0;
  };
  pg_conn* conn_;
  std::string uri_, display_;
  PgOptions options_;
  std::unordered_map<std::string, Prepared> cache_;  // by the caller's SQL text
  int next_name_ = 0;
  bool in_txn_ = false;
  mutable bool lost_ = false;  // a result said the connection is gone (FromResult)
  int64_t changes_ = 0;
  int64_t txn_now_ms_ = 0;
  std::string synchronous_commit_ = "on";  // the server's setting, for durable transactions
  std::string listening_;  // the channel, once Listen was called
};

}  // namespace framemill
