#include "storage/pg_db.h"

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <poll.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

namespace framemill {

namespace {
void IgnoreNotice(void*, const char*) {}  // "relation already exists, skipping" and such

std::string ConnectionError(pg_conn* conn) {
  std::string why = conn ? PQerrorMessage(conn) : "out of memory";
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  return why;
}

// The rows a command's result says it touched (INSERT, UPDATE, DELETE, COPY, ...); 0 for others.
int64_t RowsTouched(pg_result* res) {
  const char* n = PQcmdTuples(res);
  return (n != nullptr && *n) ? std::strtoll(n, nullptr, 10) : 0;
}
}  // namespace

// ------------------------------------------------------------------ PgStmt

PgStmt::PgStmt(PgDb* db, std::string name, int params)
    : db_(db), name_(std::move(name)), values_(params), null_(params, 1) {}

PgStmt::PgStmt(PgStmt&& o) noexcept
    : db_(o.db_), name_(std::move(o.name_)), values_(std::move(o.values_)),
      null_(std::move(o.null_)), res_(o.res_), row_(o.row_), rows_(o.rows_) {
  o.res_ = nullptr;
}

PgStmt::~PgStmt() {
  if (res_ != nullptr) PQclear(res_);
}

PgStmt& PgStmt::Set(int i, std::string v) {
  if (i >= 1 && i <= static_cast<int>(values_.size())) {
    values_[i - 1] = std::move(v);
    null_[i - 1] = 0;
  }
  return *this;
}

PgStmt& PgStmt::Bind(int i, double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return Set(i, std::string(buf, r.ptr));
}

PgStmt& PgStmt::BindNull(int i) {
  if (i >= 1 && i <= static_cast<int>(null_.size())) null_[i - 1] = 1;
  return *this;
}

Result<bool> PgStmt::Step() {
  if (res_ == nullptr) {
    std::vector<const char*> v(values_.size());
    std::vector<int> len(values_.size());
    for (size_t i = 0; i < values_.size(); ++i) {
      v[i] = null_[i] ? nullptr : values_[i].c_str();
      len[i] = static_cast<int>(values_[i].size());
    }
    res_ = PQexecPrepared(db_->conn_, name_.c_str(), static_cast<int>(v.size()), v.data(),
                          len.data(), nullptr, 0);
    const ExecStatusType st = res_ ? PQresultStatus(res_) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return db_->FromResult(res_, name_);
    rows_ = st == PGRES_TUPLES_OK ? PQntuples(res_) : 0;
    db_->changes_ = RowsTouched(res_);
  }
  return ++row_ < rows_;
}

Status PgStmt::Run() {
  auto r = Step();
  return r.ok() ? Status::OK() : r.status();
}

int64_t PgStmt::Int(int col) const {
  if (PQgetisnull(res_, row_, col)) return 0;
  return std::strtoll(PQgetvalue(res_, row_, col), nullptr, 10);
}

double PgStmt::Double(int col) const {
  if (PQgetisnull(res_, row_, col)) return 0;
  return std::strtod(PQgetvalue(res_, row_, col), nullptr);
}

std::string PgStmt::Text(int col) const {
  return std::string(PQgetvalue(res_, row_, col),
                     static_cast<size_t>(PQgetlength(res_, row_, col)));
}

bool PgStmt::IsNull(int col) const { return PQgetisnull(res_, row_, col) != 0; }

// ------------------------------------------------------------------ PgDb

// One attempt is the connection and the session's settings: a server that restarts between
// the two (a worker starting while PostgreSQL restarts) costs another attempt, not the worker.
Result<std::unique_ptr<PgDb>> PgDb::Open(const std::string& uri, const PgOptions& options) {
  const std::string timeout = std::to_string(options.connect_timeout_s);
  const char* keys[] = {"dbname", "connect_timeout", "application_name", nullptr};
  const char* vals[] = {uri.c_str(), timeout.c_str(), "framemill", nullptr};
  const std::string display = RedactedUri(uri);
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(options.connect_wait_ms);
  for (int attempt = 0;; ++attempt) {
    pg_conn* conn = PQconnectdbParams(keys, vals, /*expand_dbname=*/1);
    Status failed;
    if (conn != nullptr && PQstatus(conn) == CONNECTION_OK) {
      PQsetNoticeProcessor(conn, IgnoreNotice, nullptr);
      std::unique_ptr<PgDb> db(new PgDb(conn, uri, display, options));
      failed = db->SetUpSession();
      if (failed.ok()) return db;
      if (!db->Broken() && !db->lost_) return failed;  // the server refused a setting
    } else {
      failed = Status::IOError("cannot connect to PostgreSQL at " + display + ": " +
                               ConnectionError(conn));
      if (conn) PQfinish(conn);
    }
    if (std::chrono::steady_clock::now() >= give_up) return failed;
    if (attempt == 0) spdlog::warn("cannot connect to PostgreSQL at {} yet; retrying", display);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1000, 50 << std::min(attempt, 5))));
  }
}

PgDb::~PgDb() { PQfinish(conn_); }

bool PgDb::Broken() const { return PQstatus(conn_) != CONNECTION_OK; }

std::string PgDb::Rewrite(std::string_view sql, int* params, std::vector<bool>* used) {
  std::string out;
  out.reserve(sql.size() + 16);
  int highest = 0;
  used->clear();
  char quote = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (quote) {
      out += c;
      if (c == quote) quote = 0;  // a doubled quote reopens on the next character
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      out += c;
      continue;
    }
    if (c != '?') {
      out += c;
      continue;
    }
    size_t j = i + 1;
    int n = 0;
    while (j < sql.size() && sql[j] >= '0' && sql[j] <= '9') n = n * 10 + (sql[j++] - '0');
    if (j == i + 1) n = highest + 1;  // a bare `?` is one past the highest so far, as in SQLite
    highest = std::max(highest, n);
    if (static_cast<int>(used->size()) < n) used->resize(n, false);
    (*used)[n - 1] = true;
    out += '$' + std::to_string(n);
    i = j - 1;
  }
  *params = highest;
  return out;
}

Status PgDb::FromResult(pg_result* res, std::string_view what) const {
  std::string msg = res != nullptr ? PQresultErrorMessage(res) : "";
  if (msg.empty()) msg = PQerrorMessage(conn_);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  if (!what.empty()) msg += " [" + std::string(what.substr(0, 120)) + "]";
  const char* code = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  const std::string state = code ? code : "";
  if (Broken() || state.rfind("08", 0) == 0 || state.rfind("57P", 0) == 0) {
    lost_ = true;
    return Status::IOError("PostgreSQL connection lost (" + display_ + "): " + msg);
  }
  if (state == "40001" || state == "40P01") return Status::Busy(msg);
  if (state.rfind("23", 0) == 0 || state.rfind("22", 0) == 0) return Status::InvalidArgument(msg);
  if (state.rfind("53", 0) == 0) return Status::IOError(msg);  // disk full, out of memory
  return Status::Internal(msg);
}

Status PgDb::Exec(std::string_view sql) {
  pg_result* res = PQexec(conn_, std::string(sql).c_str());
  const ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  Status s = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? Status::OK() : FromResult(res, sql);
  if (s.ok()) changes_ = RowsTouched(res);
  PQclear(res);
  return s;
}

Status PgDb::CopyIn(std::string_view copy_sql,
                    const std::function<bool(std::string* piece)>& next) {
  pg_result* res = PQexec(conn_, std::string(copy_sql).c_str());
  if (res == nullptr || PQresultStatus(res) != PGRES_COPY_IN) {
    Status s = FromResult(res, copy_sql);
    PQclear(res);
    return s;
  }
  PQclear(res);
  std::string piece;
  bool sent = true;
  for (bool more = true; more && sent;) {
    piece.clear();
    more = next(&piece);
    sent = piece.empty() || PQputCopyData(conn_, piece.data(), static_cast<int>(piece.size())) == 1;
  }
  // A connection that cannot take the data or its end stays in COPY state, where
  // PQgetResult would answer COPY_IN for ever: it is lost, and the transaction reconnects.
  if (!sent || PQputCopyEnd(conn_, nullptr) != 1) {
    lost_ = true;
    return Status::IOError("PostgreSQL connection lost (" + display_ + ") during " +
                           std::string(copy_sql.substr(0, 60)) + ": " + ConnectionError(conn_));
  }
  Status s;
  while ((res = PQgetResult(conn_)) != nullptr) {
    const ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_COPY_IN) {  // not expected after the end was sent; never wait on it
      PQclear(res);
      lost_ = true;
      return Status::IOError("PostgreSQL connection (" + display_ + ") still in COPY after its end");
    }
    if (s.ok() && st != PGRES_COMMAND_OK) {
      s = FromResult(res, copy_sql);
    } else if (s.ok()) {
      changes_ = RowsTouched(res);
    }
    PQclear(res);
  }
  return s;
}

Result<PgStmt> PgDb::Prepare(std::string_view sql) {
  std::string key(sql);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    Prepared p;
    std::vector<bool> used;
    const std::string text = Rewrite(sql, &p.params, &used);
    // A number the text skips (gc's statements share one binding of ?1..?3) has no
    // context to infer its type from: call it int8, as the server cannot.
    constexpr unsigned kInt8Oid = 20;
    std::vector<unsigned> types(used.size());
    for (size_t i = 0; i < used.size(); ++i) types[i] = used[i] ? 0 : kInt8Oid;
    p.name = "fm" + std::to_string(next_name_++);
    pg_result* res = PQprepare(conn_, p.name.c_str(), text.c_str(), static_cast<int>(types.size()),
                               types.data());
    Status s = res && PQresultStatus(res) == PGRES_COMMAND_OK ? Status::OK() : FromResult(res, sql);
    PQclear(res);
    FM_RETURN_IF_ERROR(s);
    it = cache_.emplace(std::move(key), std::move(p)).first;
  }
  return PgStmt(this, it->second.name, it->second.params);
}

Status PgDb::Reconnect() {
  PQreset(conn_);
  cache_.clear();  // the server forgot our prepared statements with the session
  if (Broken())
    return Status::IOError("cannot reconnect to PostgreSQL at " + display_ + ": " +
                           ConnectionError(conn_));
  PQsetNoticeProcessor(conn_, IgnoreNotice, nullptr);
  FM_RETURN_IF_ERROR(SetUpSession());
  return listening_.empty() ? Status::OK() : Exec("LISTEN " + listening_);
}

Status PgDb::SetUpSession() {
  pg_result* res = PQexec(conn_, "SELECT current_setting('synchronous_commit')");
  const bool read = res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1;
  Status s = read ? Status::OK() : FromResult(res, "current_setting('synchronous_commit')");
  if (read) synchronous_commit_ = PQgetvalue(res, 0, 0);
  PQclear(res);
  FM_RETURN_IF_ERROR(s);
  // Short statements: a lock wait longer than this is a bug, not a busy queue.
  return Exec("SET lock_timeout = '60s'; SET idle_in_transaction_session_timeout = '10min';"
              " SET synchronous_commit = off");
}

Status PgDb::Begin(TxnKind kind) {
  if (kind == TxnKind::kAutocommit) return Status::OK();
  // Writes are as durable as the server is configured to make them (the session's own
  // default is off, for autocommitted claims and heartbeats); one round trip with the time.
  const std::string sql =
      kind == TxnKind::kWrite
          ? "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL synchronous_commit = " +
                synchronous_commit_ + "; SELECT (extract(epoch from now()) * 1000)::int8"
          : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;"
            " SELECT (extract(epoch from now()) * 1000)::int8";
  pg_result* res = PQexec(conn_, sql.c_str());
  Status s = res && PQresultStatus(res) == PGRES_TUPLES_OK ? Status::OK() : FromResult(res, "BEGIN");
  if (s.ok()) txn_now_ms_ = std::strtoll(PQgetvalue(res, 0, 0), nullptr, 10);
  PQclear(res);
  return s;
}

Status PgDb::Listen(const std::string& channel) {
  FM_RETURN_IF_ERROR(Exec("LISTEN " + channel));
  listening_ = channel;
  return Status::OK();
}

Result<bool> PgDb::WaitNotification(int64_t ms) {
  auto take = [&] {
    bool any = false;
    while (PGnotify* n = PQnotifies(conn_)) {
      PQfreemem(n);
      any = true;
    }
    return any;
  };
  if (Broken() || PQconsumeInput(conn_) == 0) return false;
  if (take()) return true;
  pollfd p{PQsocket(conn_), POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(ms)) <= 0) return false;
  if (PQconsumeInput(conn_) == 0) return false;
  return take();
}

Status PgDb::LockExclusive(int64_t key) {
  return Exec("SELECT pg_advisory_xact_lock(" + std::to_string(key) + ")");
}

Status PgDb::Transaction(TxnKind kind, const std::function<Status()>& fn) {
  if (in_txn_) return fn();
  thread_local std::mt19937_64 rng(std::random_device{}());
  using SteadyClock = std::chrono::steady_clock;
  SteadyClock::time_point lost_since{};
  lost_ = false;
  for (int attempt = 0;; ++attempt) {
    Status s = Broken() || lost_ ? Reconnect() : Status::OK();
    lost_ = false;
    if (s.ok()) s = Begin(kind);
    if (s.ok()) {
      lost_since = {};
      in_txn_ = true;
      s = fn();
      in_txn_ = false;
      if (kind == TxnKind::kAutocommit) {
        if (s.ok()) return s;
      } else {
        if (s.ok()) s = Exec("COMMIT");
        if (s.ok()) return s;
        if (!Broken() && !lost_) Exec("ROLLBACK");
      }
    }
    const bool lost = Broken() || lost_;
    if (!s.IsBusy() && !lost) return s;
    const auto now = SteadyClock::now();
    if (lost) {
      if (lost_since == SteadyClock::time_point{}) {
        lost_since = now;
        spdlog::warn("{}; reconnecting", s.message());
      }
      if (now - lost_since > std::chrono::milliseconds(options_.reconnect_for_ms))
        return Status::IOError("PostgreSQL at " + display_ + " unreachable for " +
                               std::to_string(options_.reconnect_for_ms / 1000) +
                               " s: " + s.message());
    }
    const int cap_ms = lost ? std::min(2000, 50 << std::min(attempt, 6))
                            : std::min(200, 5 << std::min(attempt, 6));
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(1, cap_ms)(rng)));
  }
}

}  // namespace framemill
