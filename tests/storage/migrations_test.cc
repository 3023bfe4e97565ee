#include "storage/migrations.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "jobs/stage_graph.h"
#include "storage/job_store.h"
#include "storage/sqlite_db.h"
#include "tests/storage/storage_test_util.h"

namespace framemill {
namespace {

using testing_util::Inspector;
using testing_util::TempDir;

std::unique_ptr<SqliteDb> OpenDb(const std::string& path) {
  auto db = SqliteDb::Open(path);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? std::move(db).value() : nullptr;
}

// A database at `path` with every embedded migration applied; nullptr where that fails.
std::unique_ptr<SqliteDb> MigratedDb(const std::string& path) {
  auto db = OpenDb(path);
  if (db == nullptr) return nullptr;
  const Status s = Migrate(*db, EmbeddedMigrations());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return s.ok() ? std::move(db) : nullptr;
}

TEST(EmbeddedMigrations, AreNumberedConsecutivelyFromOne) {
  const auto& ms = EmbeddedMigrations();
  ASSERT_FALSE(ms.empty());
  for (size_t i = 0; i < ms.size(); ++i) {
    EXPECT_EQ(ms[i].version, static_cast<int>(i + 1)) << ms[i].name;
    EXPECT_FALSE(ms[i].sql.empty()) << ms[i].name;
  }
  EXPECT_EQ(ms.front().name, "0001_init");
}

TEST(Migrate, FreshDatabaseReachesTheNewestEmbeddedVersion) {
  TempDir dir;
  auto db = OpenDb(dir.File("fresh.db"));
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(testing_util::Must(SchemaVersion(*db)), 0);
  FM_ASSERT_OK(Migrate(*db, EmbeddedMigrations()));
  const int n = static_cast<int>(EmbeddedMigrations().size());
  EXPECT_EQ(testing_util::Must(SchemaVersion(*db)), n);
  EXPECT_EQ(testing_util::Must(SchemaVersion(*db)), EmbeddedMigrations().back().version);

  Inspector in;
  in.Open(dir.File("fresh.db"));
  EXPECT_EQ(in.Int("SELECT count(*) FROM schema_version"), n);
  // The schema exists: every table of 0001 is there.
  for (const char* t : {"items", "jobs", "job_deps", "job_errors", "results", "runs", "workers"}) {
    EXPECT_EQ(in.Int(std::string("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='") +
                     t + "'"),
              1)
        << t;
  }
}

TEST(Migrate, ReopeningAndMigratingAgainChangesNothing) {
  TempDir dir;
  const std::string path = dir.File("again.db");
  {
    auto db = MigratedDb(path);
    ASSERT_NE(db, nullptr);
    FM_ASSERT_OK(Migrate(*db, EmbeddedMigrations()));  // again, same connection
  }
  {
    auto db = OpenDb(path);  // new connection
    ASSERT_NE(db, nullptr);
    FM_ASSERT_OK(Migrate(*db, EmbeddedMigrations()));
    EXPECT_EQ(testing_util::Must(SchemaVersion(*db)),
              static_cast<int>(EmbeddedMigrations().size()));
  }
  // And through the store's own entry point, twice.
  StageGraph graph;
  ManualClock clock;
  for (int i = 0; i < 2; ++i) {
    auto store = OpenSqliteJobStore(path, &graph, &clock);
    FM_ASSERT_OK(store);
  }
  Inspector in;
  in.Open(path);
  EXPECT_EQ(in.Int("SELECT count(*) FROM schema_version"),
            static_cast<int64_t>(EmbeddedMigrations().size()));
}

TEST(Migrate, AppliesOnlyTheMigrationsNotYetRecordedInOrder) {
  TempDir dir;
  auto db = OpenDb(dir.File("steps.db"));
  ASSERT_NE(db, nullptr);
  std::vector<Migration> v1 = {{1, "0001_t", "CREATE TABLE t (a INTEGER);"}};
  FM_ASSERT_OK(Migrate(*db, v1));
  EXPECT_EQ(testing_util::Must(SchemaVersion(*db)), 1);
  std::vector<Migration> v2 = v1;
  v2.push_back({2, "0002_t_b", "ALTER TABLE t ADD COLUMN b INTEGER;"});
  // 0001 must not run a second time (CREATE TABLE t would fail if it did).
  FM_ASSERT_OK(Migrate(*db, v2));
  EXPECT_EQ(testing_util::Must(SchemaVersion(*db)), 2);
  FM_EXPECT_OK(db->Exec("INSERT INTO t (a, b) VALUES (1, 2)"));
}

TEST(Migrate, FailingMigrationRollsBackEntirelyAndNamesItself) {
  TempDir dir;
  auto db = OpenDb(dir.File("broken.db"));
  ASSERT_NE(db, nullptr);
  std::vector<Migration> bad = {
      {1, "0001_half", "CREATE TABLE t (a INTEGER); INSERT INTO no_such_table VALUES (1);"}};
  Status s = Migrate(*db, bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("0001_half"), std::string::npos) << s.ToString();
  EXPECT_EQ(testing_util::Must(SchemaVersion(*db)), 0);
  Inspector in;
  in.Open(dir.File("broken.db"));
  EXPECT_EQ(in.Int("SELECT count(*) FROM sqlite_master WHERE name = 't'"), 0)
      << "the half-applied migration's CREATE TABLE survived";
}

TEST(Migrate, DatabaseFromANewerBinaryIsRefusedAsInvalidArgument) {
  TempDir dir;
  const std::string path = dir.File("future.db");
  {
    auto db = MigratedDb(path);
    ASSERT_NE(db, nullptr);
    FM_ASSERT_OK(db->Exec(
        "INSERT INTO schema_version (version, name, applied_at) VALUES (999, '0999_future', 0)"));
  }
  {
    auto db = OpenDb(path);
    ASSERT_NE(db, nullptr);
    Status s = Migrate(*db, EmbeddedMigrations());
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find("newer"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("999"), std::string::npos) << s.ToString();
  }
  StageGraph graph;
  ManualClock clock;
  auto store = OpenSqliteJobStore(path, &graph, &clock);
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(store.status().IsInvalidArgument()) << store.status().ToString();
  EXPECT_NE(store.status().message().find("newer"), std::string::npos);

  Inspector in;
  in.Open(path);
  EXPECT_EQ(in.Int("SELECT max(version) FROM schema_version"), 999);
  EXPECT_EQ(in.Int("SELECT count(*) FROM schema_version"),
            static_cast<int64_t>(EmbeddedMigrations().size()) + 1);
}

TEST(Migrate, FileThatIsNotADatabaseFailsToOpenWithCorruption) {
  TempDir dir;
  const std::string path = dir.File("garbage.db");
  {
    std::ofstream f(path, std::ios::binary);
    std::mt19937 rng(42);
    for (int i = 0; i < 8192; ++i) f.put(static_cast<char>(rng() & 0xff));
  }
  auto db = SqliteDb::Open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_TRUE(db.status().IsCorruption()) << db.status().ToString();
  EXPECT_NE(db.status().message().find("not a database"), std::string::npos)
      << db.status().ToString();

  StageGraph graph;
  ManualClock clock;
  auto store = OpenSqliteJobStore(path, &graph, &clock);
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(store.status().IsCorruption()) << store.status().ToString();
  // The file is left as it was: nothing was written over the user's bytes.
  EXPECT_EQ(std::filesystem::file_size(path), 8192u);
}

TEST(Migrate, TextFileThatIsNotADatabaseFailsToOpen) {
  TempDir dir;
  const std::string path = dir.File("notes.txt");
  {
    std::ofstream f(path);
    for (int i = 0; i < 100; ++i) f << "this is a plain text file, line " << i << "\n";
  }
  auto db = SqliteDb::Open(path);
  ASSERT_FALSE(db.ok());
  EXPECT_TRUE(db.status().IsCorruption()) << db.status().ToString();
}

TEST(Migrate, ConcurrentFirstOpensMigrateExactlyOnce) {
  TempDir dir;
  const std::string path = dir.File("race.db");
  StageGraph graph;
  ManualClock clock;
  constexpr int kThreads = 8;
  std::vector<Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      auto store = OpenSqliteJobStore(path, &graph, &clock);
      results[i] = store.status();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_TRUE(results[i].ok()) << i << ": " << results[i].ToString();
  Inspector in;
  in.Open(path);
  EXPECT_EQ(in.Int("SELECT count(*) FROM schema_version"),
            static_cast<int64_t>(EmbeddedMigrations().size()));
}

}  // namespace
}  // namespace framemill
