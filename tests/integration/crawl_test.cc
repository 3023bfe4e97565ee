// The crawler end to end with the real binary: ~2,000 URLs of real images (many URLs
// share content) served by tests/fetch/fault_server.py on 127.0.0.1; `framemill run`
// is SIGKILLed mid-crawl a few times, then run to the end. Every URL must end terminal,
// no temporary file may remain, each content is stored once, and every fetched image
// gets its lighting result.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "tests/support/chaos.h"
#include "tests/support/fault_server.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {
namespace fs = std::filesystem;

constexpr int kCrawlImages = 60;
constexpr int kUrls = 2000;

TEST(CrawlTest, SigkillMidCrawlThenRerunFetchesEveryUrlOnceAndStoresEachContentOnce) {
  TempDir dir;
  auto images = MakeRealImages(dir / "served", kCrawlImages, 160);
  const std::string log = dir / "server.log";
  FaultServer server(log, {dir / "served"});
  const int port = server.port();
  ASSERT_GT(port, 0);
  std::string list;
  for (int i = 0; i < kUrls; ++i)
    list += "http://127.0.0.1:" + std::to_string(port) + "/img/" +
            fs::path(images[i % kCrawlImages]).filename().string() + "?n=" + std::to_string(i) + "\n";
  WriteFile(dir / "urls.txt", list);

  const std::string db = dir / "fm.db", out = dir / "out";
  std::map<std::string, std::string> env = {
      {"FRAMEMILL_DB", db}, {"FRAMEMILL_OUT", out}, {"FRAMEMILL_LEASE_MS", "800"},
      {"FRAMEMILL_MAX_ATTEMPTS", "10"}, {"FRAMEMILL_RETRY_BASE_MS", "50"},
      {"LOG_LEVEL", "info"}, {"FRAMEMILL_STAGES", "lighting"},
      {"FRAMEMILL_FETCH_BLOCK_PRIVATE", "0"}};  // the fault server is on 127.0.0.1
  auto t0 = std::chrono::steady_clock::now();
  auto enq = RunProcess({FRAMEMILL_BIN, "enqueue", dir / "urls.txt"}, env, dir.path());
  ASSERT_EQ(enq.exit_code, 0) << enq.err;
  ASSERT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE stage = 'fetch'"), kUrls);
  ASSERT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE stage = 'lighting' AND state = 5"), kUrls);

  // Each kill comes once the crawl has made progress since the last one (an event, not a
  // guess at this machine's speed), plus a seeded random delay; the run is frozen before it
  // is killed, so the count read then is what the kill interrupted.
  std::mt19937 rng(ChaosSeed());
  const std::string run_log = dir / "run.log";
  auto fetched = [&] {
    return QueryInt(db, "SELECT count(*) FROM jobs WHERE stage = 'fetch' AND state = 2");
  };
  int kills_mid_crawl = 0;  // kills that landed after some fetching and before the end
  long long before = 0;
  for (int round = 0; round < 4; ++round) {
    pid_t sup = StartProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, dir.path(), run_log);
    ASSERT_TRUE(WaitUntil([&] { return fetched() > before || !Alive(sup); }, 120))
        << ReadFile(run_log);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 100)(rng)));
    ASSERT_TRUE(FreezeTree(sup));
    const long long now = fetched();
    SignalTree(sup, SIGKILL);
    WaitProcess(sup);
    std::printf("round %d: killed with %lld of %d URLs fetched\n", round, now, kUrls);
    if (now >= kUrls) break;
    if (now > before) ++kills_mid_crawl;
    before = now;
  }
  auto final_run = RunProcess({FRAMEMILL_BIN, "run", "--workers", "2"}, env, dir.path(), 300);
  EXPECT_EQ(final_run.exit_code, 0) << final_run.err;
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("crawl of %d URLs with %d kill(s) mid-crawl: %.1f s\n", kUrls, kills_mid_crawl, s);
  EXPECT_GT(kills_mid_crawl, 0);

  // Every URL terminal, and fetched (the server serves them all).
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE state NOT IN (2,3,4)"), 0);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE stage = 'fetch' AND state = 2"), kUrls);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM jobs WHERE stage = 'lighting' AND state = 2"), kUrls);
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM items WHERE fetched_path IS NULL"), 0);
  // Lighting ran on the local files.
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM results r JOIN jobs j ON j.id = r.job_id"
                         " WHERE j.stage = 'lighting'"), kUrls);

  // No temporary left; one file per distinct content, each the bytes of a served image.
  fs::path tmp = fs::path(out) / "fetched" / "tmp";
  if (fs::exists(tmp)) {
    EXPECT_TRUE(fs::is_empty(tmp)) << "left in " << tmp;
  }
  std::set<std::string> stored;
  for (auto& e : fs::recursive_directory_iterator(fs::path(out) / "fetched"))
    if (e.is_regular_file() && e.path().parent_path() != tmp) stored.insert(e.path().string());
  const long long hashes = QueryInt(db, "SELECT count(DISTINCT content_hash) FROM items");
  EXPECT_EQ(static_cast<long long>(stored.size()), hashes);
  EXPECT_EQ(hashes, kCrawlImages);
  EXPECT_EQ(QueryInt(db, "SELECT count(DISTINCT fetched_path) FROM items"), kCrawlImages);
  std::set<std::string> served;
  for (const auto& p : images) served.insert(ReadFile(p));
  for (const auto& p : stored) EXPECT_TRUE(served.count(ReadFile(p))) << p;

  auto status = RunProcess({FRAMEMILL_BIN, "status", "--json"}, env, dir.path());
  EXPECT_EQ(status.exit_code, 0);
  EXPECT_NE(status.out.find("\"success_rate\": 1.0"), std::string::npos) << status.out;

}

}  // namespace
}  // namespace framemill::testing
