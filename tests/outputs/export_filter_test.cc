// export's filters (outputs/export_filter.h) on results shaped as categorize and faces write
// them: each filter alone at its boundaries, their combination with --unique, and the same
// choice from a real SQLite store and a real PostgreSQL one.
#include "outputs/export_filter.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "storage/migrations.h"
#include "tests/outputs/outputs_test_util.h"
#include "tests/support/pg_server.h"

namespace framemill::testing {
namespace {

using nlohmann::json;

// An image's categorize result: shown labels, content type, unsafe score.
json Categorize(std::vector<std::string> labels, const std::string& content, double unsafe) {
  json categories = json::array();
  for (const auto& l : labels) categories.push_back({{"label", l}, {"score", 0.8}, {"count", 1}});
  return {{"objects", json::array()},
          {"categories", categories},
          {"content", {{"type", content}, {"p", 0.9}}},
          {"nsfw", {{"drawing", 0.0}, {"hentai", 0.0}, {"neutral", 1 - unsafe}, {"porn", unsafe},
                    {"sexy", 0.0}, {"unsafe", unsafe}}}};
}

json Faces(int count) { return {{"count", count}, {"faces", json::array()}}; }

ExportFilter Filter(std::vector<std::string> labels = {}, std::vector<std::string> no_labels = {}) {
  ExportFilter f;
  f.labels = std::move(labels);
  f.no_labels = std::move(no_labels);
  return f;
}

TEST(ExportFilterTest, LabelsAreAnyOfAndNoneOfTheShownOnes) {
  const json dog_ball = Categorize({"dog", "sports ball"}, "photo", 0);
  const json cat = Categorize({"cat"}, "photo", 0);
  const json nothing = Categorize({}, "photo", 0);
  ExportFilter any = Filter({"dog", "cat"});
  EXPECT_TRUE(Passes(any, &dog_ball, nullptr));
  EXPECT_TRUE(Passes(any, &cat, nullptr));
  EXPECT_FALSE(Passes(any, &nothing, nullptr));
  ExportFilter none = Filter({}, {"sports ball"});
  EXPECT_FALSE(Passes(none, &dog_ball, nullptr));
  EXPECT_TRUE(Passes(none, &cat, nullptr));
  EXPECT_TRUE(Passes(none, &nothing, nullptr));
  ExportFilter both = Filter({"dog", "cat"}, {"sports ball"});
  EXPECT_FALSE(Passes(both, &dog_ball, nullptr));
  EXPECT_TRUE(Passes(both, &cat, nullptr));
  // Objects below the shown threshold are in `objects`, not `categories`: not a shown label.
  json weak = nothing;
  weak["objects"].push_back({{"label", "dog"}, {"score", 0.2}, {"box", {0, 0, 1, 1}}, {"below_threshold", true}});
  EXPECT_FALSE(Passes(any, &weak, nullptr));
  // A video's categories carry frames instead of a count; the labels are read the same way.
  json video = {{"categories", {{{"label", "cat"}, {"score", 0.7}, {"frames", {0, 12}}}}}};
  EXPECT_TRUE(Passes(any, &video, nullptr));
}

TEST(ExportFilterTest, ContentAndSafetyUseTheSharedThreshold) {
  const json photo = Categorize({}, "photo", 0.0);
  const json drawing = Categorize({}, "drawing", 0.0);
  ExportFilter content;
  content.content = "drawing";
  EXPECT_FALSE(Passes(content, &photo, nullptr));
  EXPECT_TRUE(Passes(content, &drawing, nullptr));

  ExportFilter safe, unsafe;
  safe.safety = ExportFilter::Safety::kSafe;
  unsafe.safety = ExportFilter::Safety::kUnsafe;
  EXPECT_DOUBLE_EQ(safe.unsafe.threshold, 0.9) << "the measured default (bench/README \"NSFW threshold\")";
  const json at = Categorize({}, "photo", 0.9), below = Categorize({}, "photo", 0.8999);
  EXPECT_TRUE(Passes(unsafe, &at, nullptr));  // at the threshold: unsafe, as the report blurs it
  EXPECT_FALSE(Passes(safe, &at, nullptr));
  EXPECT_TRUE(Passes(safe, &below, nullptr));
  EXPECT_FALSE(Passes(unsafe, &below, nullptr));
  safe.unsafe.threshold = 0.5;  // nsfw.unsafe_threshold moves both
  EXPECT_FALSE(Passes(safe, &below, nullptr));
  // A result without nsfw figures is neither safe nor unsafe.
  json bare = photo;
  bare.erase("nsfw");
  EXPECT_FALSE(Passes(safe, &bare, nullptr));
  EXPECT_FALSE(Passes(unsafe, &bare, nullptr));
}

TEST(ExportFilterTest, FacesAreAtLeastNOrNToM) {
  ExportFilter f;
  ASSERT_TRUE(ParseFaceCount("2", &f).ok());
  EXPECT_EQ(f.min_faces, 2);
  EXPECT_EQ(f.max_faces, -1);
  const json none = Faces(0), two = Faces(2), thirty = Faces(30);
  EXPECT_FALSE(Passes(f, nullptr, &none));
  EXPECT_TRUE(Passes(f, nullptr, &two));
  EXPECT_TRUE(Passes(f, nullptr, &thirty));
  ASSERT_TRUE(ParseFaceCount("0-2", &f).ok());
  EXPECT_TRUE(Passes(f, nullptr, &none));
  EXPECT_TRUE(Passes(f, nullptr, &two));
  EXPECT_FALSE(Passes(f, nullptr, &thirty));
  ASSERT_TRUE(ParseFaceCount("0", &f).ok());
  EXPECT_TRUE(Passes(f, nullptr, &none));
  EXPECT_FALSE(Passes(f, nullptr, nullptr)) << "faces not done: left out";
  // A video: the most faces in one sampled frame.
  const json video = {{"max_faces", 3}, {"unverified", 0}, {"frames", json::array()}};
  ASSERT_TRUE(ParseFaceCount("3-3", &f).ok());
  EXPECT_TRUE(Passes(f, nullptr, &video));
  for (const char* bad : {"", "-", "1-", "-2", "3-1", "a", "1.5", "2-x", " 1", "1-2-3"}) {
    ExportFilter g;
    const Status s = ParseFaceCount(bad, &g);
    EXPECT_TRUE(s.IsInvalidArgument()) << "'" << bad << "'";
    EXPECT_NE(s.message().find("--faces"), std::string::npos) << s.message();
  }
}

TEST(ExportFilterTest, ANeededResultThatIsMissingLeavesTheItemOut) {
  const json cat = Categorize({"cat"}, "photo", 0);
  ExportFilter f = Filter({"cat"});
  EXPECT_FALSE(Passes(f, nullptr, nullptr));
  ASSERT_TRUE(ParseFaceCount("1", &f).ok());
  EXPECT_FALSE(Passes(f, &cat, nullptr)) << "both filters apply";
  const json one = Faces(1);
  EXPECT_TRUE(Passes(f, &cat, &one));
  EXPECT_TRUE(Passes(ExportFilter{}, nullptr, nullptr)) << "no filter: every item";
}

// The same selection from both engines' stores: categorize, faces and dedup results of five
// real photos, filtered with --unique.
class ItemSelectionTest : public ::testing::TestWithParam<SqlDialect> {
 protected:
  std::string NewDatabase() {
    if (GetParam() == SqlDialect::kSqlite) return dir_ / "fm.db";
    std::string why;
    PgServer* pg = PgServer::Shared(&why);
    if (pg == nullptr) {
      ADD_FAILURE() << "PostgreSQL: " << why;
      return "postgresql://nowhere.invalid/none";
    }
    return pg->CreateDatabase();
  }
  TempDir dir_;
};

TEST_P(ItemSelectionTest, FiltersAndUniqueChooseTheSameItemsOnBothEngines) {
  const std::vector<std::string> paths = MakeRealImages(dir_ / "media", 5, 96);
  ResultStore rs(NewDatabase());
  rs.Enqueue({paths.begin(), paths.begin() + 4}, {"categorize", "faces", "dedup"});
  rs.Enqueue({paths[4]}, {"faces"});
  // 0: dog, 1 face · 1: dog + cat, 3 faces, a copy of 0 · 2: cat, drawing · 3: unsafe
  // person · 4: not categorized (no result), 2 faces.
  const std::vector<json> categorize = {Categorize({"dog"}, "photo", 0.01), Categorize({"dog", "cat"}, "photo", 0.0),
                                        Categorize({"cat"}, "drawing", 0.0), Categorize({"person"}, "photo", 0.95)};
  const std::vector<int> faces = {1, 3, 0, 1, 2};
  auto index = [&](const ClaimedJob& j) {
    return static_cast<size_t>(std::find(paths.begin(), paths.end(), j.source) - paths.begin());
  };
  rs.Finish("categorize", [&](const ClaimedJob& j) {
    return Outcome::Done(categorize.at(index(j)));
  });
  rs.Finish("faces", [&](const ClaimedJob& j) { return Outcome::Done(Faces(faces[index(j)])); });
  rs.Finish("dedup", [&](const ClaimedJob&) {
    return Outcome::Done({{"groups", {{{"id", 1}, {"representative", {{"item", paths[0]}}},
                                       {"members", {{{"item", paths[1]}, {"similarity", 0.97}}}}}}}});
  });
  auto kept = [&](const ExportFilter& f, bool unique) {
    auto s = ItemSelection::Make(rs.store(), f, unique);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    std::set<size_t> out;
    for (size_t i = 0; s.ok() && i < paths.size(); ++i)
      if (s->Keeps(paths[i])) out.insert(i);
    return out;
  };
  EXPECT_EQ(kept(ExportFilter{}, false), (std::set<size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(kept(ExportFilter{}, true), (std::set<size_t>{0, 2, 3, 4}));
  EXPECT_EQ(kept(Filter({"dog"}), false), (std::set<size_t>{0, 1}));
  EXPECT_EQ(kept(Filter({"dog", "cat"}), true), (std::set<size_t>{0, 2}));
  EXPECT_EQ(kept(Filter({}, {"dog"}), false), (std::set<size_t>{2, 3}));
  ExportFilter drawings;
  drawings.content = "drawing";
  EXPECT_EQ(kept(drawings, false), (std::set<size_t>{2}));
  ExportFilter safe, unsafe;
  safe.safety = ExportFilter::Safety::kSafe;
  unsafe.safety = ExportFilter::Safety::kUnsafe;
  EXPECT_EQ(kept(safe, false), (std::set<size_t>{0, 1, 2}));
  EXPECT_EQ(kept(unsafe, false), (std::set<size_t>{3}));
  ExportFilter crowd;
  ASSERT_TRUE(ParseFaceCount("2", &crowd).ok());
  EXPECT_EQ(kept(crowd, false), (std::set<size_t>{1, 4}));
  crowd.labels = {"cat", "dog"};
  EXPECT_EQ(kept(crowd, false), (std::set<size_t>{1}));
  EXPECT_EQ(kept(crowd, true), (std::set<size_t>{}));
}

INSTANTIATE_TEST_SUITE_P(Engines, ItemSelectionTest, ::testing::Values(SqlDialect::kSqlite, SqlDialect::kPostgres),
                         [](const auto& info) { return info.param == SqlDialect::kSqlite ? "Sqlite" : "Postgres"; });

}  // namespace
}  // namespace framemill::testing
