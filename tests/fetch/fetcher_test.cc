// The download engine against a real HTTP server on 127.0.0.1 that injects faults
// (tests/fetch/fault_server.py). The server's request log shows what was asked for.
#include "fetch/fetcher.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "tests/support/fault_server.h"
#include "tests/support/test_support.h"

namespace framemill::fetch {
namespace {

namespace fs = std::filesystem;
using framemill::testing::ReadFile;
using framemill::testing::SampleData;
using framemill::testing::StartProcess;
using framemill::testing::TempDir;

class FetcherTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    server_ = new framemill::testing::FaultServer(*dir_ / "server.log");
    ASSERT_GT(server_->port(), 0) << "fault_server.py did not print its port";
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }

  static std::string Url(const std::string& path) { return server_->Url(path); }
  static nlohmann::json Get(const std::string& path) { return server_->Get(path); }
  static int Requests(const std::string& path) { return server_->Requests(path); }

  FetchOptions Options() const {
    FetchOptions o;
    o.out_dir = out_.path();
    o.connect_timeout_ms = 2000;
    o.total_timeout_ms = 1500;
    o.max_bytes = 200000;  // messi5.jpg (73 KB) fits, starry_night.jpg (303 KB) does not
    o.block_private = false;  // the fault server is on 127.0.0.1
    return o;
  }
  // Files under fetched/, except the temporary directory.
  std::vector<std::string> StoredFiles() const {
    std::vector<std::string> files;
    fs::path root = fs::path(out_.path()) / "fetched";
    if (!fs::exists(root)) return files;
    for (auto& e : fs::recursive_directory_iterator(root))
      if (e.is_regular_file() && e.path().parent_path().filename() != "tmp")
        files.push_back(e.path().string());
    return files;
  }
  void ExpectNoTempFiles() const {
    fs::path tmp = fs::path(out_.path()) / "fetched" / "tmp";
    if (!fs::exists(tmp)) return;
    EXPECT_TRUE(fs::is_empty(tmp)) << "left in " << tmp;
  }

  TempDir out_;
  static inline TempDir* dir_ = nullptr;
  static inline framemill::testing::FaultServer* server_ = nullptr;
};

TEST_F(FetcherTest, StoresImagesAndVideosUnderTheirContentHash) {
  FetchOptions o = Options();
  o.max_bytes = 4 << 20;
  Fetcher f(o);
  // The server labels everything image/jpeg: format and extension come from the bytes.
  const std::vector<std::string> names = {"messi5.jpg", "basketball1.png", "Megamind.avi"};
  std::vector<std::string> urls;
  for (auto& n : names) urls.push_back(Url("/img/" + n));
  auto results = f.FetchAll(urls);
  ASSERT_EQ(results.size(), 3u);
  const char* formats[] = {"jpeg", "png", "avi"};
  const char* exts[] = {".jpg", ".png", ".avi"};
  for (size_t i = 0; i < 3; ++i) {
    const FetchResult& r = results[i];
    ASSERT_TRUE(r.status.ok()) << names[i] << ": " << r.status.ToString();
    EXPECT_EQ(r.failure, FailureClass::kNone);
    EXPECT_EQ(r.http_status, 200);
    EXPECT_EQ(r.format, formats[i]);
    EXPECT_EQ(r.kind, i == 2 ? MediaKind::kVideo : MediaKind::kImage);
    EXPECT_EQ(r.content_hash.size(), 32u);
    EXPECT_EQ(r.path, ContentPath(out_.path(), r.content_hash, r.format));
    EXPECT_EQ(fs::path(r.path).extension(), exts[i]);
    EXPECT_EQ(fs::path(r.path).parent_path().filename(), r.content_hash.substr(0, 2));
    EXPECT_EQ(ReadFile(r.path), ReadFile(SampleData(names[i])));
    EXPECT_EQ(r.bytes, static_cast<int64_t>(fs::file_size(r.path)));
    EXPECT_EQ(r.final_url, urls[i]);
  }
  EXPECT_NE(results[0].content_hash, results[1].content_hash);
  ExpectNoTempFiles();
}

TEST_F(FetcherTest, SameContentFromSeveralUrlsIsStoredOnce) {
  Fetcher f(Options());
  auto results = f.FetchAll({Url("/img/messi5.jpg"), Url("/img/messi5.jpg?copy=2"),
                             Url("/redirect/messi5.jpg"), Url("/img/apple.jpg")});
  for (auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(results[0].path, results[1].path);
  EXPECT_EQ(results[0].path, results[2].path);
  EXPECT_EQ(results[2].final_url, Url("/img/messi5.jpg"));
  EXPECT_EQ(StoredFiles().size(), 2u);
  // A later batch finding the file already there keeps it and adds nothing.
  auto again = Fetcher(Options()).FetchAll({Url("/img/messi5.jpg?copy=3")});
  ASSERT_TRUE(again[0].status.ok()) << again[0].status.ToString();
  EXPECT_EQ(again[0].path, results[0].path);
  EXPECT_EQ(StoredFiles().size(), 2u);
  ExpectNoTempFiles();
}

TEST(AddressTest, PrivateLoopbackLinkLocalAndMetadataAddressesAreBlocked) {
  auto v4 = [](const char* a) {
    sockaddr_in s{};
    s.sin_family = AF_INET;
    EXPECT_EQ(inet_pton(AF_INET, a, &s.sin_addr), 1) << a;
    return IsPrivateAddress(reinterpret_cast<const sockaddr*>(&s));
  };
  auto v6 = [](const char* a) {
    sockaddr_in6 s{};
    s.sin6_family = AF_INET6;
    EXPECT_EQ(inet_pton(AF_INET6, a, &s.sin6_addr), 1) << a;
    return IsPrivateAddress(reinterpret_cast<const sockaddr*>(&s));
  };
  for (const char* a : {"127.0.0.1", "127.255.1.2", "0.0.0.0", "10.1.2.3", "172.16.0.1",
                        "172.31.255.254", "192.168.1.1", "169.254.169.254", "100.64.0.1",
                        "224.0.0.1", "255.255.255.255", "198.18.0.1"})
    EXPECT_TRUE(v4(a)) << a;
  for (const char* a : {"8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "93.184.216.34"})
    EXPECT_FALSE(v4(a)) << a;
  for (const char* a : {"::1", "::", "fc00::1", "fd12:3456::1", "fe80::1", "ff02::1",
                        "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1",
                        "64:ff9b::10.0.0.1"})
    EXPECT_TRUE(v6(a)) << a;
  for (const char* a : {"2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::8.8.8.8"})
    EXPECT_FALSE(v6(a)) << a;
}

// With blocking on (the default), a URL whose host is loopback is refused before any
// request; a redirect, or a name resolving there, goes through the same per-connection
// check. Off (as in the other tests here), the same URL is fetched.
TEST_F(FetcherTest, BlockPrivateRefusesLoopbackBeforeAnyRequest) {
  FetchOptions o = Options();
  o.block_private = true;
  Fetcher f(o);
  const int before = Requests("/img/messi5.jpg?blocked") + Requests("/redirect/messi5.jpg?blocked");
  auto r = f.FetchAll({Url("/img/messi5.jpg?blocked"),
                       "http://localhost:" + std::to_string(server_->port()) + "/redirect/messi5.jpg?blocked"});
  for (const FetchResult& x : r) {
    EXPECT_STREQ(FailureClassName(x.failure), "blocked_address") << x.status.ToString();
    EXPECT_FALSE(x.status.IsTransient());
    EXPECT_NE(x.status.ToString().find("fetch.block_private"), std::string::npos);
  }
  EXPECT_NE(r[0].status.ToString().find("127.0.0.1"), std::string::npos) << r[0].status.ToString();
  EXPECT_EQ(Requests("/img/messi5.jpg?blocked") + Requests("/redirect/messi5.jpg?blocked"), before);
  o.block_private = false;
  Fetcher open(o);
  EXPECT_TRUE(open.FetchAll({Url("/img/messi5.jpg?open")})[0].status.ok());
}

TEST_F(FetcherTest, RedirectsDoNotSendTheRefererAndRetryAfterIsCapped) {
  FetchOptions o = Options();
  o.max_retry_after_ms = 60'000;
  Fetcher f(o);
  auto r = f.FetchAll({Url("/redirect/messi5.jpg?ref"), Url("/503-forever/a"),
                       Url("/503-far-date/a"), Url("/503-date/a")});
  ASSERT_TRUE(r[0].status.ok()) << r[0].status.ToString();
  EXPECT_FALSE(Get("/__log")["referers"].contains("/img/messi5.jpg"))
      << Get("/__log")["referers"].dump();
  // Past the cap: failed for good, the reason naming what the server sent and the setting.
  for (int i : {1, 2}) {
    SCOPED_TRACE(r[i].status.ToString());
    EXPECT_STREQ(FailureClassName(r[i].failure), "retry_after_too_long");
    EXPECT_FALSE(r[i].status.IsTransient());
    EXPECT_NE(r[i].status.ToString().find("fetch.max_retry_after_ms"), std::string::npos);
  }
  EXPECT_NE(r[1].status.ToString().find("999999999"), std::string::npos);
  // Within the cap (30 s): transient, with the server's wait as the floor.
  EXPECT_STREQ(FailureClassName(r[3].failure), "http_status");
  EXPECT_TRUE(r[3].status.IsTransient());
  EXPECT_GT(r[3].retry_after_ms, 20'000);
}

TEST_F(FetcherTest, PermanentFailuresAreClassifiedAndRequestedOnce) {
  FetchOptions o = Options();
  o.max_redirects = 3;
  Fetcher f(o);
  struct Case {
    std::string url;
    FailureClass failure;
    Status::Code code;
    int http;
  };
  const std::vector<Case> cases = {
      {Url("/404"), FailureClass::kHttpStatus, Status::Code::kNotFound, 404},
      {Url("/410"), FailureClass::kHttpStatus, Status::Code::kNotFound, 410},
      {Url("/html-as-jpeg"), FailureClass::kNotMedia, Status::Code::kUnsupported, 200},
      {Url("/loop"), FailureClass::kHttpStatus, Status::Code::kInvalidArgument, 302},
      {Url("/to-file"), FailureClass::kBadUrl, Status::Code::kInvalidArgument, 302},
      {Url("/big"), FailureClass::kTooLarge, Status::Code::kTooLarge, 200},
      {Url("/big-chunked"), FailureClass::kTooLarge, Status::Code::kTooLarge, 200},
      {"ftp://127.0.0.1/x.jpg", FailureClass::kBadUrl, Status::Code::kInvalidArgument, 0},
      {"file:///etc/passwd", FailureClass::kBadUrl, Status::Code::kInvalidArgument, 0},
      {"not a url", FailureClass::kBadUrl, Status::Code::kInvalidArgument, 0},
  };
  std::vector<std::string> urls;
  for (auto& c : cases) urls.push_back(c.url);
  auto results = f.FetchAll(urls);
  for (size_t i = 0; i < cases.size(); ++i) {
    const FetchResult& r = results[i];
    SCOPED_TRACE(cases[i].url + ": " + r.status.ToString());
    EXPECT_FALSE(r.status.ok());
    EXPECT_FALSE(r.status.IsTransient());
    EXPECT_EQ(r.status.code(), cases[i].code);
    EXPECT_STREQ(FailureClassName(r.failure), FailureClassName(cases[i].failure));
    EXPECT_EQ(r.http_status, cases[i].http);
    EXPECT_TRUE(r.path.empty());
  }
  for (const char* p : {"/404", "/410", "/html-as-jpeg", "/to-file", "/big", "/big-chunked"})
    EXPECT_EQ(Requests(p), 1) << p;
  EXPECT_EQ(Requests("/loop"), o.max_redirects + 1);
  // The chunked body (200 MB offered) was cut off near the cap, not read to the end.
  nlohmann::json sent;
  for (int i = 0; i < 50; ++i) {
    sent = Get("/__log")["sent"];
    if (sent.contains("/big-chunked")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(sent.contains("/big-chunked"));
  EXPECT_LT(sent["/big-chunked"].get<int64_t>(), int64_t{32} << 20);
  EXPECT_TRUE(StoredFiles().empty());
  ExpectNoTempFiles();
}

TEST_F(FetcherTest, TransientFailuresAreClassifiedAndSucceedOnRetry) {
  Fetcher f(Options());
  const std::vector<std::string> urls = {
      Url("/500-then-200/t1"), Url("/429/t1"), Url("/503-date/t1"), Url("/cut"),
      Url("/slow"), "http://nosuchhost.invalid/a.jpg", "http://127.0.0.1:1/a.jpg"};
  const auto t0 = std::chrono::steady_clock::now();
  auto r = f.FetchAll(urls);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const FailureClass want[] = {FailureClass::kHttpStatus, FailureClass::kHttpStatus,
                               FailureClass::kHttpStatus, FailureClass::kTransfer,
                               FailureClass::kTimeout,    FailureClass::kDns,
                               FailureClass::kConnect};
  const int http[] = {500, 429, 503, 200, 0, 0, 0};
  for (size_t i = 0; i < urls.size(); ++i) {
    SCOPED_TRACE(urls[i] + ": " + r[i].status.ToString());
    EXPECT_FALSE(r[i].status.ok());
    EXPECT_TRUE(r[i].status.IsTransient());
    EXPECT_STREQ(FailureClassName(r[i].failure), FailureClassName(want[i]));
    EXPECT_EQ(r[i].http_status, http[i]);
  }
  EXPECT_EQ(r[0].retry_after_ms, -1);
  EXPECT_EQ(r[1].retry_after_ms, 1000);
  EXPECT_GT(r[2].retry_after_ms, 20000);  // an HTTP date 30 s ahead
  EXPECT_LE(r[2].retry_after_ms, 31000);
  EXPECT_EQ(r[3].bytes, 1000);  // what arrived before the cut
  // /slow answers after 10 s: ending sooner shows the total timeout (1.5 s) cut it. The
  // margin is for a loaded machine, not a measurement.
  EXPECT_LT(secs, 9.0) << "the total timeout (1.5 s) did not end /slow (10 s)";
  EXPECT_GE(r[4].seconds, 1.4);

  auto again = f.FetchAll({urls[0], urls[1]});
  for (auto& a : again) EXPECT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(again[0].path, again[1].path);
  EXPECT_EQ(Requests("/500-then-200/t1"), 2);
  EXPECT_EQ(Requests("/429/t1"), 2);
  EXPECT_EQ(StoredFiles().size(), 1u);
  ExpectNoTempFiles();
}

// A slow transfer must not hold the others to its host. With CURLOPT_PIPEWAIT, libcurl
// parked a second request behind a connection still being set up until that transfer
// ended; on HTTP/1.1 that meant after the drip's whole time limit, so the second request
// "timed out after 0 ms" without ever being sent (HostileTest flaked on it in CI).
TEST_F(FetcherTest, ASlowTransferDoesNotHoldOthersToTheSameHost) {
  Fetcher f(Options());
  for (int round = 0; round < 3; ++round) {
    const std::string tag = "?hold=" + std::to_string(round);
    auto r = f.FetchAll({Url("/drip" + tag), Url("/img/messi5.jpg" + tag),
                         Url("/img/apple.jpg" + tag)});
    ASSERT_EQ(r.size(), 3u);
    EXPECT_STREQ(FailureClassName(r[0].failure), "timeout") << r[0].status.ToString();
    for (int i : {1, 2}) {
      EXPECT_TRUE(r[i].status.ok()) << "round " << round << ": " << r[i].status.ToString();
      // Finished before the drip ran out of time: not parked behind it (an ordering, not a
      // duration a loaded machine could stretch).
      EXPECT_LT(r[i].seconds, r[0].seconds) << "waited behind /drip";
    }
  }
}

TEST_F(FetcherTest, PerHostAndTotalConcurrencyCapsHold) {
  const std::vector<std::string> names = {"messi5.jpg", "apple.jpg", "orange.jpg",
                                          "butterfly.jpg", "aero1.jpg", "aero3.jpg"};
  auto batch = [&](const std::string& key) {
    std::vector<std::string> urls;
    for (int i = 0; i < 18; ++i)
      urls.push_back(Url("/conc/" + key + std::to_string(i) + "/" + names[i % names.size()]));
    return urls;
  };
  for (auto [concurrency, per_host] : {std::pair{64, 3}, std::pair{2, 16}}) {
    SCOPED_TRACE("concurrency " + std::to_string(concurrency) + ", per_host " +
                 std::to_string(per_host));
    Get("/__reset");
    FetchOptions o = Options();
    o.concurrency = concurrency;
    o.per_host = per_host;
    auto results = Fetcher(o).FetchAll(batch("c" + std::to_string(concurrency)));
    for (auto& r : results) ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    const int peak = Get("/__log")["max_concurrent"].get<int>();
    EXPECT_LE(peak, std::min(concurrency, per_host));
    EXPECT_GE(peak, 2) << "transfers did not overlap at all";
  }
  EXPECT_EQ(StoredFiles().size(), names.size());
  ExpectNoTempFiles();
}

TEST_F(FetcherTest, RemovesOnlyStaleNamedTempFiles) {
  fs::path tmp = fs::path(out_.path()) / "fetched" / "tmp";
  fs::create_directories(tmp);
  framemill::testing::WriteFile((tmp / "1-1.part").string(), "half a file");
  framemill::testing::WriteFile((tmp / "1-2.part").string(), "in progress");
  fs::last_write_time(tmp / "1-1.part",
                      fs::file_time_type::clock::now() - std::chrono::hours(2));
  ASSERT_TRUE(RemoveStaleTempFiles(out_.path(), 3600).ok());
  EXPECT_FALSE(fs::exists(tmp / "1-1.part"));
  EXPECT_TRUE(fs::exists(tmp / "1-2.part"));
  ASSERT_TRUE(RemoveStaleTempFiles(out_.path(), 0).ok());
  EXPECT_TRUE(fs::is_empty(tmp));
}

}  // namespace
}  // namespace framemill::fetch
