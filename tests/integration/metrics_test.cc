// `run --metrics ADDR` (issue 41): a real run on the simulated device, its endpoint scraped
// twice over HTTP while it works, and Prometheus's own checker on what it served.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <thread>

#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

namespace fs = std::filesystem;

// The body of http://`addr`/metrics; empty when it cannot be read.
std::string Scrape(const std::string& addr) {
  std::string body;
  CURL* c = curl_easy_init();
  const std::string url = "http://" + addr + "/metrics";
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, +[](char* p, size_t s, size_t n, void* out) {
    static_cast<std::string*>(out)->append(p, s * n);
    return s * n;
  });
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  const CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  return rc == CURLE_OK && status == 200 ? body : "";
}

// The value of the sample `name{labels}` (labels exactly as served), or -1.
double Sample(const std::string& body, const std::string& series) {
  const size_t at = body.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(body.substr(at + series.size() + 2));
}

TEST(MetricsTest, ARunScrapedTwiceShowsDoneJobsRisingAndItsDeviceAndPromtoolAcceptsIt) {
  FM_REQUIRE_MODEL("movenet-multipose");
  TempDir dir;
  // The endpoint refreshes once a second, so the run must outlast two refreshes after its
  // first job. 16 photos took 1.4 s once the engine's CPU kernels were vectorized (and the
  // second scrape then found the run gone); 48 take about 4 s on the 2-core VM.
  constexpr int kPhotos = 48;
  MakeRealImages(dir / "media", kPhotos, 640);
  const std::map<std::string, std::string> env = {
      {"FRAMEMILL_DB", dir / "fm.db"}, {"FRAMEMILL_OUT", dir / "out"},
      {"FRAMEMILL_MODELS", ModelsDir()}, {"FRAMEMILL_STAGES", "pose"},
      {"FRAMEMILL_BATCH", "1"}, {"GPU_BACKEND", "sim"},
      {"FRAMEMILL_DEVICE_LEDGER_DIR", dir.path()}};
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", dir / "media"}, env, dir.path()).exit_code, 0);
  const std::string log = dir / "run.log";
  const pid_t run = StartProcess({FRAMEMILL_BIN, "run", "--workers", "2", "--metrics", "127.0.0.1:0"},
                                 env, dir.path(), log);
  std::string addr;
  ASSERT_TRUE(WaitUntil([&] {
    std::smatch m;
    const std::string text = ReadFile(log);
    if (!std::regex_search(text, m, std::regex(R"(metrics: http://([0-9.]+:[0-9]+)/metrics)"))) return false;
    addr = m[1];
    return true;
  }, 60)) << ReadFile(log);
  const std::string done = R"(framemill_jobs{stage="pose",state="done"})";
  std::string first, second;
  ASSERT_TRUE(WaitUntil([&] {
    first = Scrape(addr);
    return Sample(first, done) >= 1;
  }, 120)) << first << ReadFile(log);
  ASSERT_TRUE(WaitUntil([&] {
    second = Scrape(addr);
    return Sample(second, done) > Sample(first, done);
  }, 120)) << second << ReadFile(log);
  std::printf("[metrics] %s: done %g, then %g\n", addr.c_str(), Sample(first, done), Sample(second, done));

  EXPECT_GT(Sample(second, R"(framemill_device_memory_bytes{device="sim:0",kind="total"})"), 0) << second;
  EXPECT_GE(Sample(second, R"(framemill_device_memory_bytes{device="sim:0",kind="planned"})"), 0) << second;
  EXPECT_GE(Sample(second, R"(framemill_device_workers{device="sim:0"})"), 1) << second;
  const double busy = Sample(second, R"(framemill_device_busy_ratio{device="sim:0"})");
  EXPECT_GE(busy, 0) << second;
  EXPECT_LE(busy, 1) << second;
  EXPECT_EQ(Sample(second, R"(framemill_oom_events_total{device="sim:0"})"), 0) << second;
  EXPECT_GE(Sample(second, R"(framemill_job_seconds_count{stage="pose",device="sim:0"})"), 1) << second;
  EXPECT_GE(Sample(second, "framemill_claims_total"), 1) << second;
  EXPECT_EQ(Sample(second, "framemill_workers"), 2) << second;

  // Prometheus's own checker (Debian's prometheus package) on what was served.
  WriteFile(dir / "scrape.txt", second);
  auto check = RunProcess({"/bin/sh", "-c", "promtool check metrics < scrape.txt"}, {}, dir.path());
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;

  EXPECT_EQ(WaitProcess(run), 0) << ReadFile(log);
  EXPECT_EQ(QueryInt(dir / "fm.db", "SELECT count(*) FROM jobs WHERE state = 2"), kPhotos);  // done
}

TEST(MetricsTest, AnAddressThatCannotBeServedIsAUsageError) {
  TempDir dir;
  MakeRealImages(dir / "media", 1, 64);
  const std::map<std::string, std::string> env = {{"FRAMEMILL_DB", dir / "fm.db"},
                                                  {"FRAMEMILL_STAGES", "lighting"}};
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", dir / "media"}, env, dir.path()).exit_code, 0);
  for (const char* addr : {"no-port", "256.1.1.1:9464"}) {
    auto r = RunProcess({FRAMEMILL_BIN, "run", "--metrics", addr}, env, dir.path());
    EXPECT_EQ(r.exit_code, 2) << addr << r.err;
    EXPECT_NE(r.err.find("FRAMEMILL_METRICS"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace framemill::testing
