// EnqueueSources on real files: classification by content, skip reasons,
// idempotence, change detection by content hash, bad sources, and scale.
#include "cli/enqueue.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "jobs/stage_graph.h"
#include "storage/job_store.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {
namespace fs = std::filesystem;

constexpr int kEnqueueImages = 6;

class EnqueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    StageSpec look;
    look.name = "look";  // images and videos
    ASSERT_TRUE(graph_.Add(look, &err)) << err;
    StageSpec still;
    still.name = "still";
    still.videos = false;  // skipped (not applicable) on videos
    ASSERT_TRUE(graph_.Add(still, &err)) << err;
    db_ = dir_ / "jobs.db";
    auto s = OpenSqliteJobStore(db_, &graph_, SystemClock());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    options_.stages = {"look", "still"};
  }

  // kEnqueueImages real photos, a real video, a text file and an empty extensionless file.
  void MakeMediaDir() {
    media_ = dir_ / "media";
    images_ = MakeRealImages(media_, kEnqueueImages, 200);
    fs::create_directories(media_ + "/sub");
    fs::copy_file(SampleData("vtest.avi"), media_ + "/sub/clip.avi");
    WriteFile(media_ + "/notes.txt", "shopping list: eggs, milk\n");
    WriteFile(media_ + "/sub/EMPTY", "");
  }

  Result<EnqueueReport> Enqueue(const std::vector<std::string>& sources,
                                EnqueueProgress* last = nullptr) {
    return EnqueueSources(*store_, sources, options_, [&](const EnqueueProgress& p) {
      if (last != nullptr) *last = p;
    });
  }

  // "state" of every job of `source`, in stage order, e.g. "0,4".
  std::string States(const std::string& source) {
    auto rows = QueryRows(db_, "SELECT group_concat(state, ',') FROM (SELECT j.state FROM jobs j"
                               " JOIN items i ON i.id = j.item_id WHERE i.source = '" +
                                   source + "' ORDER BY j.id)");
    return rows.empty() ? "" : rows[0];
  }
  std::string Item(const std::string& source, const std::string& column) {
    auto rows = QueryRows(db_, "SELECT " + column + " FROM items WHERE source = '" + source + "'");
    return rows.empty() ? "<no item>" : rows[0];
  }

  // Leases every pending job and records it done, as a run would.
  void CompleteAll() {
    auto claimed = store_->Claim("test", options_.stages, 1'000'000, 60'000);
    ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
    std::vector<FinishedJob> cs;
    for (const ClaimedJob& j : *claimed) cs.push_back({j.id, j.lease_token, Outcome::Done(nlohmann::json::object()), 0});
    auto st = store_->Complete(cs);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    ASSERT_EQ(st->done, static_cast<int>(cs.size()));
  }

  static void ShiftMtime(const std::string& path, std::chrono::seconds by) {
    fs::last_write_time(path, fs::last_write_time(path) + by);
  }

  TempDir dir_;
  std::string db_, media_;
  std::vector<std::string> images_;
  StageGraph graph_;
  std::unique_ptr<JobStore> store_;
  EnqueueOptions options_;
};

TEST_F(EnqueueTest, CountsMediaAndSkipsNonMediaByReason) {
  MakeMediaDir();
  EnqueueProgress last;
  auto r = Enqueue({media_}, &last);
  ASSERT_TRUE(r.ok()) << r.status().ToString();

  EXPECT_EQ(r->files_seen, kEnqueueImages + 3);
  EXPECT_EQ(r->media_files, kEnqueueImages + 1);
  EXPECT_EQ(r->skipped, (std::map<std::string, int64_t>{{"empty file", 1},
                                                        {"not an image or video", 1}}));
  EXPECT_EQ(r->skipped_example["empty file"], media_ + "/sub/EMPTY");
  EXPECT_EQ(r->skipped_example["not an image or video"], media_ + "/notes.txt");
  EXPECT_EQ(r->stats.items_added, kEnqueueImages + 1);
  // Two stages each; "still" does not apply to the video, so it is inserted skipped.
  EXPECT_EQ(r->stats.jobs_added, 2 * (kEnqueueImages + 1));
  EXPECT_EQ(r->stats.jobs_not_applicable, 1);
  EXPECT_TRUE(last.done);
  EXPECT_EQ(last.files_seen, kEnqueueImages + 3);
  EXPECT_EQ(last.to_read, kEnqueueImages + 3);
  EXPECT_EQ(last.items_written, kEnqueueImages + 1);

  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM items"), kEnqueueImages + 1);
  EXPECT_EQ(States(media_ + "/sub/clip.avi"), "0,4");
  EXPECT_EQ(States(images_[0]), "0,0");
  EXPECT_EQ(Item(media_ + "/sub/clip.avi", "kind"), "2");
  // Sources are stored as absolute paths, with sizes and header dimensions.
  auto info = nlohmann::json::parse(Item(images_[1], "media_info"));
  EXPECT_EQ(info["format"], "jpeg");
  EXPECT_GT(info["width"].get<int>(), 0);
  EXPECT_EQ(Item(images_[1], "size"), std::to_string(fs::file_size(images_[1])));
}

// An entry that cannot be read used to end the walk (the rest of the tree was silently
// not enqueued); now it is counted with its reason and the walk goes on. Causes that work
// even as root: a name nested past PATH_MAX, and a dangling symbolic link.
TEST_F(EnqueueTest, UnreadableEntriesAreCountedAndTheWalkGoesOn) {
  media_ = dir_ / "media";
  // Deep first in directory order is not guaranteed, so put good files on both sides.
  MakeRealImages(media_ + "/a", 3, 100);
  MakeRealImages(media_ + "/z", 3, 100);
  fs::create_symlink(media_ + "/gone.jpg", media_ + "/m-dangling.jpg");
  // 24 levels of 200-character names: past PATH_MAX (4096) from the root, made with
  // *at() calls relative to each level, with a real image at the bottom.
  int fd = open(media_.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  const std::string level(200, 'd');
  for (int i = 0; i < 24; ++i) {
    ASSERT_EQ(mkdirat(fd, level.c_str(), 0755), 0) << std::strerror(errno);
    int next = openat(fd, level.c_str(), O_RDONLY | O_DIRECTORY);
    close(fd);
    ASSERT_GE(next, 0);
    fd = next;
  }
  const std::string jpg = ReadFile(SampleData("baboon.jpg"));
  int out = openat(fd, "deep.jpg", O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(out, 0);
  ASSERT_EQ(write(out, jpg.data(), jpg.size()), static_cast<ssize_t>(jpg.size()));
  close(out);
  close(fd);

  auto r = Enqueue({media_});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stats.items_added, 6);  // everything readable, on both sides
  ASSERT_EQ(r->unreadable.count(std::strerror(ENAMETOOLONG)), 1u) << ::testing::PrintToString(r->unreadable);
  ASSERT_EQ(r->unreadable.count(std::strerror(ENOENT)), 1u) << ::testing::PrintToString(r->unreadable);
  EXPECT_EQ(r->unreadable_example[std::strerror(ENOENT)], media_ + "/m-dangling.jpg");

  // The binary says so and exits 3, having added what it could.
  const std::string db = dir_ / "cli.db";
  auto run = RunProcess({FRAMEMILL_BIN, "enqueue", "--db", db, "--stages", "lighting", media_});
  EXPECT_EQ(run.exit_code, 3) << run.err;
  EXPECT_NE(run.out.find("could not read 1 entry: File name too long"), std::string::npos) << run.out;
  EXPECT_EQ(QueryInt(db, "SELECT count(*) FROM items"), 6);
  // rm walks by descriptor, so it removes a tree deeper than PATH_MAX; TempDir cannot.
  RunProcess({"/bin/rm", "-rf", media_ + "/" + level});
}

TEST_F(EnqueueTest, EnqueueingTheSameSourceAgainAddsNothingAndReadsNoFile) {
  MakeMediaDir();
  auto first = Enqueue({media_});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const long long jobs = QueryInt(db_, "SELECT count(*) FROM jobs");

  EnqueueProgress last;
  auto again = Enqueue({media_}, &last);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->stats.items_added, 0);
  EXPECT_EQ(again->stats.items_changed, 0);
  EXPECT_EQ(again->stats.items_unchanged, kEnqueueImages + 1);
  EXPECT_EQ(again->stats.jobs_added, 0);
  EXPECT_EQ(again->stats.jobs_requeued, 0);
  EXPECT_EQ(again->media_files, kEnqueueImages + 1);
  // Known, unchanged media files (same size and mtime) are not opened again; the two
  // non-media files are not in the store, so only they are read.
  EXPECT_EQ(last.to_read, 2);
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM jobs"), jobs);
  // Naming the same directory by another spelling, or one of its files, changes nothing.
  auto third = Enqueue({media_ + "/./sub/../", images_[0]});
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(third->stats.items_added, 0);
  EXPECT_EQ(third->stats.jobs_added, 0);
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM items"), kEnqueueImages + 1);
}

TEST_F(EnqueueTest, NewContentRequeuesExactlyThatItemsJobs) {
  MakeMediaDir();
  ASSERT_TRUE(Enqueue({media_}).ok());
  CompleteAll();
  ASSERT_EQ(QueryInt(db_, "SELECT count(*) FROM results"), 2 * kEnqueueImages + 1);
  const std::string old_hash = Item(images_[2], "content_hash");

  // Same path, other picture (different bytes), later mtime.
  std::string other = ReadFile(images_[3]);
  ASSERT_NE(other, ReadFile(images_[2]));
  WriteFile(images_[2], other);
  ShiftMtime(images_[2], std::chrono::seconds(5));

  EnqueueProgress last;
  auto r = Enqueue({media_}, &last);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stats.items_added, 0);
  EXPECT_EQ(r->stats.items_changed, 1);
  EXPECT_EQ(r->stats.items_unchanged, kEnqueueImages);
  EXPECT_EQ(r->stats.jobs_requeued, 2);
  EXPECT_EQ(r->stats.jobs_added, 0);
  EXPECT_EQ(last.to_read, 3);  // the changed file and the two non-media ones

  EXPECT_NE(Item(images_[2], "content_hash"), old_hash);
  EXPECT_EQ(States(images_[2]), "0,0");
  for (int i = 0; i < kEnqueueImages; ++i) {
    if (i == 2) continue;
    EXPECT_EQ(States(images_[i]), "2,2") << images_[i];
  }
  EXPECT_EQ(States(media_ + "/sub/clip.avi"), "2,4");
  // The old results described the old picture: gone; the others stay.
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM results"), 2 * kEnqueueImages - 1);
}

TEST_F(EnqueueTest, TouchedButUnchangedFileIsNotRequeued) {
  MakeMediaDir();
  ASSERT_TRUE(Enqueue({media_}).ok());
  CompleteAll();
  ShiftMtime(images_[4], std::chrono::seconds(7));  // same bytes, new mtime

  EnqueueProgress last;
  auto r = Enqueue({media_}, &last);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(last.to_read, 3);  // re-read, since its mtime moved...
  EXPECT_EQ(r->stats.items_changed, 0);  // ...but the hash is the same
  EXPECT_EQ(r->stats.items_unchanged, kEnqueueImages + 1);
  EXPECT_EQ(r->stats.jobs_requeued, 0);
  EXPECT_EQ(States(images_[4]), "2,2");
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM results"), 2 * kEnqueueImages + 1);

  // The new mtime was recorded, so the next enqueue does not read it again.
  auto again = Enqueue({media_}, &last);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(last.to_read, 2);
}

TEST_F(EnqueueTest, KindComesFromContentNotFromTheName) {
  const std::string d = dir_ / "named";
  fs::create_directories(d);
  fs::copy_file(SampleData("messi5.jpg"), d + "/photo.png");
  fs::copy_file(SampleData("baboon.jpg"), d + "/noext");
  fs::copy_file(SampleData("vtest.avi"), d + "/movie.jpg");
  fs::copy_file(SampleData("fruits.jpg"), d + "/fruits.txt");  // a photo named .txt
  auto r = Enqueue({d});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->media_files, 4);
  EXPECT_TRUE(r->skipped.empty());

  EXPECT_EQ(Item(d + "/photo.png", "kind"), "1");
  EXPECT_EQ(nlohmann::json::parse(Item(d + "/photo.png", "media_info"))["format"], "jpeg");
  EXPECT_EQ(Item(d + "/noext", "kind"), "1");
  EXPECT_EQ(Item(d + "/fruits.txt", "kind"), "1");
  EXPECT_EQ(Item(d + "/movie.jpg", "kind"), "2");
  EXPECT_EQ(nlohmann::json::parse(Item(d + "/movie.jpg", "media_info"))["format"], "avi");
  EXPECT_EQ(States(d + "/movie.jpg"), "0,4");  // a video: "still" does not apply
}

TEST_F(EnqueueTest, TextNamedLikeAnImageIsKeptSoItsJobCanFailWithAReason) {
  const std::string d = dir_ / "liar";
  fs::create_directories(d);
  WriteFile(d + "/holiday.jpg", "These are my holiday notes, not a picture.\n");
  WriteFile(d + "/blank.png", "");
  auto r = Enqueue({d});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->media_files, 2);
  EXPECT_TRUE(r->skipped.empty());
  EXPECT_EQ(Item(d + "/holiday.jpg", "kind"), "1");
  auto info = nlohmann::json::parse(Item(d + "/holiday.jpg", "media_info"));
  EXPECT_TRUE(info["format"].is_null());
  EXPECT_TRUE(info.contains("note"));
  EXPECT_EQ(States(d + "/holiday.jpg"), "0,0");
  EXPECT_EQ(States(d + "/blank.png"), "0,0");
}

TEST_F(EnqueueTest, SingleMediaFileSourceIsOneItem) {
  const std::string f = dir_ / "one.avi";
  fs::copy_file(SampleData("vtest.avi"), f);
  auto r = Enqueue({f});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files_seen, 1);
  EXPECT_EQ(r->media_files, 1);
  EXPECT_EQ(Item(f, "kind"), "2");
}

TEST_F(EnqueueTest, NonexistentSourceIsInvalidArgumentAndAddsNothing) {
  MakeMediaDir();
  auto r = Enqueue({media_, dir_ / "no-such-dir"});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("no-such-dir"), std::string::npos);
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM items"), 0);
}

TEST_F(EnqueueTest, UrlListSourcesAreRefusedAsInvalidArgumentMentioningUrl) {
  WriteFile(dir_ / "urls.txt", "https://example.com/a.jpg\nhttps://example.com/b.jpg\n");
  WriteFile(dir_ / "urls.csv", "url,label\nhttps://example.com/a.jpg,cat\n");
  WriteFile(dir_ / "urls.jsonl", "{\"url\": \"https://example.com/a.jpg\"}\n");
  for (const char* name : {"urls.txt", "urls.csv", "urls.jsonl"}) {
    auto r = Enqueue({dir_ / name});
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_TRUE(r.status().IsInvalidArgument()) << name << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find("URL"), std::string::npos) << r.status().ToString();
  }
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM items"), 0);
}

// 64-byte files that sniff as PNG (signature + IHDR declaring 1x1), distinct by index.
void WriteTinyPngs(const std::string& dir, int n) {
  fs::create_directories(dir);
  std::string bytes("\x89PNG\r\n\x1A\n\x00\x00\x00\x0DIHDR\x00\x00\x00\x01\x00\x00\x00\x01"
                    "\x08\x02\x00\x00\x00",
                    29);
  bytes.resize(64, '\0');
  char name[64];
  for (int i = 0; i < n; ++i) {
    if (i % 1000 == 0) fs::create_directories(dir + "/d" + std::to_string(i / 1000));
    std::snprintf(name, sizeof name, "/d%d/%06d.png", i / 1000, i);
    std::memcpy(&bytes[40], &i, sizeof i);
    std::FILE* f = std::fopen((dir + name).c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
}

// FRAMEMILL_ENQUEUE_SCALE_FILES overrides the count (e.g. 100000 by hand).
int ScaleFiles() {
  const char* e = std::getenv("FRAMEMILL_ENQUEUE_SCALE_FILES");
  return e != nullptr && std::atoi(e) > 0 ? std::atoi(e) : 20'000;
}

TEST_F(EnqueueTest, ScaleManyTinyFilesAreAllEnqueued) {
  const int n = ScaleFiles();
  const std::string d = dir_ / "many";
  WriteTinyPngs(d, n);
  options_.stages = {"look"};

  auto t0 = std::chrono::steady_clock::now();
  auto r = Enqueue({d});
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::printf("[enqueue-100k] %d files enqueued in %.2f s\n", n, secs);

  EXPECT_EQ(r->files_seen, n);
  EXPECT_EQ(r->media_files, n);
  EXPECT_EQ(r->stats.items_added, n);
  EXPECT_EQ(r->stats.jobs_added, n);
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM items"), n);
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM jobs WHERE state = 0"), n);
  EXPECT_EQ(QueryInt(db_, "SELECT count(DISTINCT content_hash) FROM items"), n);
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM items WHERE media_info LIKE '%\"png\"%'"), n);

  // And a second pass reads nothing and adds nothing.
  EnqueueProgress last;
  t0 = std::chrono::steady_clock::now();
  auto again = Enqueue({d}, &last);
  secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  std::printf("[enqueue-100k] re-enqueue of %d unchanged files in %.2f s\n", n, secs);
  EXPECT_EQ(last.to_read, 0);
  EXPECT_EQ(again->stats.items_unchanged, n);
  EXPECT_EQ(again->stats.jobs_added, 0);
}

// URL lists with a graph that has the fetch stage.
class EnqueueUrlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    for (const char* name : {"fetch", "look"}) {
      StageSpec spec;
      spec.name = name;
      spec.downloads = spec.name == "fetch";
      ASSERT_TRUE(graph_.Add(spec, &err)) << err;
    }
    db_ = dir_ / "jobs.db";
    store_ = std::move(OpenSqliteJobStore(db_, &graph_, SystemClock())).value();
    options_.stages = {"look"};
  }
  Result<EnqueueReport> Enqueue(const std::vector<std::string>& sources,
                                std::vector<EnqueueProgress>* seen = nullptr) {
    return EnqueueSources(*store_, sources, options_, [&](const EnqueueProgress& p) {
      if (seen != nullptr) seen->push_back(p);
    });
  }
  TempDir dir_;
  std::string db_;
  StageGraph graph_;
  std::unique_ptr<JobStore> store_;
  EnqueueOptions options_;
};

TEST_F(EnqueueUrlsTest, EveryFormAddsUrlItemsOnceAndCountsRejectedLines) {
  WriteFile(dir_ / "a.txt", "http://h/1.jpg\nftp://h/x.jpg\nhttp://h/2.jpg\n");
  WriteFile(dir_ / "b.csv", "url,label\nhttp://h/2.jpg,dup\nhttps://h/3.png,cat\nbroken\n");
  WriteFile(dir_ / "c.jsonl", "{\"url\":\"http://h/4.gif\",\"k\":1}\n{oops\n");
  auto r = Enqueue({dir_ / "a.txt", dir_ / "b.csv", dir_ / "c.jsonl"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->url_lists, 3);
  EXPECT_EQ(r->urls_seen, 5);
  EXPECT_EQ(r->stats.items_added, 4);
  EXPECT_EQ(r->stats.items_unchanged, 1);  // 2.jpg listed twice
  EXPECT_EQ(r->stats.jobs_added, 8);        // fetch + look per URL
  int64_t rejected = 0;
  for (const auto& [reason, n] : r->urls_rejected) rejected += n;
  EXPECT_EQ(rejected, 3);
  ASSERT_EQ(r->rejected_examples.size(), 3u);
  EXPECT_EQ(r->rejected_examples[0], dir_ / "a.txt" + ":2: not an http(s) URL");
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM items WHERE is_url = 1"), 4);
  EXPECT_EQ(QueryRows(db_, "SELECT metadata FROM items WHERE source = 'https://h/3.png'"),
            std::vector<std::string>{R"({"label":"cat"})"});
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM jobs WHERE stage = 'fetch' AND state = 0"), 4);
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM jobs WHERE stage = 'look' AND state = 5"), 4);

  auto again = Enqueue({dir_ / "a.txt", dir_ / "b.csv", dir_ / "c.jsonl"});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->stats.items_added, 0);
  EXPECT_EQ(again->stats.jobs_added, 0);
  EXPECT_EQ(QueryInt(db_, "SELECT count(*) FROM jobs"), 8);
}

TEST_F(EnqueueUrlsTest, ManyUrlsGoInBulkWithProgressAndStayIdempotent) {
  constexpr int kUrls = 25'000;
  std::string list;
  for (int i = 0; i < kUrls; ++i) list += "https://img.example/" + std::to_string(i) + ".jpg\n";
  WriteFile(dir_ / "many.txt", list);
  std::vector<EnqueueProgress> seen;
  auto t0 = std::chrono::steady_clock::now();
  auto r = Enqueue({dir_ / "many.txt"}, &seen);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stats.items_added, kUrls);
  // Progress after each 10k transaction, then done.
  ASSERT_GE(seen.size(), 3u);
  EXPECT_EQ(seen.back().urls_read, kUrls);
  EXPECT_EQ(seen.back().items_written, kUrls);
  EXPECT_TRUE(seen.back().done);
  std::printf("enqueued %d URLs in %.2f s (%.0f/s)\n", kUrls, s, kUrls / s);
  auto again = Enqueue({dir_ / "many.txt"});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->stats.items_added, 0);
  EXPECT_EQ(again->stats.items_unchanged, kUrls);
}

}  // namespace
}  // namespace framemill::testing
