// Hostile input and hostile machines against the real binary: names that are not UTF-8,
// a stage that blocks forever, a full disk, a supervisor SIGKILLed while `status` reads,
// and signals. Every item ends terminal with a reason, each run exits with the
// documented code within a bounded time, and the store passes integrity_check.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/videoio.hpp>

#include "tests/support/fault_server.h"
#include "tests/support/chaos.h"
#include "tests/support/store_checks.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

namespace fs = std::filesystem;

std::string Integrity(const std::string& db) {
  auto rows = QueryRows(db, "PRAGMA integrity_check");
  return rows.empty() ? "<none>" : rows[0];
}

// A last run of the store's jobs (2 workers) finishes every one of `jobs`, each done once,
// and leaves the file intact.
void ExpectARunFinishesAll(const std::map<std::string, std::string>& env, const std::string& cwd,
                           const std::string& db, long long jobs) {
  auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, cwd, 300);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 2"), jobs);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM results"), jobs);
  EXPECT_EQ(Integrity(db), "ok");
}

// Jobs not in a terminal state, and terminal failures without a recorded reason.
long long Unfinished(const std::string& db) {
  return QueryInt(db, "SELECT count(*) FROM jobs WHERE state NOT IN (2,3,4)");
}
long long FailedWithoutReason(const std::string& db) {
  return QueryInt(db, "SELECT count(*) FROM jobs WHERE state IN (3,4) AND"
                      " (coalesce(last_error, '') = '' OR coalesce(error_class, '') = '')");
}

// Mount a small tmpfs at `dir`; false when this process may not (not root, no
// CAP_SYS_ADMIN), and the caller skips with the reason.
bool MountTmpfs(const std::string& dir, const std::string& size) {
  fs::create_directories(dir);
  return mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
}

// Fills the file system holding `dir` until writes fail, but for `leave` bytes.
void FillDisk(const std::string& dir, int64_t leave) {
  // Write past full, then give back `leave` bytes: what is left is then exact.
  std::ofstream f(dir + "/filler", std::ios::binary);
  std::string block(1 << 16, 'x');
  while (f.write(block.data(), static_cast<std::streamsize>(block.size()))) {
  }
  f.close();
  const auto size = fs::file_size(dir + "/filler");
  fs::resize_file(dir + "/filler", size > static_cast<uintmax_t>(leave) ? size - leave : 0);
}

// A TIFF whose directory declares 20000x20000 over a few bytes of deflate data: 1.2 GB
// decoded, from a 100-byte file.
std::string TiffBomb() {
  auto u16 = [](uint32_t v) { return std::string{char(v), char(v >> 8)}; };
  auto u32 = [&](uint32_t v) { return u16(v & 0xFFFF) + u16(v >> 16); };
  auto entry = [&](uint32_t tag, uint32_t type, uint32_t value) {
    return u16(tag) + u16(type) + u32(1) + (type == 3 ? u16(value) + u16(0) : u32(value));
  };
  std::string s("II*\0", 4);
  s += u32(8) + u16(6) + entry(256, 4, 20000) + entry(257, 4, 20000) + entry(258, 3, 8) +
       entry(259, 3, 8) + entry(273, 4, 90) + entry(279, 4, 8) + u32(0);
  return s + std::string("\x78\x9c\x03\x00\x00\x00\x00\x01", 8);
}

// SIGTERM ends a run within 5 s even while a stage is stuck (issue 40: 24 s on 16 workers):
// the workers stop after the batch in hand, and one still busy past run.stop_grace_ms (3 s)
// is killed. Every claimed job goes back with no attempt spent, and a rerun finishes them.
TEST(HostileTest, SigtermEndsARunWithinFiveSecondsWhileAStageIsStuckAndLosesNothing) {
  TempDir dir;
  const std::string media = dir / "media";
  MakeRealImages(media, 12, 200);
  // First in the claim, and blocking forever once it is a FIFO: the jobs claimed with it
  // are never started.
  fs::copy_file(SampleData("baboon.jpg"), media + "/a-stuck.jpg");
  const std::string db = dir / "fm.db";
  std::map<std::string, std::string> env = {{"FRAMEMILL_DB", db}, {"FRAMEMILL_STAGES", "lighting"},
                                            {"LOG_LEVEL", "info"}};
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path()).exit_code, 0);
  fs::remove(media + "/a-stuck.jpg");
  ASSERT_EQ(mkfifo((media + "/a-stuck.jpg").c_str(), 0600), 0);
  const std::string log = dir / "run.log";
  pid_t sup = StartProcess({FRAMEMILL_BIN, "run", "--workers", "1", "--batch", "4"}, env, dir.path(), log);
  const std::string stuck_running = "SELECT count(*) FROM jobs j JOIN items i ON i.id = j.item_id"
                                    " WHERE j.state = 1 AND i.source LIKE '%/a-stuck.jpg'";
  for (int i = 0; i < 6000 && QueryInt(db, stuck_running) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(QueryInt(db, stuck_running), 1) << ReadFile(log);
  const long long claimed = QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 1");
  EXPECT_GT(claimed, 1) << "jobs claimed with the stuck one";
  const auto signalled = std::chrono::steady_clock::now();
  kill(sup, SIGTERM);
  const int code = WaitProcess(sup);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  EXPECT_EQ(code, 130) << ReadFile(log);  // interrupted (base/exit_code.h)
  EXPECT_LT(took, 5.0) << ReadFile(log);
  std::printf("[stop] SIGTERM to exit: %.2f s with a stage stuck\n", took);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 1"), 0) << "every claimed job went back";
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 0 AND attempts > 0"), 0) << "no attempt spent";
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM job_errors"), 0);

  // A worker that cannot answer at all (frozen, as a stage stuck in a loop): killed after
  // the grace, its jobs given back by the supervisor.
  sup = StartProcess({FRAMEMILL_BIN, "run", "--workers", "1", "--batch", "4"}, env, dir.path(), log);
  for (int i = 0; i < 6000 && QueryInt(db, stuck_running) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(QueryInt(db, stuck_running), 1) << ReadFile(log);
  const auto kids = ChildPids(sup);
  ASSERT_EQ(kids.size(), 1u);
  kill(kids[0], SIGSTOP);
  const auto frozen = std::chrono::steady_clock::now();
  kill(sup, SIGTERM);
  EXPECT_EQ(WaitProcess(sup), 130) << ReadFile(log);
  const double hung = std::chrono::duration<double>(std::chrono::steady_clock::now() - frozen).count();
  EXPECT_LT(hung, 5.0) << ReadFile(log);
  std::printf("[stop] SIGTERM to exit: %.2f s with the worker frozen\n", hung);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 1"), 0) << ReadFile(log);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 0 AND attempts > 0"), 0) << "no attempt spent";
  fs::remove(media + "/a-stuck.jpg");
  fs::copy_file(SampleData("baboon.jpg"), media + "/a-stuck.jpg");
  auto rerun = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, dir.path(), 300);
  EXPECT_EQ(rerun.exit_code, 0) << rerun.err;
  ExpectEveryJobDoneOnce(db, 13);
}

TEST(HostileTest, NamesThatAreNotUtf8AndAStageThatBlocksEndTerminalWithAReason) {
  TempDir dir;
  const std::string media = dir / "media";
  MakeRealImages(media, 6, 200);
  fs::copy_file(SampleData("baboon.jpg"), media + "/caf\xe9.jpg");
  WriteFile(media + "/bomb.tif", TiffBomb());
  {  // 8192x4608 frames (37.7 MP): over the default media.max_video_pixels (35.4 MP)
    cv::VideoWriter w(media + "/huge.avi", cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), 1,
                      cv::Size(8192, 4608));
    ASSERT_TRUE(w.isOpened());
    for (int i = 0; i < 2; ++i) w.write(cv::Mat(4608, 8192, CV_8UC3, cv::Scalar(0, 0, 0)));
  }
  // A file replaced by a FIFO after it was enqueued: reading it blocks forever, as a
  // decoder stuck in a loop or a hung network mount would.
  fs::copy_file(SampleData("baboon.jpg"), media + "/stuck.jpg");
  const std::string db = dir / "fm.db";
  std::map<std::string, std::string> env = {
      {"FRAMEMILL_DB", db},           {"FRAMEMILL_STAGES", "lighting"},
      {"FRAMEMILL_MAX_ATTEMPTS", "2"}, {"FRAMEMILL_BATCH_BUDGET_MS", "1500"},
      {"FRAMEMILL_JOB_BUDGET_MS", "500"}, {"FRAMEMILL_RETRY_BASE_MS", "10"}};
  auto enq = RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path());
  ASSERT_EQ(enq.exit_code, 0) << enq.err;
  ASSERT_EQ(QueryInt(db, "SELECT count(*) FROM items"), 10);
  fs::remove(media + "/stuck.jpg");
  ASSERT_EQ(mkfifo((media + "/stuck.jpg").c_str(), 0600), 0);

  const auto started = std::chrono::steady_clock::now();
  auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2", "--batch", "4"}, env,
                        dir.path(), 120);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(run.exit_code, 3) << run.err;  // finished; the stuck one failed
  EXPECT_LT(took, 110) << "the run did not end by itself";
  EXPECT_EQ(Unfinished(db), 0);
  EXPECT_EQ(FailedWithoutReason(db), 0);
  auto stuck = QueryRows(db, "SELECT j.state || '|' || coalesce(j.error_class, '') FROM jobs j JOIN items i"
                             " ON i.id = j.item_id WHERE i.source LIKE '%/stuck.jpg'");
  ASSERT_EQ(stuck.size(), 1u);
  EXPECT_EQ(stuck[0], "3|timeout");
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 2"), 7);
  // The bombs are refused by their headers, before a pixel is decoded.
  for (const char* bomb : {"bomb.tif", "huge.avi"}) {
    auto row = QueryRows(db, std::string("SELECT j.state || '|' || j.error_class || '|' || j.last_error"
                                         " FROM jobs j JOIN items i ON i.id = j.item_id"
                                         " WHERE i.source LIKE '%/") + bomb + "'");
    ASSERT_EQ(row.size(), 1u) << bomb;
    EXPECT_EQ(row[0].rfind("3|too_large|", 0), 0u) << row[0];
  }
  EXPECT_EQ(Integrity(db), "ok");

  // The store kept the name's exact bytes; export and status do not abort on it.
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM items WHERE hex(source) LIKE '%636166E92E6A7067'"), 1);
  auto exp = RunProcess({FRAMEMILL_BIN, "export"}, env, dir.path());
  ASSERT_EQ(exp.exit_code, 0) << exp.err;
  std::istringstream lines(exp.out);
  std::string line;
  int n = 0, with_hex = 0;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);  // throws (fails the test) on bad JSON
    ++n;
    if (j.contains("item_hex")) {
      ++with_hex;
      EXPECT_NE(j["item_hex"].get<std::string>().find("636166e92e6a7067"), std::string::npos);
    }
  }
  EXPECT_EQ(n, 7);
  EXPECT_EQ(with_hex, 1);
  auto status = RunProcess({FRAMEMILL_BIN, "status", "--json"}, env, dir.path());
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(nlohmann::json::parse(status.out)["stages"]["lighting"]["failed"], 3);
  // Let the FIFO's blocked opener (already killed) leave nothing behind.
  fs::remove(media + "/stuck.jpg");
}

// A hostile server and hostile URLs, through the real binary: a Retry-After of 31 years,
// an HTTP date ten years ahead, a body that drips forever, a URL that is not UTF-8, a
// metadata cell that is not UTF-8, and (with blocking on) a URL to 127.0.0.1. Fetched in
// one working directory with a relative FRAMEMILL_OUT, analysed from another.
TEST(HostileTest, AHostileServerEndsEveryUrlTerminalAndFetchedFilesAreFoundFromAnyDirectory) {
  TempDir dir;
  FaultServer server(dir / "server.log");
  ASSERT_GT(server.port(), 0);
  const std::string base = "http://127.0.0.1:" + std::to_string(server.port());
  WriteFile(dir / "urls.csv", "url,caption\n" +
                                  base + "/img/messi5.jpg,caf\xe9\n" +
                                  base + "/503-forever/x,plain\n" +
                                  base + "/503-far-date/x,plain\n" +
                                  base + "/drip,plain\n" +
                                  base + "/img/caf\xe9.jpg,plain\n");
  const std::string db = dir / "fm.db";
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  std::map<std::string, std::string> env = {
      {"FRAMEMILL_DB", db},                       {"FRAMEMILL_OUT", "out"},  // relative
      {"FRAMEMILL_FETCH_BLOCK_PRIVATE", "0"},     {"FRAMEMILL_FETCH_TIMEOUT_MS", "1500"},
      {"FRAMEMILL_MAX_ATTEMPTS", "2"},            {"FRAMEMILL_RETRY_BASE_MS", "10"},
      {"FRAMEMILL_STAGES", "lighting"}};
  auto enq = RunProcess({FRAMEMILL_BIN, "enqueue", dir / "urls.csv"}, env, dir / "a");
  ASSERT_EQ(enq.exit_code, 0) << enq.err << enq.out;
  ASSERT_EQ(QueryInt(db, "SELECT count(*) FROM items"), 5);

  const auto started = std::chrono::steady_clock::now();
  auto fetch = RunProcess({FRAMEMILL_BIN, "run", "--stages", "fetch"}, env, dir / "a", 120);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 100);
  EXPECT_EQ(fetch.exit_code, 3) << fetch.err;
  auto rows = QueryRows(db, "SELECT j.state || '|' || coalesce(j.error_class, '') FROM jobs j JOIN items i"
                            " ON i.id = j.item_id WHERE j.stage = 'fetch' ORDER BY i.id");
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0], "2|");
  EXPECT_EQ(rows[1], "3|retry_after_too_long");
  EXPECT_EQ(rows[2], "3|retry_after_too_long");
  EXPECT_EQ(rows[3], "3|timeout");
  // The URL that is not UTF-8 reached the server, which gives up on it (an empty reply):
  // the job ends failed with that reason, and no worker aborted on its bytes.
  EXPECT_EQ(rows[4], "3|transfer")
      << ::testing::PrintToString(QueryRows(db, "SELECT last_error FROM jobs WHERE state = 3"));
  EXPECT_EQ(fetch.err.find("exited with code"), std::string::npos) << fetch.err;
  EXPECT_EQ(fetch.err.find("killed by signal"), std::string::npos) << fetch.err;
  EXPECT_EQ(FailedWithoutReason(db), 0);

  // From another directory, the fetched file is found: its path was stored absolute.
  auto light = RunProcess({FRAMEMILL_BIN, "run", "--stages", "lighting"}, env, dir / "b", 120);
  EXPECT_EQ(light.exit_code, 3) << light.err;  // the four failed URLs stay failed
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE stage = 'lighting' AND state = 2"), 1)
      << ::testing::PrintToString(QueryRows(db, "SELECT stage, state, last_error FROM jobs"));
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM items WHERE fetched_path LIKE '/%'"), 1);
  EXPECT_EQ(Unfinished(db), 0);

  // With blocking on (the default), the same server is refused before any request.
  std::map<std::string, std::string> blocked = env;
  blocked.erase("FRAMEMILL_FETCH_BLOCK_PRIVATE");
  blocked["FRAMEMILL_DB"] = dir / "blocked.db";
  WriteFile(dir / "one.txt", base + "/img/messi5.jpg?internal\n");
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", dir / "one.txt"}, blocked, dir / "a").exit_code, 0);
  auto refused = RunProcess({FRAMEMILL_BIN, "run"}, blocked, dir / "a", 60);
  EXPECT_EQ(refused.exit_code, 3) << refused.err;
  EXPECT_EQ(QueryRows(dir / "blocked.db", "SELECT error_class FROM jobs WHERE stage = 'fetch'"),
            std::vector<std::string>{"blocked_address"});
  EXPECT_EQ(server.Requests("/img/messi5.jpg?internal"), 0);
  EXPECT_EQ(Integrity(db), "ok");
}

TEST(HostileTest, AFullDiskStopsTheRunOnceWithExit4AndARerunFinishesEverything) {
  TempDir dir;
  const std::string small = dir / "small";
  if (!MountTmpfs(small, "3m"))
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << std::strerror(errno);
  struct Unmount {
    std::string dir;
    ~Unmount() { umount2(dir.c_str(), MNT_DETACH); }
  } unmount{small};
  const std::string media = dir / "media";
  MakeRealImages(media, 300, 64);
  const std::string db = small + "/fm.db";
  // Short leases: a batch whose give-back also failed on the full disk comes back soon.
  std::map<std::string, std::string> env = {{"FRAMEMILL_DB", db},
                                            {"FRAMEMILL_OUT", dir / "out"},
                                            {"FRAMEMILL_LEASE_MS", "2000"},
                                            {"FRAMEMILL_STAGES", "lighting"}};
  auto enq = RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path());
  ASSERT_EQ(enq.exit_code, 0) << enq.err;
  FillDisk(small, 96 << 10);  // room for a few commits, not for 300

  auto run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2", "--batch", "8"}, env,
                        dir.path(), 120);
  EXPECT_EQ(run.exit_code, 4) << run.err;
  EXPECT_NE(run.err.find(db), std::string::npos) << run.err;        // names the file
  EXPECT_NE(run.err.find("full"), std::string::npos) << run.err;    // and the cause
  // Stopped once: no worker replaced, none respawned in a loop.
  EXPECT_EQ(run.err.find("exited with code"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("not replaced"), std::string::npos) << run.err;

  // Space freed: a rerun finishes every job, none lost, none twice.
  fs::remove(small + "/filler");
  const long long done_before = QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 2");
  EXPECT_LT(done_before, 300);
  ExpectARunFinishesAll(env, dir.path(), db, 300);
}

TEST(HostileTest, SupervisorKilledWhileStatusReadsLeavesAnIntactStoreAndWorkersOwnLocks) {
  TempDir dir;
  const std::string media = dir / "media";
  MakeRealImages(media, 400, 640);  // work for the four rounds of kills
  const std::string db = dir / "fm.db";
  std::map<std::string, std::string> env = {{"FRAMEMILL_DB", db},
                                            {"FRAMEMILL_STAGES", "lighting"},
                                            {"FRAMEMILL_LEASE_MS", "1000"}};
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path()).exit_code, 0);

  std::atomic<bool> reading{true};
  std::thread status_loop([&] {
    while (reading) RunProcess({FRAMEMILL_BIN, "status", "--json"}, env, dir.path(), 30);
  });
  std::mt19937 rng(ChaosSeed());
  bool saw_worker_locks = false;
  int kills = 0;
  for (int round = 0; round < 4; ++round) {
    pid_t sup = StartProcess({FRAMEMILL_BIN, "run", "--workers", "2", "--batch", "8"}, env,
                             dir.path(), dir / "run.log");
    std::vector<pid_t> workers;
    // Each worker opened its own connection after the fork, so the kernel lists, under
    // its own pid, the shared lock on byte 128 of the WAL index that SQLite takes when a
    // connection opens and holds until it closes (POSIX locks are not inherited across
    // fork: a connection opened before the fork never has it in the child). Waited for
    // (the event, not a guess at how long a loaded machine takes to start two workers),
    // then the kill comes at a seeded random moment.
    auto both_hold_their_lock = [&] {
      workers = ChildPids(sup);
      std::istringstream locks(ReadFile("/proc/locks"));
      std::set<pid_t> open_here;
      for (std::string line; std::getline(locks, line);)
        for (pid_t w : workers)
          if (line.find(" " + std::to_string(w) + " ") != std::string::npos &&
              line.size() > 8 && line.compare(line.size() - 8, 8, " 128 128") == 0)
            open_here.insert(w);
      return workers.size() == 2 && open_here.size() == 2;
    };
    bool held = false;
    WaitUntil([&] { return (held = both_hold_their_lock()) || !Alive(sup); });
    if (!held) {  // the work ran out before this round's kill: nothing is left to test
      WaitProcess(sup);
      break;
    }
    saw_worker_locks = true;
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 400)(rng)));
    kill(sup, SIGKILL);  // the supervisor only: its workers must notice and stop
    WaitProcess(sup);
    ++kills;
    // They finish the job in hand and go: waited for, up to a minute.
    WaitUntilGone(workers);
    for (pid_t w : workers) EXPECT_FALSE(Alive(w)) << "worker " << w << " outlived its supervisor";
    EXPECT_EQ(Integrity(db), "ok");
  }
  reading = false;
  status_loop.join();
  std::printf("[hostile] %d supervisor kill(s) mid-run\n", kills);
  EXPECT_TRUE(saw_worker_locks) << ReadFile("/proc/locks");
  ExpectARunFinishesAll(env, dir.path(), db, 400);
}

// SIGHUP (the terminal or the ssh session went away) ends a run as SIGTERM does, and
// workers ignore SIGPIPE (a peer that goes away fails a write, it does not kill).
TEST(HostileTest, SighupStopsARunGracefullyAndWorkersIgnoreSigpipe) {
  TempDir dir;
  const std::string media = dir / "media";
  MakeRealImages(media, 600, 400);
  const std::string db = dir / "fm.db";
  std::map<std::string, std::string> env = {{"FRAMEMILL_DB", db}, {"FRAMEMILL_STAGES", "lighting"}};
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", media}, env, dir.path()).exit_code, 0);
  pid_t sup = StartProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, dir.path(),
                           dir / "run.log");
  std::vector<pid_t> workers;
  for (int i = 0; i < 300 && workers.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    workers = ChildPids(sup);
  }
  ASSERT_EQ(workers.size(), 2u);
  // A worker sets its signal dispositions before it opens the store, so once each one
  // holds a lease its mask is final (a fixed sleep raced a loaded machine).
  for (pid_t w : workers)
    ASSERT_TRUE(WaitUntil([&] { return LeasesHeldBy(db, w) > 0; })) << ReadFile(dir / "run.log");
  for (pid_t w : workers) {
    const std::string st = ReadFile("/proc/" + std::to_string(w) + "/status");
    auto at = st.find("SigIgn:");
    ASSERT_NE(at, std::string::npos);
    const unsigned long long ignored = std::stoull(st.substr(at + 7), nullptr, 16);
    EXPECT_TRUE(ignored & (1ULL << (SIGPIPE - 1))) << "worker " << w << " " << st.substr(at, 30);
  }
  kill(sup, SIGHUP);
  EXPECT_EQ(WaitProcess(sup), 130) << ReadFile(dir / "run.log");
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE state = 1"), 0);  // all given back
  EXPECT_EQ(Integrity(db), "ok");
}

}  // namespace
}  // namespace framemill::testing
