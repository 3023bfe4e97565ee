// face_clusters' own logic on synthetic faces: parsing the faces results, linking video
// faces into tracks, clustering with stable ids across runs.
#include "stages/face_clusters_stage.h"

#include <gtest/gtest.h>

#include <random>

namespace framemill {
namespace {

// The computation lives in cluster/identities.h; the stage reads, ids and writes.
using cluster::FaceRef;
using cluster::LinkTracks;
using cluster::SeparateCoOccurring;

// Identity centres in 64 dimensions; a face of identity p is its centre plus noise.
class Faces {
 public:
  Faces(int people, unsigned seed) : rng_(seed) {
    std::normal_distribution<float> g(0, 1);
    centres_.resize(people, std::vector<float>(64));
    for (auto& c : centres_)
      for (float& v : c) v = g(rng_) / 8;
  }
  std::vector<float> Of(int person) {
    std::normal_distribution<float> g(0, 1);
    std::vector<float> v = centres_[person];
    for (float& x : v) x += 0.5f * g(rng_) / 8;
    return v;
  }

 private:
  std::mt19937 rng_;
  std::vector<std::vector<float>> centres_;
};

FaceRef Face(const std::string& item, int64_t frame, int face, std::vector<float> emb,
             float x = 10) {
  FaceRef f;
  f.item = item;
  f.frame = frame;
  f.face = face;
  f.box[0] = x;
  f.box[1] = 10;
  f.box[2] = x + 50;
  f.box[3] = 60;
  f.embedding = std::move(emb);
  return f;
}

TEST(FaceClustersTest, ParsesImageAndVideoResultsAndRefusesMalformedOnes) {
  std::vector<FaceRef> faces;
  ASSERT_TRUE(ParseFacesResult("a.jpg", R"({"faces":[{"box":[1,2,3,4],"embedding":[0.5,1]}]})", &faces).ok());
  ASSERT_TRUE(ParseFacesResult("v.mp4", R"({"frames":[{"frame":7,"faces":[]},
      {"frame":9,"faces":[{"box":[1,2,3,4],"embedding":[1,0]},{"box":[5,6,7,8],"embedding":[0,1]}]}]})",
                               &faces).ok());
  ASSERT_EQ(faces.size(), 3u);
  EXPECT_EQ(faces[0].frame, -1);
  EXPECT_EQ(faces[2].item, "v.mp4");
  EXPECT_EQ(faces[2].frame, 9);
  EXPECT_EQ(faces[2].face, 1);
  EXPECT_FLOAT_EQ(faces[2].box[3], 8);
  for (const char* bad : {"not json", "[]", R"({"faces":3})", R"({"faces":[{"box":[1,2,3]}]})",
                          R"({"faces":[{"box":[1,2,3,4],"embedding":["x"]}]})", R"({"other":1})"}) {
    std::vector<FaceRef> none;
    EXPECT_EQ(ParseFacesResult("b.jpg", bad, &none).code(), Status::Code::kCorruption) << bad;
    EXPECT_TRUE(none.empty()) << bad;
  }
}

TEST(FaceClustersTest, VideoFacesLinkIntoTracksByOverlapAndLikeness) {
  Faces p(2, 5);
  // Frames 0, 30, 60: person 0 stays left, person 1 right; in frame 60 person 1 moved
  // far (no overlap): a new track.
  std::vector<FaceRef> faces = {Face("v", 0, 0, p.Of(0), 10),   Face("v", 0, 1, p.Of(1), 200),
                                Face("v", 30, 0, p.Of(1), 205), Face("v", 30, 1, p.Of(0), 12),
                                Face("v", 60, 0, p.Of(0), 14),  Face("v", 60, 1, p.Of(1), 400)};
  FaceClustersOptions o;
  auto tracks = LinkTracks(faces, o);
  ASSERT_EQ(tracks.size(), 3u);
  EXPECT_EQ(tracks[0], (std::vector<size_t>{0, 3, 4}));
  EXPECT_EQ(tracks[1], (std::vector<size_t>{1, 2}));
  EXPECT_EQ(tracks[2], (std::vector<size_t>{5}));
  // Images never link, however alike.
  std::vector<FaceRef> stills = {Face("a", -1, 0, p.Of(0)), Face("a", -1, 1, p.Of(0))};
  EXPECT_EQ(LinkTracks(stills, o).size(), 2u);
}

TEST(FaceClustersTest, ClustersPeopleAndKeepsIdsWhenNewItemsArrive) {
  Faces p(3, 5);
  std::vector<FaceRef> faces;
  for (int i = 0; i < 8; ++i)
    for (int person = 0; person < 3; ++person)
      faces.push_back(Face("img" + std::to_string(i) + ".jpg", -1, person, p.Of(person)));
  faces.push_back(Face("stranger.jpg", -1, 0, Faces(1, 99).Of(0)));
  FaceClustersStage stage({});
  auto first = stage.Cluster(faces, nullptr, nullptr);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const nlohmann::json& r = *first;
  ASSERT_EQ(r["clusters"].size(), 3u) << r.dump();
  EXPECT_EQ(r["noise"].size(), 1u);
  EXPECT_EQ(r["noise"][0]["item"], "stranger.jpg");
  EXPECT_FALSE(r["noise"][0].contains("frame"));
  for (const auto& c : r["clusters"]) {
    EXPECT_EQ(c["size"], 8);
    const int face = c["members"][0]["face"];
    for (const auto& m : c["members"]) EXPECT_EQ(m["face"], face) << "one person per cluster";
    EXPECT_EQ(c["representative"]["face"], face);
  }
  EXPECT_EQ(r["next_id"], 4);

  // New photos of person 2 and a new person 3 arrive: old ids stay, the newcomer gets 4.
  std::vector<FaceRef> more = faces;
  for (int i = 8; i < 12; ++i) more.push_back(Face("img" + std::to_string(i) + ".jpg", -1, 2, p.Of(2)));
  Faces newcomer(1, 7);
  for (int i = 0; i < 5; ++i) more.push_back(Face("new" + std::to_string(i) + ".jpg", -1, 0, newcomer.Of(0)));
  auto second = stage.Cluster(more, &*first, nullptr);
  ASSERT_TRUE(second.ok());
  std::map<int, int64_t> id_of_person;  // by the face index the person has in img*.jpg
  for (const auto& c : r["clusters"]) id_of_person[c["members"][0]["face"]] = c["id"];
  ASSERT_EQ((*second)["clusters"].size(), 4u) << second->dump();
  for (const auto& c : (*second)["clusters"]) {
    const std::string item = c["members"][0]["item"];
    if (item.rfind("new", 0) == 0) {
      EXPECT_EQ(c["id"], 4);
      EXPECT_EQ(c["size"], 5) << c.dump();
    } else {
      EXPECT_EQ(c["id"], id_of_person[c["members"][0]["face"]]);
    }
  }
  EXPECT_TRUE((*second)["merges"].empty());
  EXPECT_TRUE((*second)["splits"].empty());
  EXPECT_EQ((*second)["next_id"], 5);
}

// A crowd of look-alikes (small grey faces whose embeddings are as close as one person's):
// without the rule they form one identity. Faces seen together in one picture are different
// people, so no cluster may hold two of them; the person photographed alone in eight pictures
// stays one identity of eight.
TEST(FaceClustersTest, FacesSeenTogetherInOnePictureNeverShareACluster) {
  Faces p(2, 11);
  std::vector<FaceRef> faces;
  for (int k = 0; k < 12; ++k)
    faces.push_back(Face("crowd.jpg", -1, k, p.Of(0), 10.f + 60.f * k));
  for (int i = 0; i < 8; ++i) faces.push_back(Face("alone" + std::to_string(i) + ".jpg", -1, 0, p.Of(1)));
  FaceClustersStage stage({});
  auto r = stage.Cluster(faces, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const auto& c : (*r)["clusters"]) {
    int from_crowd = 0;
    for (const auto& m : c["members"]) from_crowd += m["item"] == "crowd.jpg";
    EXPECT_LE(from_crowd, 1) << c.dump();
  }
  ASSERT_EQ((*r)["clusters"].size(), 1u) << r->dump();
  EXPECT_EQ((*r)["clusters"][0]["size"], 8);
  EXPECT_EQ((*r)["noise"].size(), 12u) << "eleven of the crowd have no second picture";
}

// The rule is by frame in a video: two tracks that overlap in time are two people, tracks
// seen one after the other may be one.
TEST(FaceClustersTest, SeparateCoOccurringKeepsTheClosestTrackOfEachFrame) {
  std::vector<FaceRef> faces = {Face("v.mp4", 0, 0, {1, 0}), Face("v.mp4", 0, 1, {0.9f, 0.1f}),
                                Face("v.mp4", 5, 0, {1, 0.05f}), Face("a.jpg", -1, 0, {1, 0})};
  const std::vector<std::vector<size_t>> tracks = {{0}, {1}, {2}, {3}};
  cluster::Embeddings e;
  e.n = 4;
  e.dim = 2;
  for (const FaceRef& f : faces) e.data.insert(e.data.end(), f.embedding.begin(), f.embedding.end());
  cluster::Normalize(&e);
  const std::vector<int> label = SeparateCoOccurring(faces, tracks, e, {0, 0, 0, 0}, 3);
  EXPECT_EQ(label, (std::vector<int>{0, -1, 0, 0})) << "track 1 shares frame 0 with track 0";
  EXPECT_EQ(SeparateCoOccurring(faces, tracks, e, {0, 0, 0, 0}, 4), (std::vector<int>(4, -1)))
      << "three tracks left: fewer than min_cluster_size 4";
}

// A face too poor to identify never founds an identity: three alike poor faces stay
// noise; beside three good faces of the same person they join them; a poor stranger stays out.
TEST(FaceClustersTest, PoorFacesNeverSeedButJoinAnIdentityTheyMatch) {
  Faces p(2, 31);
  std::vector<FaceRef> poor;
  for (int i = 0; i < 3; ++i) {
    poor.push_back(Face("poor" + std::to_string(i) + ".jpg", -1, 0, p.Of(0)));
    poor.back().quality = 0.1f;
  }
  FaceClustersOptions o;
  o.seed_quality = 0.3;
  auto alone = FaceClustersStage(o).Cluster(poor, nullptr, nullptr);
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ((*alone)["clusters"].size(), 0u) << alone->dump();
  EXPECT_EQ((*alone)["noise"].size(), 3u);
  EXPECT_EQ((*alone)["seeds"], 0);

  std::vector<FaceRef> faces = poor;
  for (int i = 0; i < 3; ++i) faces.push_back(Face("good" + std::to_string(i) + ".jpg", -1, 0, p.Of(0)));
  faces.push_back(Face("stranger.jpg", -1, 0, p.Of(1)));
  faces.back().quality = 0.1f;
  auto mixed = FaceClustersStage(o).Cluster(faces, nullptr, nullptr);
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  ASSERT_EQ((*mixed)["clusters"].size(), 1u) << mixed->dump();
  EXPECT_EQ((*mixed)["clusters"][0]["size"], 6) << "three seeds and the three poor faces of the same person";
  EXPECT_EQ((*mixed)["seeds"], 3);
  ASSERT_EQ((*mixed)["noise"].size(), 1u);
  EXPECT_EQ((*mixed)["noise"][0]["item"], "stranger.jpg");
  // With no cut (seed_quality 0) the poor faces found an identity of their own.
  o.seed_quality = 0;
  auto all = FaceClustersStage(o).Cluster(poor, nullptr, nullptr);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)["clusters"].size(), 1u) << all->dump();
}

TEST(FaceClustersTest, QualityIsReadFromTheFacesResultAndDefaultsToGood) {
  std::vector<FaceRef> faces;
  ASSERT_TRUE(ParseFacesResult("a.jpg", R"({"faces":[{"box":[1,2,3,4],"embedding":[1,0],"quality":0.2},
      {"box":[1,2,3,4],"embedding":[0,1]}]})", &faces).ok());
  ASSERT_EQ(faces.size(), 2u);
  EXPECT_FLOAT_EQ(faces[0].quality, 0.2f);
  EXPECT_FLOAT_EQ(faces[1].quality, 1.0f) << "results written before quality existed still seed";
}

TEST(FaceClustersTest, EmbeddingsOfDifferentSizesAreAClearError) {
  std::vector<FaceRef> faces = {Face("a", -1, 0, std::vector<float>(64, 1.f)),
                                Face("b", -1, 0, std::vector<float>(192, 1.f))};
  auto r = FaceClustersStage({}).Cluster(faces, nullptr, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("different embedding models"), std::string::npos);
  auto none = FaceClustersStage({}).Cluster({}, nullptr, nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE((*none)["clusters"].empty());
}

}  // namespace
}  // namespace framemill
