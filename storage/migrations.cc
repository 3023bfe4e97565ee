#include "storage/migrations.h"

#include <spdlog/spdlog.h>

#include "base/clock.h"
#include "storage/sqlite_db.h"

namespace framemill {

Result<int> SchemaVersion(SqliteDb& db) {
  FM_RETURN_IF_ERROR(db.Exec(
      "CREATE TABLE IF NOT EXISTS schema_version ("
      " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"));
  auto st = db.Prepare("SELECT coalesce(max(version), 0) FROM schema_version");
  if (!st.ok()) return st.status();
  auto row = st->Step();
  if (!row.ok()) return row.status();
  return static_cast<int>(st->Int(0));
}

Status Migrate(SqliteDb& db, const std::vector<Migration>& migrations) {
  auto current = SchemaVersion(db);
  if (!current.ok()) return current.status();
  int newest = migrations.empty() ? 0 : migrations.back().version;
  if (*current > newest) {
    return Status::InvalidArgument(
        "database " + db.path() + " has schema version " + std::to_string(*current) +
        ", newer than this framemill understands (" + std::to_string(newest) +
        "); use a newer framemill binary");
  }
  for (const Migration& m : migrations) {
    // Each migration in its own transaction; the version is re-read inside it so two
    // processes migrating at once apply each step exactly once.
    Status s = db.Transaction(SqliteDb::TxnKind::kWrite, [&]() -> Status {
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

}  // namespace framemill
