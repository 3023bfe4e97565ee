// The framemill binary as users and scripts drive it (../shared/CONTRACT.md):
// commands, exit codes, JSON keys, environment variables, and stopping a run with
// SIGINT/SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {
namespace fs = std::filesystem;

constexpr int kCliImages = 8;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_ / "fm.db";
    // The commands are under test, with the one stage that needs no models.
    env_ = {{"FRAMEMILL_DB", db_}, {"FRAMEMILL_OUT", dir_ / "out"}, {"LOG_LEVEL", "warn"},
            {"FRAMEMILL_STAGES", "lighting"}};
  }

  ProcResult Fm(std::vector<std::string> args,
                const std::map<std::string, std::string>& extra_env = {}) {
    args.insert(args.begin(), FRAMEMILL_BIN);
    auto env = env_;
    for (const auto& [k, v] : extra_env) env[k] = v;
    return RunProcess(args, env, dir_.path(), 120);
  }

  // kCliImages good images in dir/media.
  std::string GoodMedia() {
    std::string media = dir_ / "media";
    MakeRealImages(media, kCliImages, 160);
    return media;
  }

  long long Int(const std::string& sql) { return QueryInt(db_, sql); }

  TempDir dir_;
  std::string db_;
  std::map<std::string, std::string> env_;
};

TEST_F(CliTest, EnqueueThenRunWithTwoWorkersFinishesEverythingAndExitsZero) {
  std::string media = GoodMedia();
  auto enq = Fm({"enqueue", media});
  ASSERT_EQ(enq.exit_code, 0) << enq.err;
  EXPECT_NE(enq.out.find(std::to_string(kCliImages) + " added"), std::string::npos) << enq.out;

  auto run = Fm({"run", "--workers", "2"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE state = 2"), kCliImages);
  EXPECT_EQ(Int("SELECT count(*) FROM results"), kCliImages);
  EXPECT_EQ(Int("SELECT exit_code FROM runs ORDER BY id DESC LIMIT 1"), 0);

  // Nothing left: a second run has nothing to do and still exits 0.
  auto again = Fm({"run", "--workers", "2"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(Int("SELECT count(*) FROM results"), kCliImages);
}

TEST_F(CliTest, StatusJsonHasItemsAndPerStageCounts) {
  std::string media = GoodMedia();
  ASSERT_EQ(Fm({"enqueue", media}).exit_code, 0);

  auto before = Fm({"status", "--json"});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  auto j = nlohmann::json::parse(before.out);
  EXPECT_EQ(j["items"], kCliImages);
  ASSERT_TRUE(j["stages"].contains("lighting")) << before.out;
  for (const char* key : {"pending", "running", "done", "failed", "skipped"})
    EXPECT_TRUE(j["stages"]["lighting"].contains(key)) << key << " missing: " << before.out;
  EXPECT_EQ(j["stages"]["lighting"]["pending"], kCliImages);
  EXPECT_EQ(j["stages"]["lighting"]["done"], 0);

  ASSERT_EQ(Fm({"run", "--workers", "2"}).exit_code, 0);
  auto after = Fm({"status", "--json"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  j = nlohmann::json::parse(after.out);
  EXPECT_EQ(j["items"], kCliImages);
  EXPECT_EQ(j["stages"]["lighting"]["pending"], 0);
  EXPECT_EQ(j["stages"]["lighting"]["running"], 0);
  EXPECT_EQ(j["stages"]["lighting"]["done"], kCliImages);
  EXPECT_EQ(j["stages"]["lighting"]["failed"], 0);
  EXPECT_EQ(j["stages"]["lighting"]["skipped"], 0);
  // Time per item: the median of the jobs' own times as the store holds them (the upper
  // middle one of an even count).
  ASSERT_TRUE(j["stages"]["lighting"]["ms_per_item"].contains("image")) << after.out;
  std::vector<long long> run_ms;
  for (const std::string& v : QueryRows(db_, "SELECT run_ms FROM results ORDER BY run_ms")) run_ms.push_back(std::stoll(v));
  ASSERT_EQ(run_ms.size(), static_cast<size_t>(kCliImages));
  EXPECT_EQ(j["stages"]["lighting"]["ms_per_item"]["image"].get<double>(), run_ms[run_ms.size() / 2]);

  // The human-readable form works too.
  auto text = Fm({"status"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("lighting"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("time per item"), std::string::npos) << text.out;
}

// A failure's example can quote a file name, which may hold terminal escapes and bytes
// that are not UTF-8: the table prints it as a JSON string, never raw.
TEST_F(CliTest, StatusQuotesFailureExamplesInsteadOfPrintingTheirBytes) {
  std::string media = GoodMedia();
  const std::string gone = media + "/gone\x1b[2J\xff.jpg";
  fs::copy_file(media + "/" + fs::directory_iterator(media)->path().filename().string(), gone);
  ASSERT_EQ(Fm({"enqueue", media}).exit_code, 0);
  fs::remove(gone);
  EXPECT_EQ(Fm({"run", "--workers", "1"}).exit_code, 3);
  auto text = Fm({"status"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.find('\x1b'), std::string::npos) << "a raw escape reached the terminal";
  EXPECT_EQ(text.out.find('\xff'), std::string::npos);
  EXPECT_NE(text.out.find("gone\\u001b[2J\xef\xbf\xbd.jpg: No such file or directory"),
            std::string::npos)
      << text.out;
}

TEST_F(CliTest, ExportJsonlHasOneLinePerDoneJobWithTheContractKeys) {
  std::string media = GoodMedia();
  ASSERT_EQ(Fm({"enqueue", media}).exit_code, 0);
  ASSERT_EQ(Fm({"run", "--workers", "2"}).exit_code, 0);

  auto exp = Fm({"export", "--format", "jsonl"});
  ASSERT_EQ(exp.exit_code, 0) << exp.err;
  std::istringstream lines(exp.out);
  std::string line;
  std::set<std::string> items;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);
    ASSERT_TRUE(j["item"].is_string()) << line;
    EXPECT_EQ(j["item"].get<std::string>().rfind(media + "/", 0), 0u) << line;
    EXPECT_EQ(j["stage"], "lighting");
    EXPECT_EQ(j["device"], "cpu");
    EXPECT_TRUE(j["result"].is_object()) << line;
    EXPECT_FALSE(j["result"].empty()) << line;
    EXPECT_TRUE(j["artifacts"].is_array()) << line;
    items.insert(j["item"].get<std::string>());
  }
  EXPECT_EQ(items.size(), static_cast<size_t>(kCliImages));
  // The default format is jsonl.
  EXPECT_EQ(Fm({"export"}).out, exp.out);
}

// A full disk while exporting is an error naming the cause and exit 4, not a truncated
// file and exit 0: to a file, and to standard output.
TEST_F(CliTest, ExportToAFullDiskFailsWithExit4) {
  ASSERT_EQ(Fm({"enqueue", GoodMedia()}).exit_code, 0);
  ASSERT_EQ(Fm({"run", "--workers", "2"}).exit_code, 0);
  for (const char* format : {"jsonl", "csv"}) {
    auto to_file = Fm({"export", "--format", format, "-o", "/dev/full"});
    EXPECT_EQ(to_file.exit_code, 4) << to_file.err;
    EXPECT_NE(to_file.err.find("/dev/full: No space left on device"), std::string::npos)
        << to_file.err;
  }
  auto env = env_;
  auto piped = RunProcess({"/bin/sh", "-c", std::string(FRAMEMILL_BIN) + " export > /dev/full"},
                          env, dir_.path(), 120);
  EXPECT_EQ(piped.exit_code, 4) << piped.err;
  EXPECT_NE(piped.err.find("standard output: No space left on device"), std::string::npos)
      << piped.err;
}

TEST_F(CliTest, GcRemovesNothingRecentAndSaysWhat) {
  ASSERT_EQ(Fm({"enqueue", GoodMedia()}).exit_code, 0);
  ASSERT_EQ(Fm({"run", "--workers", "2"}).exit_code, 0);
  auto dry = Fm({"gc", "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("would remove 0 error record(s), 0 worker(s), 0 run(s)"), std::string::npos)
      << dry.out;
  // Everything is older than "0 days ago" but the newest run and its workers stay.
  auto gc = Fm({"gc", "--keep-days", "0", "--keep-runs", "0"});
  EXPECT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_NE(gc.out.find("removed 0 error record(s), 2 worker(s), 1 run(s)"), std::string::npos)
      << gc.out;
  EXPECT_EQ(Fm({"gc", "--keep-days", "-1"}).exit_code, 2);
  EXPECT_EQ(Fm({"status"}).exit_code, 0);
}

TEST_F(CliTest, ExportCsvToAFileWritesAHeaderAndOneRowPerResult) {
  std::string media = GoodMedia();
  ASSERT_EQ(Fm({"enqueue", media}).exit_code, 0);
  ASSERT_EQ(Fm({"run", "--workers", "2"}).exit_code, 0);

  const std::string csv = dir_ / "results.csv";
  auto exp = Fm({"export", "--format", "csv", "-o", csv});
  ASSERT_EQ(exp.exit_code, 0) << exp.err;
  EXPECT_TRUE(exp.out.empty()) << exp.out;  // went to the file
  std::istringstream lines(ReadFile(csv));
  std::string header, line;
  ASSERT_TRUE(std::getline(lines, header));
  EXPECT_EQ(header.rfind("item,stage,device", 0), 0u) << header;
  int rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    EXPECT_EQ(line.rfind(media + "/", 0), 0u) << line;
    EXPECT_NE(line.find(",lighting,cpu,"), std::string::npos) << line;
  }
  EXPECT_EQ(rows, kCliImages);

  auto bad = Fm({"export", "--format", "xml"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--format"), std::string::npos) << bad.err;
}

TEST_F(CliTest, UnknownStageIsAUsageErrorListingTheValidStages) {
  std::string media = GoodMedia();
  for (const char* cmd : {"enqueue", "run"}) {
    std::vector<std::string> args = {cmd, "--stages", "nosuch"};
    if (std::string(cmd) == "enqueue") args.push_back(media);
    auto r = Fm(args);
    EXPECT_EQ(r.exit_code, 2) << cmd << ": " << r.err;
    EXPECT_NE(r.err.find("nosuch"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("lighting"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(db_) && Int("SELECT count(*) FROM items") > 0);
  // "all" and a valid name are accepted.
  EXPECT_EQ(Fm({"enqueue", "--stages", "all", media}).exit_code, 0);
  EXPECT_EQ(Fm({"run", "--workers", "1", "--stages", "lighting"}).exit_code, 0);
}

TEST_F(CliTest, BadBooleanInAllGpuIsAUsageErrorNamingTheVariable) {
  auto r = Fm({"config"}, {{"ALL_GPU", "maybe"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ALL_GPU"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("maybe"), std::string::npos) << r.err;
  // Accepted spellings, in any case.
  for (const char* ok : {"TRUE", "no", "1", "Yes"})
    EXPECT_EQ(Fm({"config"}, {{"ALL_GPU", ok}}).exit_code, 0) << ok;
  auto op = Fm({"config"}, {{"LIGHTING_GPU", "sometimes"}});
  EXPECT_EQ(op.exit_code, 2);
  EXPECT_NE(op.err.find("LIGHTING_GPU"), std::string::npos) << op.err;
}

TEST_F(CliTest, RocmAndMpsBackendsAreRefusedSayingOnlyCudaIsSupported) {
  for (const char* backend : {"rocm", "mps"}) {
    for (const char* cmd : {"config", "status"}) {
      auto r = Fm({cmd}, {{"GPU_BACKEND", backend}});
      EXPECT_EQ(r.exit_code, 2) << backend << " " << cmd;
      EXPECT_NE(r.err.find("GPU_BACKEND"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("only CUDA is supported"), std::string::npos) << r.err;
    }
  }
  EXPECT_EQ(Fm({"config"}, {{"GPU_BACKEND", "cpu"}}).exit_code, 0);
}

TEST_F(CliTest, ConfigJsonShowsEachValueAndWhereItCameFrom) {
  auto r = Fm({"config", "--json"}, {{"FRAMEMILL_LEASE_MS", "4321"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["settings"]["db"]["value"], db_);
  EXPECT_EQ(j["settings"]["db"]["source"], "env FRAMEMILL_DB");
  EXPECT_EQ(j["settings"]["run.lease_ms"]["value"], "4321");
  EXPECT_EQ(j["settings"]["run.lease_ms"]["source"], "env FRAMEMILL_LEASE_MS");
  EXPECT_EQ(j["settings"]["run.batch"]["source"], "default");
  EXPECT_NE(std::find(j["stages"].begin(), j["stages"].end(), "lighting"), j["stages"].end());
  // The plain form names the same source.
  auto text = Fm({"config"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("env FRAMEMILL_DB"), std::string::npos) << text.out;
}

TEST_F(CliTest, FlagOverridesTheEnvironment) {
  const std::string other = dir_ / "other.db";
  ASSERT_EQ(Fm({"enqueue", "--db", other, GoodMedia()}).exit_code, 0);
  EXPECT_TRUE(fs::exists(other));
  EXPECT_FALSE(fs::exists(db_));
  auto r = Fm({"status", "--json", "--db", other});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["db"], other);
}

// Only enqueue creates a store: a mistyped --db elsewhere is an error, not a new
// empty store that reports "nothing to do".
TEST_F(CliTest, CommandsOtherThanEnqueueRefuseAMissingStore) {
  const std::string typo = dir_ / "typo.db";
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"status", "--db", typo}, {"run", "--db", typo}, {"retry", "--db", typo},
           {"export", "--db", typo}}) {
    auto r = Fm(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("no job store at " + typo), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(typo));
}

TEST_F(CliTest, RetryFailedPutsFailedJobsBackAndAFixedFileThenSucceeds) {
  std::string media = GoodMedia();
  const std::string broken = media + "/broken.jpg";
  WriteTruncated(SampleData("messi5.jpg"), broken, 0.5);
  ASSERT_EQ(Fm({"enqueue", media}).exit_code, 0);

  auto run = Fm({"run", "--workers", "2"});
  EXPECT_EQ(run.exit_code, 3) << run.err;  // finished, one failed permanently
  const std::string job = "SELECT %s FROM jobs j JOIN items i ON i.id = j.item_id"
                          " WHERE i.source = '" + broken + "'";
  auto of = [&](const std::string& col) {
    std::string sql = job;
    sql.replace(sql.find("%s"), 2, col);
    return QueryRows(db_, sql).at(0);
  };
  EXPECT_EQ(of("state || '|' || error_class"), "3|corrupt_input");
  auto status = nlohmann::json::parse(Fm({"status", "--json"}).out);
  EXPECT_EQ(status["stages"]["lighting"]["failed"], 1);

  auto retry = Fm({"retry", "--failed"});
  ASSERT_EQ(retry.exit_code, 0) << retry.err;
  EXPECT_NE(retry.out.find("re-queued 1 failed job"), std::string::npos) << retry.out;
  EXPECT_EQ(of("state || '|' || attempts || '|' || coalesce(error_class, '')"), "0|0|");
  status = nlohmann::json::parse(Fm({"status", "--json"}).out);
  EXPECT_EQ(status["stages"]["lighting"]["failed"], 0);
  EXPECT_EQ(status["stages"]["lighting"]["pending"], 1);

  // Nothing else is failed now: a second retry re-queues nothing.
  auto none = Fm({"retry", "--failed", "--stage", "lighting"});
  EXPECT_EQ(none.exit_code, 0);
  EXPECT_NE(none.out.find("re-queued 0"), std::string::npos) << none.out;
  EXPECT_EQ(Fm({"retry", "--stage", "nosuch"}).exit_code, 2);

  // The user repairs the file; the retried job now succeeds.
  fs::copy_file(SampleData("messi5.jpg"), broken, fs::copy_options::overwrite_existing);
  auto rerun = Fm({"run", "--workers", "2"});
  EXPECT_EQ(rerun.exit_code, 0) << rerun.err;
  EXPECT_EQ(of("state"), "2");
  EXPECT_EQ(Int("SELECT count(*) FROM results"), kCliImages + 1);
}

TEST_F(CliTest, UnknownSubcommandIsAUsageErrorNamingIt) {
  auto r = Fm({"frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("frobnicate"), std::string::npos) << r.err;
  auto none = Fm({});
  EXPECT_EQ(none.exit_code, 2);
  auto bad_flag = Fm({"run", "--no-such-flag"});
  EXPECT_EQ(bad_flag.exit_code, 2);
  EXPECT_NE(bad_flag.err.find("--no-such-flag"), std::string::npos) << bad_flag.err;
}

TEST_F(CliTest, EnqueueingTheSameDirectoryTwiceAddsNothing) {
  std::string media = GoodMedia();
  WriteFile(media + "/README", "not media\n");
  auto first = Fm({"enqueue", media});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find("items: " + std::to_string(kCliImages) + " added"), std::string::npos)
      << first.out;
  EXPECT_NE(first.out.find("not an image or video"), std::string::npos) << first.out;

  auto second = Fm({"enqueue", media});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.out.find("items: 0 added"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("jobs:  0 added"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find(std::to_string(kCliImages) + " unchanged"), std::string::npos)
      << second.out;
  EXPECT_EQ(Int("SELECT count(*) FROM jobs"), kCliImages);
}

TEST_F(CliTest, EnqueueOfAMissingSourceIsAUsageErrorAndAUrlListIsAccepted) {
  auto missing = Fm({"enqueue", dir_ / "nope"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope"), std::string::npos) << missing.err;
  // A URL list: each URL becomes an item with a fetch job; a bad line is reported, not fatal.
  WriteFile(dir_ / "urls.txt", "https://example.com/a.jpg\nftp://example.com/b.jpg\n");
  auto urls = Fm({"enqueue", dir_ / "urls.txt"});
  EXPECT_EQ(urls.exit_code, 0) << urls.err;
  auto again = Fm({"enqueue", dir_ / "urls.txt"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  auto status = Fm({"status", "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  auto j = nlohmann::json::parse(status.out);
  EXPECT_EQ(j["items"], 1);  // the ftp URL is refused, the second enqueue adds nothing
  EXPECT_EQ(j["stages"]["fetch"]["pending"], 1);
  auto nothing = Fm({"enqueue"});
  EXPECT_EQ(nothing.exit_code, 2);
}

// ----------------------------------------------------------------- signals

// Waits (up to 5 s) until `sig` is no longer pending for pid, i.e. its handler has
// been entered. Two kill()s in a row would otherwise merge into one delivery.
bool WaitUntilDelivered(pid_t pid, int sig) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  const unsigned long long bit = 1ULL << (sig - 1);
  while (std::chrono::steady_clock::now() < deadline) {
    std::istringstream status(ReadFile("/proc/" + std::to_string(pid) + "/status"));
    std::string line;
    bool pending = false;
    while (std::getline(status, line)) {
      if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0)
        pending |= (std::stoull(line.substr(7), nullptr, 16) & bit) != 0;
    }
    if (!pending) return true;
    std::this_thread::yield();
  }
  return false;
}

constexpr int kSignalImages = 300;

// One set of ~300 real 600px images shared by the signal tests (each has its own store).
class CliSignalTest : public CliTest {
 protected:
  static void SetUpTestSuite() {
    media_dir_ = new TempDir();
    MakeRealImages(media_dir_->path(), kSignalImages, 600);
  }
  static void TearDownTestSuite() {
    delete media_dir_;
    media_dir_ = nullptr;
  }

  void SetUp() override {
    CliTest::SetUp();
    env_["FRAMEMILL_LEASE_MS"] = "1000";
    env_["LOG_LEVEL"] = "info";
    auto enq = Fm({"enqueue", media_dir_->path()});
    ASSERT_EQ(enq.exit_code, 0) << enq.err;
    ASSERT_EQ(Int("SELECT count(*) FROM jobs WHERE state = 0"), kSignalImages);
  }

  // Starts `run --workers 2` and returns once at least `done` jobs are done (or the
  // run ended early: the caller's assertions then fail).
  pid_t StartRunAndWaitForProgress(int done) {
    log_ = dir_ / "run.log";
    pid_t pid = StartProcess({FRAMEMILL_BIN, "run", "--workers", "2", "--batch", "4"}, env_,
                             dir_.path(), log_);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        ADD_FAILURE() << "run ended before it could be interrupted: " << ReadFile(log_);
        return -1;
      }
      if (fs::exists(db_) && Int("SELECT count(*) FROM jobs WHERE state = 2") >= done &&
          ChildPids(pid).size() == 2)
        return pid;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "no progress within 60 s: " << ReadFile(log_);
    return pid;
  }

  // After the interruption, a rerun finishes every job exactly once.
  void ExpectRerunFinishesEverythingOnce() {
    auto rerun = Fm({"run", "--workers", "2"});
    EXPECT_EQ(rerun.exit_code, 0) << rerun.err;
    EXPECT_EQ(Int("SELECT count(*) FROM jobs"), kSignalImages);
    EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE state = 2"), kSignalImages);
    EXPECT_EQ(Int("SELECT count(*) FROM results"), kSignalImages);
    EXPECT_EQ(Int("SELECT count(*) FROM (SELECT job_id FROM results GROUP BY job_id"
                  " HAVING count(*) > 1)"), 0);
    EXPECT_EQ(Int("SELECT count(*) FROM jobs j WHERE NOT EXISTS"
                  " (SELECT 1 FROM results r WHERE r.job_id = j.id)"), 0);
    EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE lease_token IS NOT NULL"), 0);
  }

  void GracefulStopCase(int sig) {
    pid_t sup = StartRunAndWaitForProgress(20);
    ASSERT_GT(sup, 0);
    auto workers = ChildPids(sup);
    // The signal lands while jobs are in hand, whatever this machine's speed: the run is
    // frozen holding leases, signalled, then let go.
    ASSERT_TRUE(FreezeWithLeasesInHand(sup));
    ASSERT_EQ(kill(sup, sig), 0);
    SignalTree(sup, SIGCONT);
    int code = WaitProcess(sup);
    EXPECT_EQ(code, 130) << ReadFile(log_);
    // The workers stopped too (none was left behind holding leases).
    for (pid_t w : workers) EXPECT_FALSE(Alive(w)) << "worker " << w << " still alive";

    long long done = Int("SELECT count(*) FROM jobs WHERE state = 2");
    EXPECT_LT(done, kSignalImages) << "the run finished before the signal landed";
    // Every job in hand was finished and recorded, the rest released: nothing is
    // left running or leased, and no attempt was spent on a released job.
    EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE state = 1"), 0);
    EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE lease_token IS NOT NULL"), 0);
    EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE state = 0 AND attempts <> 0"), 0);
    EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE state = 0"), kSignalImages - done);
    EXPECT_EQ(Int("SELECT exit_code FROM runs ORDER BY id DESC LIMIT 1"), 130);

    ExpectRerunFinishesEverythingOnce();
    // A graceful stop costs no attempt and no rescue.
    EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE attempts <> 1"), 0);
    EXPECT_EQ(Int("SELECT count(*) FROM job_errors"), 0);
  }

  // Stops the run (supervisor and workers) with SIGSTOP at a moment when its workers
  // hold leases (FreezeHoldingLeases), then lets the supervisor go on alone.
  bool FreezeWithLeasesInHand(pid_t sup) {
    long long held = 0;
    if (!FreezeHoldingLeases(db_, sup, &held)) return false;
    kill(sup, SIGCONT);
    return true;
  }

  static TempDir* media_dir_;
  std::string log_;
};
TempDir* CliSignalTest::media_dir_ = nullptr;

TEST_F(CliSignalTest, SigintStopsGracefullyWithExit130AndARerunFinishesEverythingOnce) {
  GracefulStopCase(SIGINT);
}

TEST_F(CliSignalTest, SigtermStopsGracefullyWithExit130AndARerunFinishesEverythingOnce) {
  GracefulStopCase(SIGTERM);
}

TEST_F(CliSignalTest, SecondSigintStopsAtOnceAndExpiredLeasesAreRescuedByTheRerun) {
  pid_t sup = StartRunAndWaitForProgress(20);
  ASSERT_GT(sup, 0);
  auto workers = ChildPids(sup);
  // Freeze the workers while they hold leases. Otherwise a worker on a loaded machine
  // may finish and release its batch between the two signals, and the case under test
  // (leases left behind by killed workers) would not happen at all.
  ASSERT_TRUE(FreezeWithLeasesInHand(sup));
  ASSERT_EQ(kill(sup, SIGINT), 0);
  ASSERT_TRUE(WaitUntilDelivered(sup, SIGINT));
  ASSERT_EQ(kill(sup, SIGINT), 0);
  int code = WaitProcess(sup);
  EXPECT_EQ(code, 130) << ReadFile(log_);
  // The workers were killed, not asked: give the kernel a moment to reap them.
  WaitUntilGone(workers, 10);
  for (pid_t w : workers) EXPECT_FALSE(Alive(w)) << "worker " << w << " still alive";
  EXPECT_LT(Int("SELECT count(*) FROM jobs WHERE state = 2"), kSignalImages);
  // No graceful release: the batches in hand are still leased to the dead workers.
  const long long leased = Int("SELECT count(*) FROM jobs WHERE state = 1 AND lease_token IS NOT NULL");
  EXPECT_GT(leased, 0);

  // Leases are left to expire (FRAMEMILL_LEASE_MS=1000); the rerun rescues them.
  ExpectRerunFinishesEverythingOnce();
  EXPECT_EQ(Int("SELECT count(*) FROM job_errors WHERE error_class = 'lease_expired'"), leased);
  EXPECT_EQ(Int("SELECT count(*) FROM jobs WHERE attempts > max_attempts"), 0);
}

}  // namespace
}  // namespace framemill::testing
