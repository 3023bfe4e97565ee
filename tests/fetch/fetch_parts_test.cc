// The fetcher's parts that need no transfer: the failure classes of libcurl's codes and of
// HTTP statuses (fetch/failures.h), the URL policy (fetch/address_policy.h), and the content
// store's temporary files and content-addressed names (fetch/content_store.h).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "fetch/address_policy.h"
#include "fetch/content_store.h"
#include "fetch/failures.h"
#include "tests/support/test_support.h"

namespace framemill::fetch {
namespace {

namespace fs = std::filesystem;
using framemill::testing::ReadFile;
using framemill::testing::TempDir;

TEST(FetchFailuresTest, HttpStatusesMapToTheirClassAndWhetherToRetry) {
  FetchResult busy;
  MapHttpStatus(429, "7", " (u)", busy);
  EXPECT_EQ(busy.failure, FailureClass::kHttpStatus);
  EXPECT_TRUE(busy.status.IsBusy()) << busy.status.ToString();
  EXPECT_EQ(busy.retry_after_ms, 7000);
  FetchResult gone;
  MapHttpStatus(404, "", " (u)", gone);
  EXPECT_TRUE(gone.status.IsNotFound());
  EXPECT_EQ(gone.retry_after_ms, -1) << "a 404 carries no Retry-After";
  FetchResult server;
  MapHttpStatus(502, "", " (u)", server);
  EXPECT_EQ(server.status.code(), Status::Code::kIOError) << "a 5xx is transient";
  EXPECT_TRUE(server.status.IsTransient());
  FetchResult refused;
  MapHttpStatus(403, "", " (u)", refused);
  EXPECT_TRUE(refused.status.IsInvalidArgument());
  EXPECT_FALSE(refused.status.IsTransient()) << "another 4xx is permanent";
}

TEST(FetchFailuresTest, CurlCodesMapToTheirClass) {
  const std::pair<CURLcode, FailureClass> cases[] = {
      {CURLE_COULDNT_RESOLVE_HOST, FailureClass::kDns},  {CURLE_COULDNT_CONNECT, FailureClass::kConnect},
      {CURLE_OPERATION_TIMEDOUT, FailureClass::kTimeout}, {CURLE_FILESIZE_EXCEEDED, FailureClass::kTooLarge},
      {CURLE_URL_MALFORMAT, FailureClass::kBadUrl},       {CURLE_PARTIAL_FILE, FailureClass::kTransfer}};
  for (const auto& [rc, cls] : cases) {
    FetchResult r;
    MapCurlError(rc, "m", r);
    EXPECT_EQ(r.failure, cls) << curl_easy_strerror(rc);
    EXPECT_FALSE(r.status.ok());
  }
}

TEST(FetchFailuresTest, RetryAfterReadsSecondsAndDatesAndSaturates) {
  EXPECT_EQ(ParseRetryAfter("120"), 120'000);
  EXPECT_EQ(ParseRetryAfter(""), -1);
  EXPECT_EQ(ParseRetryAfter("soon"), -1);
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT"), 0) << "a date in the past: now";
  EXPECT_GT(ParseRetryAfter("99999999999999999999"), int64_t{1} << 40) << "saturates, never overflows";
}

TEST(FetchAddressPolicyTest, OnlyAbsoluteHttpUrlsWithAHostAreFetched) {
  std::string host;
  EXPECT_TRUE(ParseFetchUrl("HTTPS://Example.ORG/a.jpg", &host).ok());
  EXPECT_EQ(host, "example.org");
  EXPECT_FALSE(ParseFetchUrl("file:///etc/passwd", &host).ok());
  EXPECT_FALSE(ParseFetchUrl("ftp://example.org/a.jpg", &host).ok());
  EXPECT_FALSE(ParseFetchUrl("not a url", &host).ok());
}

TEST(ContentStoreTest, TheSameBytesPublishedTwiceAreOneFileAndNoTemporaryIsLeft) {
  TempDir dir;
  ContentStore store(dir.path());
  const std::string target = ContentPath(dir.path(), "ab12cd", "jpeg");
  EXPECT_EQ(target, dir.path() + "/fetched/ab/ab12cd.jpg");
  for (int copy = 0; copy < 2; ++copy) {
    TempFile f;
    std::string bytes = "the same bytes";
    ASSERT_TRUE(store.Append(&f, &bytes).ok());
    EXPECT_TRUE(bytes.empty()) << "appended bytes are taken";
    ASSERT_TRUE(store.Publish(&f, target).ok());
    store.Drop(&f);
  }
  EXPECT_EQ(ReadFile(target), "the same bytes");
  size_t left = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(store.tmp_dir(), ec)) left += e.is_regular_file();
  EXPECT_EQ(left, 0u) << "no .part file is left behind";
}

TEST(ContentStoreTest, ADroppedFileIsNeverPublished) {
  TempDir dir;
  ContentStore store(dir.path());
  TempFile f;
  std::string bytes = "half a body";
  ASSERT_TRUE(store.Append(&f, &bytes).ok());
  store.Drop(&f);
  EXPECT_EQ(f.fd, -1);
  std::error_code ec;
  EXPECT_FALSE(fs::exists(dir.path() + "/fetched/ha", ec));
  EXPECT_TRUE(RemoveStaleTempFiles(dir.path(), 0).ok());
}

}  // namespace
}  // namespace framemill::fetch
