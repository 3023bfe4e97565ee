// The faces stage on real photos with the real BlazeFace and embedding models.
#include "stages/faces_stage.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include <opencv2/imgcodecs.hpp>

#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

using testing::JobFor;
using testing::ModelsDir;

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

models::FaceBox BoxOf(const nlohmann::json& face) {
  models::FaceBox f;
  f.x1 = face["box"][0].get<float>();
  f.y1 = face["box"][1].get<float>();
  f.x2 = face["box"][2].get<float>();
  f.y2 = face["box"][3].get<float>();
  return f;
}

Outcome FacesOf(const std::string& file, FacesOptions c = {}) {
  FacesStage stage(std::make_shared<models::ModelCache>(ModelsDir()), ModelStageOptions{}, c);
  return stage.Run(JobFor("faces", testing::SampleData(file), MediaKind::kImage));
}

TEST(FacesStageTest, FindsFacesInMessiWithUnitLengthEmbeddings) {
  FM_REQUIRE_MODEL("blazeface");
  FM_REQUIRE_MODEL("mobilefacenet");
  FacesOptions c;
  c.embedding_model = "mobilefacenet";
  Outcome out = FacesOf("messi5.jpg", c);
  ASSERT_EQ(out.kind, Outcome::Kind::kDone) << out.error.ToString();
  EXPECT_EQ(out.device, "cpu");
  EXPECT_EQ(out.result["embedding_model"], "mobilefacenet");
  const auto& faces = out.result["faces"];
  ASSERT_GE(faces.size(), 1u) << out.result.dump();
  EXPECT_EQ(out.result["count"], faces.size());
  for (const auto& f : faces) {
    auto e = f["embedding"].get<std::vector<float>>();
    ASSERT_EQ(e.size(), 192u);
    EXPECT_NEAR(Dot(e, e), 1.0, 1e-4);
    EXPECT_GE(f["score"].get<double>(), 0.2);
    const models::FaceBox b = BoxOf(f);
    EXPECT_LT(b.x1, b.x2);
    EXPECT_LT(b.y1, b.y2);
    // The face is small next to the photo, and its eyes lie inside its box.
    EXPECT_LT((b.x2 - b.x1) * (b.y2 - b.y1), 548 * 342 / 4.0);
    for (const char* k : {"right_eye", "left_eye"}) {
      const double x = f["keypoints"][k][0], y = f["keypoints"][k][1];
      EXPECT_GT(x, b.x1);
      EXPECT_LT(x, b.x2);
      EXPECT_GT(y, b.y1);
      EXPECT_LT(y, b.y2);
    }
  }
}

// The same face cropped a few pixels off is nearer to itself than another person is.
// faceres, the default: mobilefacenet's embeddings of different people are 0.9997 apart.
TEST(FacesStageTest, EmbeddingIsStableUnderSmallShiftsAndTellsPeopleApart) {
  FM_REQUIRE_MODEL("blazeface");
  FM_REQUIRE_MODEL("faceres");
  Outcome a = FacesOf("messi5.jpg");
  ASSERT_EQ(a.kind, Outcome::Kind::kDone) << a.error.ToString();
  ASSERT_GE(a.result["faces"].size(), 1u);
  // Another person: the other photo's best face, or Messi's second face when the
  // photo has one.
  std::vector<float> other;
  const auto& fa = a.result["faces"];
  if (fa.size() >= 2) {
    other = fa[1]["embedding"].get<std::vector<float>>();
  } else {
    Outcome b = FacesOf("basketball1.png");
    ASSERT_EQ(b.kind, Outcome::Kind::kDone) << b.error.ToString();
    ASSERT_GE(b.result["faces"].size(), 1u) << "no second person to compare with";
    other = b.result["faces"][0]["embedding"].get<std::vector<float>>();
  }
  const auto base = fa[0]["embedding"].get<std::vector<float>>();
  models::ModelCache pool(ModelsDir());
  auto emb = pool.Borrow("faceres");
  ASSERT_TRUE(emb.ok()) << emb.status().ToString();
  const cv::Mat img = cv::imread(testing::SampleData("messi5.jpg"));
  models::FaceBox box = BoxOf(fa[0]);
  for (const auto& [dx, dy] : std::vector<std::pair<float, float>>{{3, 0}, {0, -3}, {-2, 2}}) {
    models::FaceBox s = box;
    s.x1 += dx; s.x2 += dx; s.y1 += dy; s.y2 += dy;
    auto r = (*emb)->Run({FaceCrop(img, s)});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const models::OutputTensor* e = nullptr;
    for (const auto& t : (*r)[0])
      if (t.name == "embedding") e = &t;
    ASSERT_NE(e, nullptr);
    const auto shifted = models::L2Normalize(e->data).values;
    const double same = Dot(base, shifted), diff = Dot(base, other);
    std::printf("faceres cosine: same face shifted (%g,%g) %.4f, another person %.4f\n", dx, dy,
                same, diff);
    EXPECT_GT(same, 0.8) << "shift (" << dx << "," << dy << ")";
    EXPECT_LT(diff, 0.6);
  }
}

TEST(FacesStageTest, FaceresGivesA1024dEmbeddingWithAgeAndGender) {
  FM_REQUIRE_MODEL("blazeface");
  FM_REQUIRE_MODEL("faceres");
  FacesOptions c;
  c.embedding_model = "faceres";
  Outcome out = FacesOf("messi5.jpg", c);
  ASSERT_EQ(out.kind, Outcome::Kind::kDone) << out.error.ToString();
  ASSERT_GE(out.result["faces"].size(), 1u);
  const auto& f = out.result["faces"][0];
  auto e = f["embedding"].get<std::vector<float>>();
  ASSERT_EQ(e.size(), 1024u);
  EXPECT_NEAR(Dot(e, e), 1.0, 1e-4);
  EXPECT_GT(f["age"].get<double>(), 5);
  EXPECT_LT(f["age"].get<double>(), 90);
  EXPECT_TRUE(f["gender"] == "male" || f["gender"] == "female");
}

TEST(FacesStageTest, VideoFramesAndAPhotoWithoutFacesAreDone) {
  FM_REQUIRE_MODEL("blazeface");
  FM_REQUIRE_MODEL("faceres");
  FacesStage stage(std::make_shared<models::ModelCache>(ModelsDir()), ModelStageOptions{}, FacesOptions{});
  std::vector<ClaimedJob> jobs = {
      JobFor("faces", testing::SampleData("Megamind.avi"), MediaKind::kVideo, 1),
      JobFor("faces", testing::SampleData("box.png"), MediaKind::kImage, 2)};
  auto outs = stage.RunBatch(jobs, StageContext{});
  ASSERT_EQ(outs.size(), 2u);
  ASSERT_EQ(outs[0].kind, Outcome::Kind::kDone) << outs[0].error.ToString();
  EXPECT_EQ(outs[0].result["frames"].size(), 4u);
  EXPECT_TRUE(outs[0].result.contains("max_faces"));
  ASSERT_EQ(outs[1].kind, Outcome::Kind::kDone) << outs[1].error.ToString();
  EXPECT_EQ(outs[1].result["count"], 0);  // a box of tea: no face
}

TEST(FacesStageTest, MissingEmbeddingModelFailsWithTheInstallHint) {
  FM_REQUIRE_MODEL("blazeface");
  testing::TempDir dir;
  std::filesystem::create_directory_symlink(ModelsDir() + "/blazeface", dir / "blazeface");
  FacesStage stage(std::make_shared<models::ModelCache>(dir.path()), ModelStageOptions{}, FacesOptions{});
  Outcome out = stage.Run(JobFor("faces", testing::SampleData("messi5.jpg"), MediaKind::kImage));
  ASSERT_EQ(out.kind, Outcome::Kind::kFailed);
  EXPECT_TRUE(out.error.IsNotFound());
  EXPECT_NE(out.error.message().find("faceres"), std::string::npos) << out.error.ToString();
  EXPECT_NE(out.error.message().find("framemill models fetch"), std::string::npos);
}

}  // namespace
}  // namespace framemill
