#include "storage/migrations.h"

#include <spdlog/spdlog.h>

#include "base/clock.h"
#include "storage/pg_db.h"
#include "storage/sqlite_db.h"

namespace framemill {

namespace {
// Held (PostgreSQL) while migrating, so that two processes starting on an empty database
// do not both create schema_version.
constexpr int64_t kMigrationLock = 0x666d6d6967;  // "fmmig"
}  // namespace

template <class Db>
Result<int> SchemaVersion(Db& db) {
  FM_RETURN_IF_ERROR(db.Exec(
      "CREATE TABLE IF NOT EXISTS schema_version ("
      " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)"));
  auto st = db.Prepare("SELECT coalesce(max(version), 0) FROM schema_version");
  if (!st.ok()) return st.status();
  auto row = st->Step();
  if (!row.ok()) return row.status();
  return static_cast<int>(st->Int(0));
}

template <class Db>
Status Migrate(Db& db, const std::vector<Migration>& migrations) {
  int current = 0;
  FM_RETURN_IF_ERROR(db.Transaction(Db::TxnKind::kWrite, [&]() -> Status {
    FM_RETURN_IF_ERROR(db.LockExclusive(kMigrationLock));
    auto v = SchemaVersion(db);
    if (!v.ok()) return v.status();
    current = *v;
    return Status::OK();
  }));
  int newest = migrations.empty() ? 0 : migrations.back().version;
  if (current > newest) {
    return Status::InvalidArgument(
        "database " + db.path() + " has schema version " + std::to_string(current) +
        ", newer than this framemill understands (" + std::to_string(newest) +
        "); use a newer framemill binary");
  }
  for (const Migration& m : migrations) {
    if (m.version <= current) continue;
    // Each migration in its own transaction; the version is re-read inside it so two
    // processes migrating at once apply each step exactly once.
    Status s = db.Transaction(Db::TxnKind::kWrite, [&]() -> Status {
      FM_RETURN_IF_ERROR(db.LockExclusive(kMigrationLock));
      auto v = SchemaVersion(db);
      if (!v.ok()) return v.status();
      if (m.version <= *v) return Status::OK();
      Status e = db.Exec(m.sql);
      if (!e.ok()) return Status::Internal("migration " + m.name + " failed: " + e.message());
      auto ins = db.Prepare(
          "INSERT INTO schema_version(version, name, applied_at) VALUES (?,?,?)");
      if (!ins.ok()) return ins.status();
      FM_RETURN_IF_ERROR(
          ins->Bind(1, m.version).Bind(2, m.name).Bind(3, SystemClock()->NowMs()).Run());
      spdlog::debug("applied migration {}", m.name);
      return Status::OK();
    });
    FM_RETURN_IF_ERROR(s);
  }
  return Status::OK();
}

template Result<int> SchemaVersion<SqliteDb>(SqliteDb&);
template Result<int> SchemaVersion<PgDb>(PgDb&);
template Status Migrate<SqliteDb>(SqliteDb&, const std::vector<Migration>&);
template Status Migrate<PgDb>(PgDb&, const std::vector<Migration>&);

}  // namespace framemill
