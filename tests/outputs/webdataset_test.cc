// The WebDataset shards read back with libarchive and GNU tar: members named <key>.<ext>
// and <key>.json, grouped as the webdataset package groups them (the basename up to its
// first dot), the media byte for byte, every result as export gives it; files that went
// away left out and named; an earlier export's extra shards removed; a write that fails
// leaves no shard behind.
#include "outputs/webdataset.h"

#include <archive.h>
#include <archive_entry.h>
#include <signal.h>
#include <xxhash.h>
#include <sys/resource.h>

#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "outputs/result_json.h"
#include "tests/outputs/outputs_test_util.h"

namespace framemill::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Members of a tar file in order, name -> bytes.
std::vector<std::pair<std::string, std::string>> ReadTar(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  EXPECT_EQ(archive_read_open_filename(a, path.c_str(), 1 << 16), ARCHIVE_OK) << path;
  archive_entry* e;
  while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
    std::string bytes(static_cast<size_t>(archive_entry_size(e)), '\0');
    if (!bytes.empty()) {
      EXPECT_EQ(archive_read_data(a, bytes.data(), bytes.size()), static_cast<la_ssize_t>(bytes.size()));
    }
    out.push_back({archive_entry_pathname(e), bytes});
  }
  archive_read_free(a);
  return out;
}

std::vector<std::string> Shards(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class WebDatasetTest : public PhotoStoreTest {
 protected:
  void SetUp() override {
    MakeStore(5, 160);
    rs_->Enqueue(paths_, {"lighting", "faces"});
    int n = 0;
    rs_->Finish("lighting", [&](const ClaimedJob& j) {
      Outcome o = Outcome::Done({{"exposure_ev", 0.5 * n++}, {"name", j.source}});
      o.artifacts = {"/out/lighting/" + std::to_string(j.item_id) + ".csv"};
      return o;
    });
    rs_->Finish("faces", [&](const ClaimedJob& j) {
      if (j.source == paths_[1]) return Outcome::Failed(Status::Corruption("truncated JPEG"), "decode");
      return Outcome::Done({{"count", 1}, {"faces", {{{"box", {1, 2, 30, 40}}}}}});
    });
  }
  std::map<std::string, std::string> Results(const std::string& stage) {
    std::map<std::string, std::string> out;  // source -> DoneResultJson dump
    EXPECT_TRUE(rs_->store().ForEachResult(stage, [&](const ExportRow& r) {
      out[r.source] = DoneResultJson(r.device, r.attempts, r.result_json, r.artifacts_json).dump();
      return Status::OK();
    }).ok());
    return out;
  }
  WebDatasetStats Export(int64_t shard_size, const std::string& dir = "") {
    WebDatasetOptions o;
    o.dir = dir.empty() ? dir_ / "wds" : dir;
    o.shard_size = shard_size;
    auto s = WriteWebDataset(rs_->store(), o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : WebDatasetStats{};
  }

};

TEST_F(WebDatasetTest, EachItemIsItsMediaAndItsResultsUnderItsContentHash) {
  WebDatasetStats s = Export(2);
  EXPECT_EQ(s.items, 5);
  EXPECT_EQ(s.shards, 3);
  EXPECT_TRUE(s.left_out.empty());
  EXPECT_EQ(Shards(dir_ / "wds"),
            (std::vector<std::string>{"shard-000000.tar", "shard-000001.tar", "shard-000002.tar"}));
  const auto lighting = Results("lighting");
  const auto faces = Results("faces");
  std::map<std::string, std::string> by_hash;
  for (const auto& p : paths_) by_hash[ContentHash(p)] = p;
  std::set<std::string> keys;
  for (const auto& shard : Shards(dir_ / "wds")) {
    auto members = ReadTar(dir_ / ("wds/" + shard));
    ASSERT_EQ(members.size() % 2, 0u) << shard;
    EXPECT_LE(members.size(), 4u);
    for (size_t i = 0; i < members.size(); i += 2) {
      // webdataset's grouping: the key is the basename up to the first dot.
      const std::string& media = members[i].first;
      const std::string& meta = members[i + 1].first;
      const std::string key = media.substr(0, media.find('.'));
      ASSERT_EQ(meta, key + ".json");
      ASSERT_TRUE(by_hash.count(key)) << key;
      keys.insert(key);
      const std::string source = by_hash[key];
      EXPECT_EQ(media.substr(media.find('.') + 1), source.ends_with(".png") ? "png" : "jpg");
      EXPECT_EQ(members[i].second, ReadFile(source)) << "media bytes of " << source;
      json j = json::parse(members[i + 1].second);
      EXPECT_EQ(j["key"], key);
      EXPECT_EQ(j["item"], source);
      EXPECT_EQ(j["kind"], "image");
      EXPECT_EQ(j["results"]["lighting"].dump(), lighting.at(source));
      EXPECT_EQ(j["states"]["lighting"], "done");
      if (source == paths_[1]) {
        EXPECT_FALSE(j["results"].contains("faces"));
        EXPECT_EQ(j["states"]["faces"], "failed");
        EXPECT_EQ(j["reasons"]["faces"]["class"], "decode");
        EXPECT_NE(j["reasons"]["faces"]["message"].get<std::string>().find("truncated JPEG"), std::string::npos);
      } else {
        EXPECT_EQ(j["results"]["faces"].dump(), faces.at(source));
      }
    }
  }
  EXPECT_EQ(keys.size(), 5u);
  // GNU tar reads them too.
  auto tar = RunProcess({"/bin/tar", "-tf", dir_ / "wds/shard-000002.tar"});
  ASSERT_EQ(tar.exit_code, 0) << tar.err;
  EXPECT_EQ(std::count(tar.out.begin(), tar.out.end(), '\n'), 2);
}

TEST_F(WebDatasetTest, AFileThatWentAwayOrChangedIsLeftOutAndNamed) {
  fs::remove(paths_[0]);
  WriteFile(paths_[2], ReadFile(paths_[3]) + "more bytes");
  WebDatasetStats s = Export(10);
  EXPECT_EQ(s.items, 3);
  ASSERT_EQ(s.left_out.size(), 2u);
  EXPECT_EQ(s.left_out[0].rfind(paths_[0] + ": cannot open", 0), 0u) << s.left_out[0];
  EXPECT_NE(s.left_out[1].find("changed since it was analysed"), std::string::npos) << s.left_out[1];
  EXPECT_EQ(ReadTar(dir_ / "wds/shard-000000.tar").size(), 6u);
}

TEST_F(WebDatasetTest, TheSameContentTwiceKeepsTwoKeys) {
  const std::string copy = dir_ / "media/copy.bin";
  fs::copy_file(paths_[0], copy);
  rs_->Enqueue({copy}, {"lighting"});
  WebDatasetStats s = Export(100);
  EXPECT_EQ(s.items, 6);
  EXPECT_EQ(s.duplicates, 1);
  std::set<std::string> keys;
  for (const auto& [name, bytes] : ReadTar(dir_ / "wds/shard-000000.tar")) keys.insert(name.substr(0, name.find('.')));
  EXPECT_EQ(keys.size(), 6u);
  EXPECT_TRUE(keys.count(ContentHash(paths_[0])));
}

TEST_F(WebDatasetTest, AShorterExportRemovesTheShardsAndTemporariesOfAnEarlierOne) {
  EXPECT_EQ(Export(1).shards, 5);
  WriteFile(dir_ / "wds/.shard-000007.tar.tmp", "half a shard");
  WriteFile(dir_ / "wds/notes.txt", "the user's");
  WebDatasetStats s = Export(3);
  EXPECT_EQ(s.shards, 2);
  EXPECT_EQ(s.stale_removed, 3);
  EXPECT_EQ(Shards(dir_ / "wds"), (std::vector<std::string>{"notes.txt", "shard-000000.tar", "shard-000001.tar"}));
}

// A write that fails (here the file size limit, as a full disk would) is an error naming
// the file, and leaves neither a half shard nor its temporary behind.
TEST_F(WebDatasetTest, AFailedWriteLeavesNoHalfShard) {
  const std::string out = dir_ / "small";
  const int rc = RunInChild(
      [&] {
        ::signal(SIGXFSZ, SIG_IGN);
        rlimit limit{20'000, 20'000};
        ::setrlimit(RLIMIT_FSIZE, &limit);
        WebDatasetOptions o;
        o.dir = out;
        o.shard_size = 100;
        auto s = WriteWebDataset(rs_->store(), o);
        if (s.ok()) return 10;
        return s.status().code() == Status::Code::kIOError && s.status().message().find(".shard-000000.tar.tmp") != std::string::npos ? 0 : 11;
      },
      60);
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(Shards(out).empty()) << Shards(out).front();
}

// A URL item's media is the file its download wrote, whose content hash the fetcher made
// (xxh3-128, not enqueue's xxh3-64): the shard holds it, under that hash as its key.
TEST(WebDatasetUrlTest, AFetchedUrlItemIsWrittenFromItsDownloadedFile) {
  TempDir dir;
  const std::string file = MakeRealImages(dir / "fetched", 1, 120)[0];
  const std::string bytes = ReadFile(file);
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, XXH3_128bits(bytes.data(), bytes.size()));
  std::string hash;
  for (unsigned char b : c.digest) hash += "0123456789abcdef"[b >> 4], hash += "0123456789abcdef"[b & 15];
  StageGraph graph;
  std::string err;
  StageSpec fetch;
  fetch.name = "fetch";
  fetch.downloads = true;
  ASSERT_TRUE(graph.Add(fetch, &err)) << err;
  auto store = OpenJobStore(dir / "fm.db", &graph, SystemClock());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  NewItem url;
  url.source = "http://example.test/a.jpg";
  url.is_url = true;
  EnqueueOptions o;
  o.stages = {"fetch"};
  ASSERT_TRUE((*store)->Enqueue({url}, o).ok());
  auto jobs = (*store)->Claim("w", {"fetch"}, 1, 60'000);
  ASSERT_TRUE(jobs.ok() && jobs->size() == 1u);
  Outcome done = Outcome::Done({{"content_hash", hash}});
  done.fetched = FetchedFile{file, MediaKind::kImage, hash, static_cast<int64_t>(bytes.size()), {{"format", "jpeg"}}};
  ASSERT_TRUE((*store)->Complete({FinishedJob((*jobs)[0].id, (*jobs)[0].lease_token, done)}).ok());

  WebDatasetOptions w;
  w.dir = dir / "wds";
  auto s = WriteWebDataset(**store, w);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->left_out.empty()) << s->left_out.front();
  ASSERT_EQ(s->items, 1);
  auto members = ReadTar(dir / "wds/shard-000000.tar");
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].first, hash + ".jpg");
  EXPECT_EQ(members[0].second, bytes);
  EXPECT_EQ(json::parse(members[1].second)["item"], url.source);
}

TEST_F(WebDatasetTest, BadOptionsAreRefused) {
  WebDatasetOptions o;
  o.dir = dir_ / "wds";
  o.shard_size = 0;
  EXPECT_TRUE(WriteWebDataset(rs_->store(), o).status().IsInvalidArgument());
  WriteFile(dir_ / "file", "x");
  o.dir = dir_ / "file";
  o.shard_size = 1;
  EXPECT_TRUE(WriteWebDataset(rs_->store(), o).status().IsInvalidArgument());
}

}  // namespace
}  // namespace framemill::testing
