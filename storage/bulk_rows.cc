#include "storage/bulk_rows.h"

#include <algorithm>
#include <charconv>
#include <numeric>

#include "storage/pg_db.h"
#include "storage/sql_store_internal.h"
#include "storage/sqlite_db.h"

namespace framemill {
namespace {

void AppendEscaped(std::string_view v, std::string* out) {
  for (char c : v) {
    switch (c) {
      case '\\': *out += "\\\\"; break;
      case '\t': *out += "\\t"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      default: *out += c;
    }
  }
}

Status CheckCount(int64_t written, size_t want, std::string_view table) {
  if (written == static_cast<int64_t>(want)) return Status::OK();
  return Status::Internal("writing " + std::to_string(want) + " rows into " + std::string(table) +
                          " wrote " + std::to_string(written));
}

class CopyTextSink : public RowSink {
 public:
  explicit CopyTextSink(std::string* out) : out_(out) {}
  void EndRow() {
    *out_ += '\n';
    first_ = true;
  }

 private:
  void Separate() {
    if (!first_) *out_ += '\t';
    first_ = false;
  }
  void PutInt(int64_t v) override {
    Separate();
    char buf[24];
    out_->append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  }
  void PutText(std::string_view v) override {
    Separate();
    AppendEscaped(v, out_);
  }
  void PutNull() override {
    Separate();
    *out_ += "\\N";
  }
  std::string* out_;
  bool first_ = true;
};

class BindSink : public RowSink {
 public:
  explicit BindSink(Stmt* stmt) : stmt_(stmt) {}
  int bound() const { return at_; }

 private:
  void PutInt(int64_t v) override { stmt_->Bind(++at_, v); }
  void PutText(std::string_view v) override { stmt_->Bind(++at_, v); }
  void PutNull() override { stmt_->BindNull(++at_); }
  Stmt* stmt_;
  int at_ = 0;
};

size_t CountColumns(std::string_view columns) {
  return 1 + static_cast<size_t>(std::count(columns.begin(), columns.end(), ','));
}

std::vector<int64_t> Consecutive(int64_t first, size_t n) {
  std::vector<int64_t> ids(n);
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

}  // namespace

void AppendCopyText(const RowFn& row, size_t first, size_t count, std::string* out) {
  CopyTextSink sink(out);
  for (size_t r = first; r < first + count; ++r) {
    row(r, sink);
    sink.EndRow();
  }
}

Status WriteRows(PgDb& db, std::string_view table, std::string_view columns, size_t rows,
                 const RowFn& row) {
  if (rows == 0) return Status::OK();
  const std::string copy = "COPY " + std::string(table) + " (" + std::string(columns) + ") FROM STDIN";
  // Made and sent 8,192 rows at a time, so the server works on the first while the rest are
  // made.
  size_t next = 0;
  FM_RETURN_IF_ERROR(db.CopyIn(copy, [&](std::string* piece) {
    const size_t count = std::min<size_t>(8192, rows - next);
    AppendCopyText(row, next, count, piece);
    next += count;
    return next < rows;
  }));
  return CheckCount(db.Changes(), rows, table);
}

Status WriteRows(SqliteDb& db, std::string_view table, std::string_view columns, size_t rows,
                 const RowFn& row) {
  const size_t width = CountColumns(columns);
  return sql::ForEachChunk(rows, [&](size_t first, size_t count) -> Status {
    auto ins = db.Prepare("INSERT INTO " + std::string(table) + " (" + std::string(columns) +
                          ") VALUES " + sql::ValueRows(count, width));
    if (!ins.ok()) return ins.status();
    BindSink sink(&*ins);
    for (size_t r = first; r < first + count; ++r) row(r, sink);
    if (sink.bound() != static_cast<int>(count * width))
      return Status::Internal("rows for " + std::string(table) + " gave " + std::to_string(sink.bound()) +
                              " values for " + std::to_string(count * width));
    FM_RETURN_IF_ERROR(ins->Run());
    return CheckCount(db.Changes(), count, table);
  });
}

Result<std::vector<int64_t>> ReserveIds(PgDb& db, std::string_view table, size_t n) {
  if (n == 0) return std::vector<int64_t>{};
  // nextval of the sequence spelled as a literal: given as a value, it is looked up again
  // for every row (2.5 us a row against 0.4).
  auto name = db.Prepare("SELECT pg_get_serial_sequence(?, 'id')");
  if (!name.ok()) return name.status();
  name->Bind(1, table);
  auto found = name->Step();
  if (!found.ok()) return found.status();
  if (!*found || name->IsNull(0)) return Status::Internal(std::string(table) + ".id has no sequence");
  const std::string take = "SELECT nextval('" + name->Text(0) + "') AS v FROM generate_series(1, ?)";
  // Usually one run of consecutive ids: then only its ends come back, not n rows.
  auto q = db.Prepare("SELECT min(v), max(v) FROM (" + take + ") t");
  if (!q.ok()) return q.status();
  q->Bind(1, static_cast<int64_t>(n));
  auto row = q->Step();
  if (!row.ok()) return row.status();
  if (!*row) return Status::Internal("reserving ids: no row");
  const int64_t lo = q->Int(0), hi = q->Int(1);
  if (hi - lo + 1 == static_cast<int64_t>(n)) return Consecutive(lo, n);
  // Another session took ids meanwhile: those taken are spread out, and given up.
  std::vector<int64_t> ids;
  ids.reserve(n);
  auto all = db.Prepare(take);
  if (!all.ok()) return all.status();
  all->Bind(1, static_cast<int64_t>(n));
  for (;;) {
    auto more = all->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    ids.push_back(all->Int(0));
  }
  if (ids.size() != n) return Status::Internal("reserved " + std::to_string(ids.size()) + " ids of " + std::to_string(n));
  std::sort(ids.begin(), ids.end());
  return ids;
}

Result<std::vector<int64_t>> ReserveIds(SqliteDb& db, std::string_view table, size_t n) {
  if (n == 0) return std::vector<int64_t>{};
  auto q = db.Prepare("SELECT coalesce(max(id), 0) FROM " + std::string(table));
  if (!q.ok()) return q.status();
  auto row = q->Step();
  if (!row.ok()) return row.status();
  return Consecutive((*row ? q->Int(0) : 0) + 1, n);
}

}  // namespace framemill
