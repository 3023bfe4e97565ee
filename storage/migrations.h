// Numbered schema migrations, embedded from migrations/{sqlite,postgres}/*.sql at build
// time: one list per SQL dialect, numbered in step (the same version adds the same
// tables and columns in both). Applied in order, each in its own transaction, recorded
// in schema_version.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace framemill {

struct Migration {
  int version;
  std::string name;
  std::string sql;
};

enum class SqlDialect { kSqlite, kPostgres };

// The migrations this binary was built with for `dialect`, ascending by version.
const std::vector<Migration>& EmbeddedMigrations(SqlDialect dialect = SqlDialect::kSqlite);

// Brings `db` (SqliteDb or PgDb) up to the newest of `migrations`. Refuses
// (InvalidArgument) a database whose recorded version is newer than any migration known
// here: an older binary must not write to a schema it does not understand. Processes
// migrating at once apply each step exactly once.
template <class Db>
Status Migrate(Db& db, const std::vector<Migration>& migrations);

// The highest applied version, 0 for an empty database.
template <class Db>
Result<int> SchemaVersion(Db& db);

}  // namespace framemill
