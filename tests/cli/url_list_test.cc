// URL lists: the three forms, quoting, BOM, CRLF, blank and bad lines with numbers.
#include "cli/url_list.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

struct Parsed {
  Status status;
  std::vector<UrlEntry> entries;
  UrlListReport report;
};

Parsed Parse(const TempDir& dir, const std::string& name, const std::string& bytes) {
  WriteFile(dir / name, bytes);
  Parsed p;
  auto format = UrlListFormatOf(dir / name);
  EXPECT_TRUE(format.has_value()) << name;
  p.status = ReadUrlList(dir / name, *format, [&](UrlEntry&& e) {
    p.entries.push_back(std::move(e));
    return Status::OK();
  }, &p.report);
  return p;
}

nlohmann::json Meta(const UrlEntry& e) { return nlohmann::json::parse(e.metadata); }

// The entries' URLs and line numbers, and the lines of the rejected examples.
std::vector<std::string> Urls(const Parsed& p) {
  std::vector<std::string> out;
  for (const UrlEntry& e : p.entries) out.push_back(e.url);
  return out;
}
std::vector<int64_t> Lines(const Parsed& p) {
  std::vector<int64_t> out;
  for (const UrlEntry& e : p.entries) out.push_back(e.line);
  return out;
}
std::vector<int64_t> RejectedLines(const Parsed& p) {
  std::vector<int64_t> out;
  for (const BadLine& b : p.report.examples) out.push_back(b.line);
  return out;
}
using Strings = std::vector<std::string>;
using Numbers = std::vector<int64_t>;

TEST(UrlListTest, FormatIsChosenByExtension) {
  EXPECT_EQ(UrlListFormatOf("/a/urls.TXT"), UrlListFormat::kText);
  EXPECT_EQ(UrlListFormatOf("x.csv"), UrlListFormat::kCsv);
  EXPECT_EQ(UrlListFormatOf("x.jsonl"), UrlListFormat::kJsonl);
  EXPECT_FALSE(UrlListFormatOf("x.json").has_value());
  EXPECT_FALSE(UrlListFormatOf("/a.txt/file").has_value());
}

TEST(UrlListTest, OnlyAbsoluteHttpAndHttpsUrlsWithAHostAreAccepted) {
  EXPECT_TRUE(IsHttpUrl("http://example.com/a.jpg"));
  EXPECT_TRUE(IsHttpUrl("HTTPS://example.com"));
  EXPECT_TRUE(IsHttpUrl("http://user@127.0.0.1:8080/x?y#z"));
  EXPECT_FALSE(IsHttpUrl("ftp://example.com/a.jpg"));
  EXPECT_FALSE(IsHttpUrl("file:///etc/passwd"));
  EXPECT_FALSE(IsHttpUrl("http://"));
  EXPECT_FALSE(IsHttpUrl("http:///path"));
  EXPECT_FALSE(IsHttpUrl("http://:80/x"));
  EXPECT_FALSE(IsHttpUrl("http://exa mple.com/"));
  EXPECT_FALSE(IsHttpUrl("example.com/a.jpg"));
}

TEST(UrlListTest, TextSkipsBlanksAndCommentsStripsBomAndCrlfAndCountsRejectedLines) {
  TempDir dir;
  auto p = Parse(dir, "u.txt",
                 "\xEF\xBB\xBFhttp://h/a.jpg\r\n\r\n# a comment\n  https://h/b.png  \n"
                 "ftp://h/c.jpg\nnot a url\nhttp://h/d.gif");
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  // The last line has no final newline.
  EXPECT_EQ(Urls(p), (Strings{"http://h/a.jpg", "https://h/b.png", "http://h/d.gif"}));
  EXPECT_EQ(Lines(p), (Numbers{1, 4, 7}));
  EXPECT_EQ(p.report.urls, 3);
  EXPECT_EQ(p.report.records, 5);
  EXPECT_EQ(p.report.rejected_total(), 2);
  EXPECT_EQ(RejectedLines(p), (Numbers{5, 6}));
  EXPECT_EQ(p.report.rejected.at("not an http(s) URL"), 2);
}

TEST(UrlListTest, CsvFindsTheUrlColumnKeepsTheOthersAndHonoursRfc4180Quoting) {
  TempDir dir;
  auto p = Parse(dir, "u.csv",
                 "\xEF\xBB\xBF" "caption,URL,width\r\n"
                 "\"a cat, sitting\",http://h/a.jpg,640\r\n"
                 "\"she said \"\"hi\"\"\",\"https://h/b.png\",480\n"
                 "\"two\nlines\",http://h/c.jpg,1\n"
                 "\n"
                 "too,few\n"
                 "x,\"http://h/d.jpg\"junk,2\n"
                 "bad,mailto:x@y,3\n"
                 "last,http://h/e.jpg,5\n");
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  EXPECT_EQ(Urls(p), (Strings{"http://h/a.jpg", "https://h/b.png", "http://h/c.jpg", "http://h/e.jpg"}));
  ASSERT_EQ(p.entries.size(), 4u);
  EXPECT_EQ(Meta(p.entries[0]), (nlohmann::json{{"caption", "a cat, sitting"}, {"width", "640"}}));
  EXPECT_EQ(Meta(p.entries[1])["caption"], "she said \"hi\"");
  EXPECT_EQ(Meta(p.entries[2])["caption"], "two\nlines");
  EXPECT_EQ(p.entries[2].line, 4);
  EXPECT_EQ(p.entries[3].line, 10);
  EXPECT_EQ(p.report.rejected_total(), 3);
  EXPECT_EQ(RejectedLines(p), (Numbers{7, 8, 9}));
  ASSERT_FALSE(p.report.examples.empty());
  EXPECT_EQ(p.report.examples[0].reason, "wrong number of fields");
}

// Latin-1 bytes in a cell or a URL (not UTF-8) used to throw out of the JSON dump and
// stop the list partway; every line must come through, the URL's bytes exact.
TEST(UrlListTest, CsvCellsAndUrlsThatAreNotUtf8DoNotStopTheList) {
  TempDir dir;
  auto p = Parse(dir, "u.csv",
                 "caption,url\n"
                 "caf\xe9,http://h/a.jpg\n"
                 "plain,http://h/caf\xe9.jpg\n"
                 "last,http://h/z.jpg\n");
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  EXPECT_EQ(Urls(p), (Strings{"http://h/a.jpg", "http://h/caf\xe9.jpg", "http://h/z.jpg"}));
  ASSERT_EQ(p.entries.size(), 3u);
  EXPECT_EQ(Meta(p.entries[0])["caption"], "caf\xef\xbf\xbd");  // U+FFFD in the JSON
}

TEST(UrlListTest, CsvWithoutAUrlColumnIsInvalidArgumentNamingTheFile) {
  TempDir dir;
  auto p = Parse(dir, "u.csv", "link,caption\nhttp://h/a.jpg,x\n");
  ASSERT_TRUE(p.status.IsInvalidArgument());
  EXPECT_NE(p.status.message().find("u.csv"), std::string::npos);
  EXPECT_NE(p.status.message().find("url"), std::string::npos);
  EXPECT_TRUE(p.entries.empty());
}

TEST(UrlListTest, JsonlTakesTheUrlKeyKeepsOtherKeysAndCountsBadLines) {
  TempDir dir;
  auto p = Parse(dir, "u.jsonl",
                 "{\"url\": \"http://h/a.jpg\", \"label\": 3, \"tags\": [\"x\"]}\r\n"
                 "\n"
                 "{\"url\": 5}\n"
                 "{not json\n"
                 "[1,2]\n"
                 "{\"caption\": \"no url\"}\n"
                 "{\"url\": \"file:///etc/passwd\"}\n"
                 "{\"url\": \"https://h/b.png\"}\n");
  ASSERT_TRUE(p.status.ok()) << p.status.ToString();
  ASSERT_EQ(p.entries.size(), 2u);
  EXPECT_EQ(Meta(p.entries[0]), (nlohmann::json{{"label", 3}, {"tags", {"x"}}}));
  EXPECT_EQ(p.entries[1].url, "https://h/b.png");
  EXPECT_EQ(p.entries[1].line, 8);
  EXPECT_EQ(p.report.rejected_total(), 5);
  EXPECT_EQ(RejectedLines(p), (Numbers{3, 4, 5, 6, 7}));
}

TEST(UrlListTest, AnErrorFromTheCallbackStopsReading) {
  TempDir dir;
  WriteFile(dir / "u.txt", "http://h/1\nhttp://h/2\nhttp://h/3\n");
  int calls = 0;
  UrlListReport report;
  Status s = ReadUrlList(dir / "u.txt", UrlListFormat::kText, [&](UrlEntry&&) {
    return ++calls == 2 ? Status::IOError("disk full") : Status::OK();
  }, &report);
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace framemill::testing
