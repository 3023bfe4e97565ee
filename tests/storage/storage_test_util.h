// Helpers shared by the storage tests: a temporary directory per test, status
// assertions, and a side connection for reading the database as SQL sees it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "base/status.h"
#include "storage/pg_db.h"
#include "storage/sqlite_db.h"

namespace framemill::testing_util {

inline const Status& StatusOf(const Status& s) { return s; }
template <typename T>
const Status& StatusOf(const Result<T>& r) {
  return r.status();
}

}  // namespace framemill::testing_util

// ASSERT_TRUE or EXPECT_TRUE (`check`) that a Status or Result is OK, printing it where not.
#define FM_CHECK_OK_(check, expr)                                           \
  do {                                                                      \
    const auto& _fm_r = (expr);                                             \
    check(::framemill::testing_util::StatusOf(_fm_r).ok())                  \
        << #expr << ": " << ::framemill::testing_util::StatusOf(_fm_r).ToString(); \
  } while (0)
#define FM_ASSERT_OK(expr) FM_CHECK_OK_(ASSERT_TRUE, expr)
#define FM_EXPECT_OK(expr) FM_CHECK_OK_(EXPECT_TRUE, expr)

namespace framemill::testing_util {

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    std::string name = "fm-test-" + std::to_string(::getpid()) + "-" +
                       std::to_string((static_cast<uint64_t>(rd()) << 32) | rd());
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Unwraps a Result, recording a test failure (and returning T{}) when it is an error.
template <typename T>
T Must(Result<T> r, const char* what = "") {
  if (!r.ok()) {
    ADD_FAILURE() << what << ": " << r.status().ToString();
    return T{};
  }
  return std::move(r).value();
}

// A side connection used only to look at the database with plain SQL: a SQLite file, or
// a PostgreSQL URI.
class Inspector {
 public:
  void Open(const std::string& path) {
    if (IsPostgresUri(path)) {
      auto db = PgDb::Open(path);
      ASSERT_TRUE(db.ok()) << db.status().ToString();
      pg_ = std::move(db).value();
      return;
    }
    auto db = SqliteDb::Open(path);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
  }
  bool is_open() const { return db_ != nullptr || pg_ != nullptr; }
  SqliteDb& db() { return *db_; }

  // First column of the first row as an integer; -1 (and a failure) on no row.
  int64_t Int(const std::string& sql) {
    return pg_ ? IntOn(*pg_, sql) : IntOn(*db_, sql);
  }
  // First column of the first row as text; "<none>" when there is no row, "<null>" for NULL.
  std::string Text(const std::string& sql) {
    return pg_ ? TextOn(*pg_, sql) : TextOn(*db_, sql);
  }
  void Exec(const std::string& sql) {
    Status s = pg_ ? pg_->Exec(sql) : db_->Exec(sql);
    ASSERT_TRUE(s.ok()) << sql << ": " << s.ToString();
  }

 private:
  template <class Db>
  static int64_t IntOn(Db& db, const std::string& sql) {
    auto st = db.Prepare(sql);
    if (!st.ok()) {
      ADD_FAILURE() << sql << ": " << st.status().ToString();
      return -1;
    }
    auto row = st->Step();
    if (!row.ok() || !*row) {
      ADD_FAILURE() << sql << ": no row " << row.status().ToString();
      return -1;
    }
    return st->IsNull(0) ? -1 : st->Int(0);
  }
  template <class Db>
  static std::string TextOn(Db& db, const std::string& sql) {
    auto st = db.Prepare(sql);
    if (!st.ok()) {
      ADD_FAILURE() << sql << ": " << st.status().ToString();
      return "<error>";
    }
    auto row = st->Step();
    if (!row.ok() || !*row) return "<none>";
    return st->IsNull(0) ? "<null>" : st->Text(0);
  }

  std::unique_ptr<SqliteDb> db_;
  std::unique_ptr<PgDb> pg_;
};

}  // namespace framemill::testing_util
