// The framemill binary on a PostgreSQL job store (FRAMEMILL_DB=postgresql://...), against
// a real server started for the test (tests/support/pg_server.h): every command, the same
// results as on SQLite, and the crash test of many machines: four `framemill run`
// processes on one store, SIGKILLed at random, with a server restart in the middle.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/chaos.h"
#include "tests/support/pg_server.h"
#include "tests/support/store_checks.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

PgServer* Server() {
  std::string why;
  PgServer* s = PgServer::Shared(&why);
  EXPECT_NE(s, nullptr) << why;
  return s;
}

// The export's lines, without the fields that tell when (they differ between runs).
std::vector<std::string> ExportedResults(const std::string& jsonl) {
  std::vector<std::string> out;
  std::istringstream in(jsonl);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    j.erase("finished_at");
    out.push_back(j.dump());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(PostgresBinaryTest, EveryCommandWorksAndGivesTheResultsSqliteGives) {
  PgServer* pg = Server();
  ASSERT_NE(pg, nullptr);
  TempDir dir;
  MakeRealImages(dir / "media", 6, 160);
  WriteFile(dir / "media/broken.jpg", "not a jpeg at all");
  std::map<std::string, std::string> exports;
  for (const std::string& db : {pg->CreateDatabase(), dir / "fm.db"}) {
    SCOPED_TRACE(db);
    std::map<std::string, std::string> env = {
        {"FRAMEMILL_DB", db}, {"FRAMEMILL_OUT", dir / "out"}, {"LOG_LEVEL", "warn"},
        {"FRAMEMILL_STAGES", "lighting"}, {"FRAMEMILL_MAX_ATTEMPTS", "1"}};
    auto fm = [&](std::vector<std::string> args) {
      args.insert(args.begin(), FRAMEMILL_BIN);
      return RunProcess(args, env, dir.path(), 120);
    };
    auto enq = fm({"enqueue", dir / "media"});
    ASSERT_EQ(enq.exit_code, 0) << enq.err;
    EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs"), 7);
    auto run = fm({"run", "--workers", "2"});
    EXPECT_EQ(run.exit_code, 3) << run.err;  // the broken file failed
    auto status = fm({"status", "--json"});
    ASSERT_EQ(status.exit_code, 0) << status.err;
    auto js = nlohmann::json::parse(status.out);
    EXPECT_EQ(js["items"], 7) << status.out;
    auto exp = fm({"export", "--format", "jsonl"});
    ASSERT_EQ(exp.exit_code, 0) << exp.err;
    exports[db.substr(0, 10)] = exp.out;
    EXPECT_EQ(ExportedResults(exp.out).size(), 6u);
    auto retry = fm({"retry", "--failed"});
    EXPECT_EQ(retry.exit_code, 0) << retry.err;
    EXPECT_NE(retry.out.find("re-queued 1 failed job"), std::string::npos) << retry.out;
    EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 0"), 1);
    auto again = fm({"run"});
    EXPECT_EQ(again.exit_code, 3) << again.err;
    EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM job_errors"), 2);
    auto gc = fm({"gc", "--dry-run"});
    EXPECT_EQ(gc.exit_code, 0) << gc.err;
    const std::string tag = db.substr(0, 10) == "postgresql" ? "pg" : "lite";
    auto report = fm({"report", "-o", dir / ("report-" + tag)});
    ASSERT_EQ(report.exit_code, 0) << report.err;
    EXPECT_NE(report.out.find("(7 item(s), 7 item page(s)"), std::string::npos) << report.out;
    EXPECT_NE(ReadFile(dir / ("report-" + tag + "/failures.html")).find("broken.jpg"), std::string::npos);
    auto shards = fm({"export", "--format", "webdataset", "-o", dir / ("wds-" + tag), "--shard-size", "4"});
    ASSERT_EQ(shards.exit_code, 0) << shards.err;
    EXPECT_NE(shards.err.find("exported 7 item(s) into 2 shard(s)"), std::string::npos) << shards.err;
  }
  ASSERT_EQ(exports.size(), 2u);
  EXPECT_EQ(ExportedResults(exports.begin()->second), ExportedResults(exports.rbegin()->second));
}

// Two machines mount the shared media at different places; FRAMEMILL_PATH_MAP names the
// canonical prefix on each, so both enqueue the same items and each worker opens its own
// path. A machine without the mapping cannot see the files: its jobs fail with class
// file_missing, and `retry --failed --class file_missing` brings them back for a machine
// that can.
TEST(PostgresBinaryTest, MachinesWithOtherMountsShareItemsAndAnUnseenFileCanBeRetried) {
  PgServer* pg = Server();
  ASSERT_NE(pg, nullptr);
  TempDir dir;
  MakeRealImages(dir / "a", 4, 160);
  std::filesystem::create_directory_symlink(dir / "a", dir / "b");  // machine B's mount
  const std::string db = pg->CreateDatabase();
  auto machine = [&](const std::string& map) {
    std::map<std::string, std::string> env = {
        {"FRAMEMILL_DB", db}, {"FRAMEMILL_OUT", dir / "out"}, {"LOG_LEVEL", "warn"},
        {"FRAMEMILL_STAGES", "lighting"}};
    if (!map.empty()) env["FRAMEMILL_PATH_MAP"] = map;
    return env;
  };
  auto a = machine("/shared/media=" + dir / "a");
  auto b = machine("/shared/media=" + dir / "b");
  auto c = machine("");
  auto fm = [&](const std::map<std::string, std::string>& env, std::vector<std::string> args) {
    args.insert(args.begin(), FRAMEMILL_BIN);
    return RunProcess(args, env, dir.path(), 120);
  };
  ASSERT_EQ(fm(a, {"enqueue", dir / "a"}).exit_code, 0);
  auto again = fm(b, {"enqueue", dir / "b"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM items"), 4);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM items WHERE source LIKE '/shared/media/%'"), 4);

  EXPECT_EQ(fm(c, {"run", "--workers", "1"}).exit_code, 3);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 3 AND error_class = 'file_missing'"),
            4);
  EXPECT_NE(QueryRows(db, "SELECT last_error FROM jobs LIMIT 1")[0].find("FRAMEMILL_PATH_MAP"),
            std::string::npos);
  auto retry = fm(c, {"retry", "--failed", "--class", "file_missing"});
  ASSERT_EQ(retry.exit_code, 0) << retry.err;
  EXPECT_NE(retry.out.find("re-queued 4 failed job(s) of class file_missing"), std::string::npos)
      << retry.out;
  auto run = fm(b, {"run", "--workers", "1"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 2"), 4);
}

// Four run processes stand in for four machines. Each is SIGKILLed at seeded random
// moments and started again, and the server restarts once in the middle. What the test
// exists for is arranged, not left to chance: the first kill takes a machine frozen while
// it holds leases (so a claimed batch is interrupted), and the server restarts while
// machine 0, which is not killed until it has shown it reconnected, holds leases. Every
// job must end terminal with exactly one result, and no attempt may go past the maximum.
TEST(PostgresCrashTest, FourMachinesKilledAtRandomAndAServerRestartLoseNothing) {
  // More attempts than the kills and the restart can spend on one job (one each, at most
  // 32), so no job can fail by chance.
  constexpr int kImages = 800, kMaxAttempts = 40, kMachines = 4, kWitness = 0;
  std::string why_not;
  std::unique_ptr<PgServer> pg = PgServer::Private(&why_not);  // restarted below: its own
  ASSERT_NE(pg, nullptr) << why_not;
  TempDir dir;
  MakeRealImages(dir / "media", kImages, 720);
  const std::string db = pg->CreateDatabase();
  std::map<std::string, std::string> env = {
      {"FRAMEMILL_DB", db}, {"FRAMEMILL_LEASE_MS", "800"},
      {"FRAMEMILL_MAX_ATTEMPTS", std::to_string(kMaxAttempts)},
      {"FRAMEMILL_RETRY_BASE_MS", "50"}, {"LOG_LEVEL", "info"},
      {"FRAMEMILL_OUT", dir / "out"}, {"FRAMEMILL_STAGES", "lighting"}};
  auto enq = RunProcess({FRAMEMILL_BIN, "enqueue", dir / "media"}, env, dir.path());
  ASSERT_EQ(enq.exit_code, 0) << enq.err;
  ASSERT_EQ(QueryInt(db, "SELECT count(*) FROM jobs"), kImages);

  std::mt19937 rng(ChaosSeed());
  auto log_of = [&](int m) { return dir / ("machine" + std::to_string(m) + ".log"); };
  auto start = [&](int m) {
    return StartProcess({FRAMEMILL_BIN, "run", "--workers", "1", "--batch", "8"}, env,
                        dir.path(), log_of(m));
  };
  std::vector<pid_t> machines;
  for (int m = 0; m < kMachines; ++m) machines.push_back(start(m));
  struct Reaper {  // an assertion that ends the test early leaves no machine running
    std::vector<pid_t>* machines;
    ~Reaper() {
      for (pid_t p : *machines) {
        SignalTree(p, SIGKILL);
        WaitProcess(p);
      }
    }
  } reaper{&machines};
  int kills = 0;
  auto kill_and_restart = [&](int m) {
    SignalTree(machines[m], SIGKILL);
    WaitProcess(machines[m]);
    ++kills;
    machines[m] = start(m);
  };
  const auto began = std::chrono::steady_clock::now();

  // 1. A kill that surely interrupts a claimed batch: machine 1, frozen holding leases.
  long long interrupted = 0;
  ASSERT_TRUE(FreezeHoldingLeases(db, machines[1], &interrupted)) << ReadFile(log_of(1));
  kill_and_restart(1);

  // 2. The restart, while the witness is connected and holds leases; then the witness must
  //    reconnect and go on finishing jobs, not stop.
  auto witness_done = [&] {
    return QueryInt(db, "SELECT coalesce(sum(jobs_done), 0) FROM workers WHERE pid IN (" +
                            TreePids(machines[kWitness]) + ")");
  };
  ASSERT_TRUE(WaitUntil([&] { return LeasesHeldBy(db, machines[kWitness]) > 0; }))
      << ReadFile(log_of(kWitness));
  const long long witness_done_before = witness_done();
  std::string why;
  ASSERT_TRUE(pg->Restart(&why)) << why;
  const bool witness_reconnected = WaitUntil([&] {
    return ReadFile(log_of(kWitness)).find("reconnecting") != std::string::npos &&
           witness_done() > witness_done_before;
  }, 120);
  EXPECT_TRUE(witness_reconnected) << ReadFile(log_of(kWitness));
  EXPECT_TRUE(Alive(machines[kWitness])) << "the witness stopped: " << ReadFile(log_of(kWitness));

  // 3. Kills of any machine at seeded random moments while work is left.
  auto outstanding = [&] {
    return QueryInt(db, "SELECT count(*) FROM jobs WHERE state NOT IN (2,3,4)");
  };
  for (int round = 0; round < 30 && outstanding() > 0; ++round) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(100, 400)(rng)));
    kill_and_restart(std::uniform_int_distribution<int>(0, kMachines - 1)(rng));
  }
  for (pid_t p : machines) {
    SignalTree(p, SIGKILL);
    WaitProcess(p);
  }
  machines.clear();
  // No machine gave up on the store: a lost connection is waited for, never fatal.
  for (int m = 0; m < kMachines; ++m) {
    const std::string log = ReadFile(log_of(m));
    EXPECT_EQ(log.find("the job store"), std::string::npos) << log;
    EXPECT_EQ(log.find("cannot open"), std::string::npos) << log;
  }
  const double chaos_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  const long long done_before = QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 2");
  auto final_run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, dir.path(), 600);
  EXPECT_EQ(final_run.exit_code, 0) << final_run.err;

  ExpectEveryJobDoneOnce(db, kImages);
  // Every lease of the frozen machine was rescued (others may have been too).
  const long long rescued =
      QueryInt(db, "SELECT count(*) FROM job_errors WHERE error_class IN ('lease_expired', 'timeout')");
  EXPECT_GE(rescued, interrupted);
  std::printf("[pg-crash] %d kills of %d machines and 1 server restart in %.1f s (the first "
              "interrupted %lld leases; the witness reconnected), %lld rescued leases, %lld/%d "
              "done before the final run\n",
              kills, kMachines, chaos_s, interrupted, rescued, done_before, kImages);
}

}  // namespace
}  // namespace framemill::testing
