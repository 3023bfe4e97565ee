// Many new rows into one table in one go, the fastest way each engine takes them:
// PostgreSQL's COPY (text format), SQLite's multi-row INSERTs of up to 1,024 rows. The
// caller gives every row its id, reserved beforehand (ReserveIds), so nothing is read back:
// the server's part of `enqueue` of 100k URLs with two stages into PostgreSQL went from 4.3 s
// of multi-row INSERTs with RETURNING to 2.3 s of COPY (with migration 0010's foreign keys
// gone; bench/README.md, "Enqueue through the command line"). Call both inside the write
// transaction that uses the ids: on SQLite a reservation is max(id) + 1.. under its lock.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace framemill {

class PgDb;
class SqliteDb;

// Where a row's values go, in column order: COPY's text on PostgreSQL, a statement's
// bindings on SQLite. Nothing is stored in between (storing the 1.1M values of 100k items
// first was half the client's time, most of it in page faults).
class RowSink {
 public:
  virtual ~RowSink() = default;
  RowSink& Int(int64_t v) { PutInt(v); return *this; }
  RowSink& Text(std::string_view v) { PutText(v); return *this; }
  RowSink& Null() { PutNull(); return *this; }

 private:
  virtual void PutInt(int64_t v) = 0;
  virtual void PutText(std::string_view v) = 0;
  virtual void PutNull() = 0;
};
// Gives row `row`'s values, all of them, to the sink.
using RowFn = std::function<void(size_t row, RowSink& sink)>;

// Writes rows 0..rows-1 into `table` (`columns`: "a, b, c"; `row` gives that many values).
// A row that breaks a constraint fails the call, and the caller's transaction rolls back.
Status WriteRows(PgDb& db, std::string_view table, std::string_view columns, size_t rows,
                 const RowFn& row);
Status WriteRows(SqliteDb& db, std::string_view table, std::string_view columns, size_t rows,
                 const RowFn& row);

// `n` ids for new rows of `table`, ascending, that no other row has or will be given.
Result<std::vector<int64_t>> ReserveIds(PgDb& db, std::string_view table, size_t n);
Result<std::vector<int64_t>> ReserveIds(SqliteDb& db, std::string_view table, size_t n);

// COPY's text format of rows [first, first + count): tab-separated, \N for NULL, backslash
// escapes, a newline after each row; appended to `out`.
void AppendCopyText(const RowFn& row, size_t first, size_t count, std::string* out);

}  // namespace framemill
