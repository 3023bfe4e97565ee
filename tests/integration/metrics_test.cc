// `run --metrics ADDR` (issue 41): a real run on the simulated device, its endpoint scraped
// twice over HTTP while it works, and Prometheus's own checker on what it served.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
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
  // The endpoint refreshes once a second, and a fast machine finishes the run's 48 jobs in
  // under two seconds (1.8 s on 2026-11-29), so the test does not race the run: it freezes
  // the workers (SIGSTOP; the supervisor, which serves the endpoint, runs on) whenever the
  // store shows more jobs done than the endpoint has served, until a scrape shows them. While
  // they are frozen the run cannot end.
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
  const std::string db = dir / "fm.db";
  const auto done_in_store = [&] { return QueryInt(db, "SELECT count(*) FROM jobs WHERE stage = 'pose' AND state = 2"); };
  const auto workers = [&] { return ChildPids(run); };
  // Lets the workers run until the store holds more than `above` pose jobs done, freezes them,
  // and scrapes until the endpoint shows what the store holds.
  const auto scrape_past = [&](double above) {
    std::string body;
    EXPECT_TRUE(WaitUntil([&] { return done_in_store() > above; }, 120)) << ReadFile(log);
    const std::vector<pid_t> frozen = workers();
    for (pid_t w : frozen) kill(w, SIGSTOP);
    // A worker that found nothing left to claim may have exited meanwhile: it is still.
    EXPECT_TRUE(WaitUntil([&] {
      return std::all_of(frozen.begin(), frozen.end(), [](pid_t w) { return !Alive(w) || Stopped(w); });
    }, 30));
    const long long held = done_in_store();
    EXPECT_TRUE(WaitUntil([&] {
      body = Scrape(addr);
      return Sample(body, done) == static_cast<double>(held);
    }, 60)) << body << ReadFile(log);
    return body;
  };
  const auto thaw = [&] {
    for (pid_t w : workers()) kill(w, SIGCONT);
  };
  const std::string first = scrape_past(0);
  thaw();
  const std::string second = scrape_past(Sample(first, done));
  thaw();
  ASSERT_GT(Sample(second, done), Sample(first, done)) << second;
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
