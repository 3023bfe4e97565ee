// The HTML report over a real store: every page written, the analyses drawn in the
// still's own coordinates (faces coloured by their identity cluster), pictures made once
// and reused, names escaped, paging and --limit, a run in progress shown as such, and an
// item whose file went away shown without a picture rather than failing the report.
// The same report opened in a real browser: tests/integration/report_test.cc.
#include "outputs/report.h"

#include <filesystem>
#include <regex>

#include <gtest/gtest.h>

#include "outputs/pictures.h"
#include "tests/outputs/outputs_test_util.h"

namespace framemill::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

class ReportTest : public PhotoStoreTest {
 protected:
  void SetUp() override {
    MakeStore(4, 200);
  }
  // Lighting on every item; two faces on the first (one in cluster 7), none elsewhere;
  // then the clusters.
  void Analyse() {
    rs_->Enqueue(paths_, {"lighting", "faces", "face_clusters"});
    rs_->Finish("lighting", [](const ClaimedJob&) {
      return Outcome::Done({{"color_temperature_k", 5200}, {"exposure_ev", 0.3}, {"width", 200}, {"height", 150}});
    });
    rs_->Finish("faces", [&](const ClaimedJob& j) {
      json faces = json::array();
      if (j.source == paths_[0])
        faces = {{{"box", {10, 12, 60, 70}}, {"score", 0.9}, {"quality", 0.12}},
                 {{"box", {100, 20, 140, 66}}, {"score", 0.8}, {"quality", 0.83}}};
      return Outcome::Done({{"count", faces.size()}, {"faces", faces}, {"media", {{"width", 200}, {"height", 150}}}});
    });
    rs_->Finish("face_clusters", [&](const ClaimedJob&) {
      json member = {{"item", paths_[0]}, {"face", 1}};
      return Outcome::Done({{"clusters", {{{"id", 7}, {"size", 1}, {"representative", member}, {"members", {member}}}}},
                            {"noise", {{{"item", paths_[0]}, {"face", 0}}}}});
    });
  }
  ReportStats Report(int64_t limit = 0, int page_size = 120) {
    ReportOptions o;
    o.dir = dir_ / "report";
    o.limit = limit;
    o.page_size = page_size;
    auto r = WriteReport(rs_->store(), o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : ReportStats{};
  }
  std::string Page(const std::string& name) { return ReadFile(dir_ / ("report/" + name)); }
  int64_t ItemId(const std::string& source) {
    int64_t id = 0;
    EXPECT_TRUE(rs_->store().ForEachItem([&](const ItemView& v) {
      if (v.source == source) id = v.id;
      return Status::OK();
    }).ok());
    return id;
  }

};

TEST_F(ReportTest, EveryPageIsWrittenWithTheAnalysesDrawnAndPicturesAreMadeOnce) {
  Analyse();
  ReportStats s = Report();
  EXPECT_EQ(s.items, 4);
  EXPECT_EQ(s.item_pages, 4);
  EXPECT_EQ(s.grid_pages, 1);
  EXPECT_EQ(s.clusters, 1);
  EXPECT_EQ(s.problem_count, 0);
  // Two stills per item and one crop per face of the image.
  EXPECT_EQ(s.pictures_made, 4 * 2 + 2);
  for (const char* page : {"index.html", "grid/1.html", "clusters/index.html", "clusters/7.html", "clusters/noise.html",
                           "failures.html", "assets/style.css"})
    EXPECT_TRUE(fs::exists(dir_ / ("report/" + std::string(page)))) << page;

  const std::string grid = Page("grid/1.html");
  EXPECT_EQ(Count(grid, "class=\"card\""), 4);
  EXPECT_EQ(Count(grid, "loading=\"lazy\""), 4);
  // Every picture a page names is there.
  std::regex src("src=\"\\.\\./(assets/[^\"]+)\"");
  for (std::sregex_iterator it(grid.begin(), grid.end(), src), end; it != end; ++it)
    EXPECT_TRUE(fs::exists(dir_ / ("report/" + (*it)[1].str()))) << (*it)[1];

  // The faces in source pixels over the still, the clustered one in its cluster's colour.
  const std::string item = Page("items/" + std::to_string(ItemId(paths_[0])) + ".html");
  EXPECT_NE(item.find("viewBox=\"0 0 200 150\""), std::string::npos);
  EXPECT_NE(item.find("<rect x=\"100.0\" y=\"20.0\" width=\"40.0\" height=\"46.0\""), std::string::npos) << item;
  EXPECT_NE(item.find(">#7</text>"), std::string::npos);
  EXPECT_NE(item.find("href=\"../clusters/7.html\""), std::string::npos);
  EXPECT_NE(item.find("5200 K"), std::string::npos);
  const std::string cluster = Page("clusters/7.html");
  EXPECT_EQ(Count(cluster, "src=\"../assets/faces/"), 1);
  EXPECT_NE(Page("clusters/index.html").find("1 face(s) matched no one"), std::string::npos);
  EXPECT_NE(Page("clusters/index.html").find("href=\"noise.html\""), std::string::npos);
  // Each face with its quality; the noise on a page of its own, with its crop.
  EXPECT_NE(cluster.find("q 0.83"), std::string::npos) << cluster;
  const std::string noise = Page("clusters/noise.html");
  EXPECT_EQ(Count(noise, "src=\"../assets/faces/"), 1) << noise;
  EXPECT_NE(noise.find("q 0.12"), std::string::npos) << noise;
  const std::string index = Page("index.html");
  EXPECT_NE(index.find("<h2>Where the time goes</h2>"), std::string::npos);
  EXPECT_NE(index.find("<div class=\"v\">4</div><div class=\"l\">items</div>"), std::string::npos);
  EXPECT_EQ(index.find("A run is in progress"), std::string::npos);
  EXPECT_LT(s.index_bytes, 100'000);

  // Again: nothing to decode.
  ReportStats again = Report();
  EXPECT_EQ(again.pictures_made, 0);
  EXPECT_EQ(again.pictures_reused, 4 * 2 + 2);
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "report"))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

// categorize's answers on the pages: photo or drawing, the NSFW classes; an unsafe picture
// blurred in the grid and on its page unless asked; objects below the shown threshold not drawn.
TEST_F(ReportTest, ContentAndNsfwAreShownAndUnsafePicturesBlurred) {
  rs_->Enqueue(paths_, {"categorize"});
  rs_->Finish("categorize", [&](const ClaimedJob& j) {
    const bool unsafe = j.source == paths_[0];
    return Outcome::Done(
        {{"categories", json::array()},
         {"objects", {{{"label", "umbrella"}, {"score", 0.38}, {"box", {10, 10, 50, 50}}, {"below_threshold", true}}}},
         {"content", {{"type", unsafe ? "photo" : "drawing"}, {"p", 0.9}}},
         {"nsfw", {{"drawing", 0.0}, {"hentai", 0.1}, {"neutral", unsafe ? 0.0 : 0.9}, {"porn", unsafe ? 0.85 : 0.0},
                   {"sexy", unsafe ? 0.1 : 0.0}, {"unsafe", unsafe ? 0.95 : 0.1}}},
         {"media", {{"width", 200}, {"height", 150}}}});
  });
  Report();
  std::string grid = Page("grid/1.html");
  EXPECT_EQ(Count(grid, "class=\"pic nsfw\""), 1) << grid;
  EXPECT_EQ(Count(grid, ">drawing"), 3) << grid;
  const std::string item = Page("items/" + std::to_string(ItemId(paths_[0])) + ".html");
  EXPECT_NE(item.find("class=\"pic nsfw\""), std::string::npos);
  EXPECT_NE(item.find("<b>Content</b>"), std::string::npos) << item;
  EXPECT_NE(item.find("unsafe (porn + hentai)</td><td class=\"n\">0.950"), std::string::npos) << item;
  EXPECT_NE(item.find("0 (1 more below the shown threshold)"), std::string::npos) << item;
  EXPECT_EQ(item.find("umbrella"), item.rfind("umbrella")) << "drawn over the picture: " << item;  // only in the raw result
  ReportOptions o;
  o.dir = dir_ / "report";
  o.blur_unsafe = false;  // report --show-nsfw
  ASSERT_TRUE(WriteReport(rs_->store(), o).ok());
  EXPECT_EQ(Count(Page("grid/1.html"), "class=\"pic nsfw\""), 0);
}

// dedup's groups: a page of them, each item page naming its group, a card saying which is
// the copy; the two items of a group link to each other.
TEST_F(ReportTest, DuplicateGroupsHaveTheirPageAndEachItemNamesItsGroup) {
  rs_->Enqueue(paths_, {"categorize", "dedup"});
  rs_->Finish("categorize", [](const ClaimedJob&) { return Outcome::Done({{"media", {{"width", 200}, {"height", 150}}}}); });
  rs_->Finish("dedup", [&](const ClaimedJob&) {
    return Outcome::Done({{"groups", {{{"id", 0}, {"representative", {{"item", paths_[0]}}},
                                       {"members", {{{"item", paths_[1]}, {"similarity", 0.93}, {"signal", "embedding"}}}}}}}});
  });
  Report();
  const std::string dups = Page("duplicates.html");
  EXPECT_NE(dups.find("1 group(s), 1 cop(ies)"), std::string::npos) << dups;
  EXPECT_NE(dups.find("embedding, similarity 0.93"), std::string::npos) << dups;
  EXPECT_NE(dups.find("href=\"items/" + std::to_string(ItemId(paths_[1])) + ".html\""), std::string::npos) << dups;
  EXPECT_EQ(Count(dups, "src=\"assets/"), 2) << dups;
  const std::string rep = Page("items/" + std::to_string(ItemId(paths_[0])) + ".html");
  EXPECT_NE(rep.find("href=\"../duplicates.html#g0\">group 0</a>"), std::string::npos) << rep;
  EXPECT_NE(rep.find("the representative of 1 cop(ies): img-1"), std::string::npos) << rep;
  const std::string copy = Page("items/" + std::to_string(ItemId(paths_[1])) + ".html");
  EXPECT_NE(copy.find("a copy of img-0"), std::string::npos) << copy;
  EXPECT_NE(dups.find("id=\"g0\""), std::string::npos);
  const std::string grid = Page("grid/1.html");
  EXPECT_EQ(Count(grid, " · copy<"), 1) << grid;
  EXPECT_EQ(Count(grid, " · 1 copies<"), 1) << grid;
}

TEST_F(ReportTest, NamesFromTheDiskAreEscaped) {
  const std::string odd = dir_ / "media/<b>x&\"q\".jpg";
  fs::copy_file(paths_[0], odd);
  rs_->Enqueue({odd}, {"lighting"});
  rs_->Finish("lighting", [](const ClaimedJob&) { return Outcome::Failed(Status::Corruption("bad <i>bytes</i>"), "decode"); });
  Report();
  const std::string grid = Page("grid/1.html");
  EXPECT_EQ(grid.find("<b>x"), std::string::npos);
  EXPECT_NE(grid.find("&lt;b&gt;x&amp;&quot;q&quot;.jpg"), std::string::npos);
  const std::string failures = Page("failures.html");
  EXPECT_EQ(failures.find("<i>bytes</i>"), std::string::npos);
  EXPECT_NE(failures.find("bad &lt;i&gt;bytes&lt;/i&gt;"), std::string::npos);
  EXPECT_NE(Page("index.html").find("decode"), std::string::npos);
}

TEST_F(ReportTest, LimitAndPagesAndAnEarlierLargerReportsPagesRemoved) {
  Analyse();
  EXPECT_EQ(Report(0, 2).grid_pages, 2);
  ReportStats s = Report(3, 2);
  EXPECT_EQ(s.items, 4);  // counted, not all shown
  EXPECT_EQ(s.item_pages, 3);
  EXPECT_EQ(s.grid_pages, 2);
  EXPECT_EQ(Count(Page("grid/1.html"), "class=\"card\""), 2);
  EXPECT_EQ(Count(Page("grid/2.html"), "class=\"card\""), 1);
  EXPECT_NE(Page("grid/1.html").find("href=\"2.html\">next"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / ("report/items/" + std::to_string(ItemId(paths_[3])) + ".html")));
  ReportStats one = Report(1, 2);
  EXPECT_EQ(one.grid_pages, 1);
  EXPECT_FALSE(fs::exists(dir_ / "report/grid/2.html"));
}

TEST_F(ReportTest, ARunInProgressAndPendingWorkAreShownAsSuch) {
  rs_->Enqueue(paths_, {"lighting"});
  auto run = rs_->store().BeginRun(2, "lighting");
  ASSERT_TRUE(run.ok());
  Report();
  const std::string index = Page("index.html");
  EXPECT_NE(index.find("A run is in progress"), std::string::npos);
  EXPECT_NE(index.find("in progress</span>"), std::string::npos);
  EXPECT_NE(Page("grid/1.html").find("chip pending"), std::string::npos);
  ASSERT_TRUE(rs_->store().EndRun(*run, 0).ok());
  rs_->Finish("lighting", [](const ClaimedJob&) { return Outcome::Done(json::object()); });
  Report();
  EXPECT_EQ(Page("index.html").find("A run is in progress"), std::string::npos);
}

TEST_F(ReportTest, AnItemWhoseFileWentAwayIsShownWithoutAPicture) {
  Analyse();
  fs::remove(paths_[2]);
  ReportStats s = Report();
  EXPECT_EQ(s.item_pages, 4);
  EXPECT_EQ(s.problem_count, 1);
  ASSERT_EQ(s.problems.size(), 1u);
  EXPECT_EQ(s.problems[0].rfind(paths_[2], 0), 0u) << s.problems[0];
  EXPECT_EQ(Count(Page("grid/1.html"), "no picture"), 1);
}

}  // namespace
}  // namespace framemill::testing
