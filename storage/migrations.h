// Numbered schema migrations, embedded from migrations/*.sql at build time.
// Applied in order, each in its own transaction, recorded in schema_version.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace framemill {

class SqliteDb;

struct Migration {
  int version;
  std::string name;
  std::string sql;
};

// The migrations this binary was built with, ascending by version.
const std::vector<Migration>& EmbeddedMigrations();

// Brings `db` up to the newest of `migrations`. Refuses (InvalidArgument) a database
// whose recorded version is newer than any migration known here: an older binary
// must not write to a schema it does not understand.
Status Migrate(SqliteDb& db, const std::vector<Migration>& migrations);

// The highest applied version, 0 for an empty database.
Result<int> SchemaVersion(SqliteDb& db);

}  // namespace framemill
