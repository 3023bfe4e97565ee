// The libpq connection under the PostgreSQL job store, against a real server
// (tests/support/pg_server.h): placeholders, values that are not UTF-8, errors by
// SQLSTATE, a server restart in the middle of work, the server's clock; and the two
// dialects' schemas, which must carry the same tables and columns.
#include "storage/pg_db.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "base/clock.h"
#include "storage/bulk_rows.h"
#include "storage/migrations.h"
#include "storage/sqlite_db.h"
#include "tests/storage/storage_test_util.h"
#include "tests/support/pg_server.h"

namespace framemill {
namespace {

using testing::PgServer;
using testing_util::Must;
using testing_util::TempDir;

PgServer* Server() {
  std::string why;
  PgServer* s = PgServer::Shared(&why);
  EXPECT_NE(s, nullptr) << why;
  return s;
}


#define PREPARE(var, db, sql)                                        \
  auto var##_r = (db)->Prepare(sql);                                 \
  ASSERT_TRUE(var##_r.ok()) << var##_r.status().ToString();          \
  auto& var = *var##_r

std::unique_ptr<PgDb> Connect(const std::string& uri) {
  auto db = PgDb::Open(uri);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? std::move(db).value() : nullptr;
}

// A server of the test's own (the test restarts it) and a connection to a new database on
// it; db is null where either could not be had (the reason recorded).
struct OwnDatabase {
  std::unique_ptr<PgServer> pg;
  std::unique_ptr<PgDb> db;
};
OwnDatabase OnOwnServer() {
  std::string why;
  OwnDatabase out{PgServer::Private(&why), nullptr};
  EXPECT_NE(out.pg, nullptr) << why;
  if (out.pg != nullptr) out.db = Connect(out.pg->CreateDatabase());
  return out;
}

// A connection to a new empty database on the test's server; null (after a failure) without one.
std::unique_ptr<PgDb> ConnectNew() {
  PgServer* pg = Server();
  return pg != nullptr ? Connect(pg->CreateDatabase()) : nullptr;
}

TEST(PgDbTest, PlaceholdersAreNumberedOutsideQuotesAsSqliteNumbersThem) {
  int params = 0;
  std::vector<bool> used;
  EXPECT_EQ(PgDb::Rewrite("SELECT '?', ?, ?3, \"a?\", ?, 'it''s ?'", &params, &used),
            "SELECT '?', $1, $3, \"a?\", $4, 'it''s ?'");
  EXPECT_EQ(params, 4);
  EXPECT_EQ(used, (std::vector<bool>{true, false, true, true}));
  EXPECT_EQ(PgDb::Rewrite("UPDATE t SET a = ?1 WHERE b = ?2 OR c = ?1", &params, &used),
            "UPDATE t SET a = $1 WHERE b = $2 OR c = $1");
  EXPECT_EQ(params, 2);
}

TEST(PgDbTest, UrisAreToldApartFromFilesAndPasswordsNeverPrinted) {
  EXPECT_TRUE(IsPostgresUri("postgresql://u@h:5432/db"));
  EXPECT_TRUE(IsPostgresUri("postgres://h/db"));
  EXPECT_FALSE(IsPostgresUri("./postgresql.db"));
  EXPECT_FALSE(IsPostgresUri("/data/framemill.db"));
  EXPECT_EQ(RedactedUri("postgresql://u:s3cret@h:5432/db"), "postgresql://u:***@h:5432/db");
  EXPECT_EQ(RedactedUri("postgresql://h/db?password=s3cret&sslmode=require"),
            "postgresql://h/db?password=***&sslmode=require");
  auto db = PgDb::Open("postgresql://u:s3cret@127.0.0.1:1/db");
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), Status::Code::kIOError) << db.status().ToString();
  EXPECT_EQ(db.status().message().find("s3cret"), std::string::npos) << db.status().ToString();
  EXPECT_NE(db.status().message().find("127.0.0.1:1"), std::string::npos);
}

TEST(PgDbTest, ValuesRoundTripIncludingBytesThatAreNotUtf8) {
  auto db = ConnectNew();
  ASSERT_NE(db, nullptr);
  FM_ASSERT_OK(db->Exec("CREATE TABLE t (i bigint, d double precision, s text, n text)"));
  const std::string odd = std::string("caf\xe9 'quoted' \"x\" ?") + "\x01\xff";
  PREPARE(ins, db, "INSERT INTO t VALUES (?, ?, ?, ?) RETURNING i");
  ins.Bind(1, int64_t{9'007'199'254'740'993}).Bind(2, 0.1).Bind(3, odd).BindNull(4);
  ASSERT_TRUE(Must(ins.Step()));
  EXPECT_EQ(db->Changes(), 1);
  PREPARE(q, db, "SELECT i, d, s, n FROM t WHERE s = ?");
  q.Bind(1, odd);
  ASSERT_TRUE(Must(q.Step()));
  EXPECT_EQ(q.Int(0), 9'007'199'254'740'993);
  EXPECT_DOUBLE_EQ(q.Double(1), 0.1);
  EXPECT_EQ(q.Text(2), odd);
  EXPECT_TRUE(q.IsNull(3));
  EXPECT_FALSE(Must(q.Step()));
}

TEST(PgDbTest, ErrorsAreTypedBySqlstate) {
  auto db = ConnectNew();
  ASSERT_NE(db, nullptr);
  FM_ASSERT_OK(db->Exec("CREATE TABLE u (k int PRIMARY KEY)"));
  FM_ASSERT_OK(db->Exec("INSERT INTO u VALUES (1)"));
  EXPECT_TRUE(db->Exec("INSERT INTO u VALUES (1)").IsInvalidArgument());
  EXPECT_TRUE(db->Exec("DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '40001'; END $$").IsBusy());
  EXPECT_TRUE(db->Exec("DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '40P01'; END $$").IsBusy());
  EXPECT_FALSE(db->Exec("SELEC 1").ok());
  // A transaction that hits a serialization failure runs again, whole.
  int runs = 0;
  FM_ASSERT_OK(db->Transaction(PgDb::TxnKind::kWrite, [&]() -> Status {
    FM_RETURN_IF_ERROR(db->Exec("INSERT INTO u VALUES (2)"));
    if (++runs == 1) return db->Exec("DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '40001'; END $$");
    return Status::OK();
  }));
  EXPECT_EQ(runs, 2);
  PREPARE(n, db, "SELECT count(*) FROM u");
  ASSERT_TRUE(Must(n.Step()));
  EXPECT_EQ(n.Int(0), 2);
}

// WriteRows sends COPY text: separators and escapes inside values come back as they were,
// a row that breaks a key fails the call with the constraint's type and leaves the
// connection usable, and nothing of the failed COPY stays.
TEST(PgDbTest, CopiedRowsKeepEveryByteAndABadRowFailsTheCopyCleanly) {
  auto db = ConnectNew();
  ASSERT_NE(db, nullptr);
  FM_ASSERT_OK(db->Exec("CREATE TABLE t (i bigint PRIMARY KEY, s text, n text)"));
  const std::vector<std::string> texts = {"a\tb", "line\nbreak\r", "back\\slash", "\\N", "",
                                          std::string("caf\xe9 \x01\xff")};
  FM_ASSERT_OK(WriteRows(*db, "t", "i, s, n", texts.size(), [&](size_t k, RowSink& row) {
    row.Int(static_cast<int64_t>(k) - 3).Text(texts[k]);
    if (k % 2) row.Null(); else row.Text(texts[k]);
  }));
  EXPECT_EQ(db->Changes(), static_cast<int64_t>(texts.size()));
  PREPARE(q, db, "SELECT i, s, n FROM t ORDER BY i");
  for (size_t k = 0; k < texts.size(); ++k) {
    ASSERT_TRUE(Must(q.Step()));
    EXPECT_EQ(q.Int(0), static_cast<int64_t>(k) - 3);
    EXPECT_EQ(q.Text(1), texts[k]);
    EXPECT_EQ(q.IsNull(2), k % 2 == 1) << k;
  }
  // 20,000 rows (three pieces of 8,192), the last one a duplicate key.
  Status dup = WriteRows(*db, "t", "i, s, n", 20'000, [](size_t k, RowSink& row) {
    row.Int(k == 19'999 ? 0 : static_cast<int64_t>(k) + 100).Text("x").Null();
  });
  EXPECT_TRUE(dup.IsInvalidArgument()) << dup.ToString();
  PREPARE(n, db, "SELECT count(*) FROM t");
  ASSERT_TRUE(Must(n.Step()));
  EXPECT_EQ(n.Int(0), static_cast<int64_t>(texts.size()));
}

// A server restart in the middle of a COPY (enqueue's writes) loses the connection: the
// transaction reconnects and runs again, whole, and the table has each row once.
TEST(PgDbTest, AServerRestartInTheMiddleOfACopyCostsARetry) {
  auto [pg, db] = OnOwnServer();
  ASSERT_NE(db, nullptr);
  FM_ASSERT_OK(db->Exec("CREATE TABLE c (k bigint PRIMARY KEY, s text)"));
  int runs = 0;
  bool restarted = false;
  std::string why;
  FM_ASSERT_OK(db->Transaction(PgDb::TxnKind::kWrite, [&]() -> Status {
    ++runs;
    return WriteRows(*db, "c", "k, s", 50'000, [&](size_t k, RowSink& row) {
      if (k == 20'000 && !restarted) restarted = pg->Restart(&why);  // rows 0.. are on their way
      row.Int(static_cast<int64_t>(k)).Text("row " + std::to_string(k));
    });
  }));
  ASSERT_TRUE(restarted) << why;
  EXPECT_EQ(runs, 2);
  PREPARE(n, db, "SELECT count(*), count(DISTINCT k) FROM c");
  ASSERT_TRUE(Must(n.Step()));
  EXPECT_EQ(n.Int(0), 50'000);
  EXPECT_EQ(n.Int(1), 50'000);
}

// Ids reserved in a transaction are the sequence's: another connection's nextval meanwhile
// never gets one of them, and what the reserving transaction then inserts with them fits.
TEST(PgDbTest, ReservedIdsAreNeverGivenToAnotherConnection) {
  PgServer* pg = Server();
  ASSERT_NE(pg, nullptr);
  const std::string uri = pg->CreateDatabase();
  auto a = Connect(uri), b = Connect(uri);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  FM_ASSERT_OK(a->Exec("CREATE TABLE r (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, v int)"));
  std::vector<int64_t> mine;
  FM_ASSERT_OK(a->Transaction(PgDb::TxnKind::kWrite, [&]() -> Status {
    mine.clear();
    for (int round = 0; round < 2; ++round) {
      auto ids = ReserveIds(*a, "r", 1000);
      if (!ids.ok()) return ids.status();
      mine.insert(mine.end(), ids->begin(), ids->end());
      FM_RETURN_IF_ERROR(b->Exec("INSERT INTO r (v) VALUES (1)"));  // the other one, meanwhile
    }
    return WriteRows(*a, "r", "id, v", mine.size(), [&](size_t k, RowSink& row) {
      row.Int(mine[k]).Int(2);
    });
  }));
  ASSERT_EQ(mine.size(), 2000u);
  EXPECT_TRUE(std::is_sorted(mine.begin(), mine.end()));
  EXPECT_EQ(std::set<int64_t>(mine.begin(), mine.end()).size(), 2000u);
  PREPARE(q, a, "SELECT count(*), count(DISTINCT id), sum(v) FROM r");
  ASSERT_TRUE(Must(q.Step()));
  EXPECT_EQ(q.Int(0), 2002);
  EXPECT_EQ(q.Int(1), 2002);
  EXPECT_EQ(q.Int(2), 2 + 2 * 2000);
}

// A restart cuts every connection: the next transaction reconnects (prepared statements
// are made again) and runs, instead of failing the work it was doing.
TEST(PgDbTest, AServerRestartCostsARetryNotTheTransaction) {
  auto [pg, db] = OnOwnServer();
  ASSERT_NE(db, nullptr);
  FM_ASSERT_OK(db->Exec("CREATE TABLE r (k int)"));
  auto insert = [&](int k) {
    return db->Transaction(PgDb::TxnKind::kWrite, [&]() -> Status {
      auto st = db->Prepare("INSERT INTO r VALUES (?)");
      if (!st.ok()) return st.status();
      return st->Bind(1, k).Run();
    });
  };
  FM_ASSERT_OK(insert(1));
  std::string why;
  ASSERT_TRUE(pg->Restart(&why)) << why;
  FM_ASSERT_OK(insert(2));
  PREPARE(n, db, "SELECT count(*) FROM r");
  ASSERT_TRUE(Must(n.Step()));
  EXPECT_EQ(n.Int(0), 2);
}

// A loopback relay to the test server that drops its first connection when the client
// sends its first query, i.e. after the server accepted it: a server going down between
// a worker's connect and its session settings, as a restart in the crash test did.
class CutFirstQueryRelay {
 public:
  explicit CutFirstQueryRelay(int server_port) : server_port_(server_port) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listen_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(listen_, 8) != 0 ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("relay: cannot listen");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~CutFirstQueryRelay() {
    stop_ = true;
    thread_.join();
    ::close(listen_);
  }
  int port() const { return port_; }
  int connections() const { return connections_; }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{listen_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int client = ::accept(listen_, nullptr, nullptr);
      if (client < 0) continue;
      const int server = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(server_port_));
      if (::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0)
        Relay(client, server, /*cut_at_query=*/connections_++ == 0);
      ::close(server);
      ::close(client);
    }
  }
  void Relay(int client, int server, bool cut_at_query) {
    char buf[65536];
    while (!stop_) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(p, 2, 50) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (p[i].revents == 0) continue;
        const ssize_t n = ::read(p[i].fd, buf, sizeof buf);
        if (n <= 0) return;
        // The startup packet begins with its length (a zero byte); 'Q' is a query.
        if (i == 0 && cut_at_query && buf[0] == 'Q') return;
        if (::write(p[1 - i].fd, buf, static_cast<size_t>(n)) != n) return;
      }
    }
  }

  int server_port_, port_ = 0, listen_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

// Open is one attempt for the connection and its session settings together: a server
// lost between the two is waited for (connect_wait_ms), not reported as a broken store.
TEST(PgDbTest, AConnectionLostDuringItsSessionSetUpIsOpenedAgain) {
  PgServer* pg = Server();
  ASSERT_NE(pg, nullptr);
  const std::string uri = pg->CreateDatabase();
  const std::string database = uri.substr(uri.rfind('/') + 1);
  CutFirstQueryRelay relay(pg->port());
  const std::string via = "postgresql://framemill@127.0.0.1:" + std::to_string(relay.port()) +
                          "/" + database + "?sslmode=disable&gssencmode=disable";
  PgOptions options;
  options.connect_wait_ms = 10'000;
  auto db = PgDb::Open(via, options);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ(relay.connections(), 2);
  PREPARE(one, *db, "SELECT 1");
  ASSERT_TRUE(Must(one.Step()));
  EXPECT_EQ(one.Int(0), 1);
  db->reset();

  // Without the wait, the lost set-up is the answer, and it says what was lost.
  CutFirstQueryRelay again(pg->port());
  auto lost = PgDb::Open("postgresql://framemill@127.0.0.1:" + std::to_string(again.port()) +
                         "/" + database + "?sslmode=disable&gssencmode=disable");
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), Status::Code::kIOError) << lost.status().ToString();
  EXPECT_NE(lost.status().message().find("connection lost"), std::string::npos)
      << lost.status().ToString();
}

TEST(PgDbTest, TheTransactionTimeIsTheServersClock) {
  auto db = ConnectNew();
  ASSERT_NE(db, nullptr);
  int64_t seen = 0;
  FM_ASSERT_OK(db->Transaction(PgDb::TxnKind::kRead, [&]() -> Status {
    seen = db->TxnNowMs();
    return Status::OK();
  }));
  // Same machine: the server's clock is ours, to within a test's scheduling.
  EXPECT_NEAR(static_cast<double>(seen), static_cast<double>(SystemClock()->NowMs()), 5000);
}

// migrations/sqlite and migrations/postgres are kept in step: same versions, and after
// all of them the same tables with the same columns.
TEST(PgDbTest, BothDialectsMigrateToTheSameTablesAndColumns) {
  const auto& lite = EmbeddedMigrations(SqlDialect::kSqlite);
  const auto& post = EmbeddedMigrations(SqlDialect::kPostgres);
  ASSERT_EQ(lite.size(), post.size());
  for (size_t i = 0; i < lite.size(); ++i) {
    EXPECT_EQ(lite[i].version, post[i].version);
    EXPECT_EQ(lite[i].name, post[i].name);
  }
  using Schema = std::map<std::string, std::set<std::string>>;
  TempDir dir;
  auto sqlite = Must(SqliteDb::Open(dir.File("s.db")));
  ASSERT_NE(sqlite, nullptr);
  FM_ASSERT_OK(Migrate(*sqlite, lite));
  Schema a;
  PREPARE(q, sqlite,
          "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p"
          " WHERE m.type = 'table'");
  while (Must(q.Step())) a[q.Text(0)].insert(q.Text(1));

  auto db = ConnectNew();
  ASSERT_NE(db, nullptr);
  FM_ASSERT_OK(Migrate(*db, post));
  FM_ASSERT_OK(Migrate(*db, post));  // again: nothing to do
  Schema b;
  PREPARE(c, db,
          "SELECT table_name, column_name FROM information_schema.columns"
          " WHERE table_schema = 'public'");
  while (Must(c.Step())) b[c.Text(0)].insert(c.Text(1));
  EXPECT_EQ(a, b);
  EXPECT_EQ(b.count("jobs"), 1u);
  EXPECT_GE(b["jobs"].size(), 18u);
}

}  // namespace
}  // namespace framemill
