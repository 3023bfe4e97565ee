// YOLOv8's letterbox and decode (models/letterbox.h, models/decode_yolo.cc), and the detector
// on real photos through the categorize stage.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <filesystem>
#include <fstream>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "models/decode.h"
#include "tests/support/dnn_model.h"
#include "models/letterbox.h"
#include "stages/categorize_stage.h"
#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

using models::Detection;
using models::LetterboxOf;
using models::OutputTensor;

TEST(LetterboxTest, FitsThePictureWholeCentredAsUltralyticsDoes) {
  const cv::Size input(640, 640);
  auto g = LetterboxOf({548, 342}, input);  // messi5.jpg: r = 640/548, 399.4 rows
  EXPECT_NEAR(g.scale, 640.0 / 548, 1e-12);
  EXPECT_EQ(g.width, 640);
  EXPECT_EQ(g.height, 399);
  EXPECT_EQ(g.left, 0);
  EXPECT_EQ(g.top, 120);  // 241 spare rows: 120 above, 121 below
  g = LetterboxOf({1280, 720}, input);
  EXPECT_EQ(g.width, 640);
  EXPECT_EQ(g.height, 360);
  EXPECT_EQ(g.top, 140);
  g = LetterboxOf({100, 300}, input);  // tall and small: scaled up
  EXPECT_EQ(g.width, 213);
  EXPECT_EQ(g.height, 640);
  EXPECT_EQ(g.left, 213);
  EXPECT_EQ(LetterboxOf({640, 640}, input).left, 0);
}

TEST(LetterboxTest, PadsWithTheGreyAndKeepsThePicture) {
  cv::Mat red(100, 200, CV_8UC3, cv::Scalar(0, 0, 255));
  cv::Mat out = models::Letterbox(red, {64, 64}, 114);
  ASSERT_EQ(out.size(), cv::Size(64, 64));
  EXPECT_EQ(out.at<cv::Vec3b>(0, 0), cv::Vec3b(114, 114, 114));
  EXPECT_EQ(out.at<cv::Vec3b>(63, 63), cv::Vec3b(114, 114, 114));
  EXPECT_EQ(out.at<cv::Vec3b>(32, 32), cv::Vec3b(0, 0, 255));  // 32 rows of picture from row 16
  EXPECT_EQ(out.at<cv::Vec3b>(16, 0), cv::Vec3b(0, 0, 255));
  EXPECT_EQ(out.at<cv::Vec3b>(15, 0), cv::Vec3b(114, 114, 114));
}

// Three heads of a 640 input, every class logit at -20 and every distance bin flat.
std::vector<OutputTensor> EmptyHeads() {
  std::vector<OutputTensor> heads;
  for (auto [name, g] : {std::pair{"head_8", 80}, {"head_16", 40}, {"head_32", 20}}) {
    OutputTensor t{name, {1, 144, g, g}, {}};
    t.data.assign(static_cast<size_t>(144) * g * g, 0.f);
    for (int ch = 64; ch < 144; ++ch)
      std::fill_n(t.data.begin() + static_cast<long>(ch) * g * g, g * g, -20.f);
    heads.push_back(std::move(t));
  }
  return heads;
}

// Anchor (row, col) of head `h` (grid g): class `cls` at `logit`, each side's distance (in
// cells) a whole bin, by a logit of 30 on that bin.
void SetAnchor(OutputTensor* t, int row, int col, int cls, float logit, std::array<int, 4> bins) {
  const int64_t g = t->shape[3], plane = g * g, c = row * g + col;
  for (int side = 0; side < 4; ++side) t->data[(side * 16 + bins[side]) * plane + c] = 30.f;
  t->data[(64 + cls) * plane + c] = logit;
}

models::ModelManifest YoloManifest() {
  models::ModelManifest m;
  m.name = "yolov8-test";
  m.postprocess = "yolov8";
  m.preprocess.width = m.preprocess.height = 640;
  m.letterbox_pad = 114;
  return m;
}

TEST(DecodeYoloTest, AnAnchorsBinsGiveItsBoxInImagePixelsThroughTheLetterbox) {
  auto heads = EmptyHeads();
  // head_16, cell (row 12, col 20): centre (20.5, 12.5) cells = (328, 200) input pixels;
  // sides 3, 2, 5, 4 cells = 48, 32, 80, 64 px.
  SetAnchor(&heads[1], 12, 20, 16, 2.f, {3, 2, 5, 4});
  const models::DetectionOptions opt = models::DetectionDefaults(YoloManifest(), 0.25f);  // NMS at 0.7
  auto dets = models::DecodeYolo(YoloManifest(), heads, {1280, 720}, opt);
  ASSERT_TRUE(dets.ok()) << dets.status().ToString();
  ASSERT_EQ(dets->size(), 1u);
  const Detection& d = (*dets)[0];
  EXPECT_EQ(d.class_id, 16);
  EXPECT_NEAR(d.score, 1 / (1 + std::exp(-2.0)), 1e-6);
  // Input box (280, 168)-(408, 264); the letterbox of 1280x720 is x0.5 from row 140.
  EXPECT_NEAR(d.x1, 560, 1e-3);
  EXPECT_NEAR(d.y1, (168 - 140) * 2, 1e-3);
  EXPECT_NEAR(d.x2, 816, 1e-3);
  EXPECT_NEAR(d.y2, (264 - 140) * 2, 1e-3);
}

TEST(DecodeYoloTest, NmsIsPerClassAndDropsWeakAnchors) {
  auto heads = EmptyHeads();
  SetAnchor(&heads[0], 40, 40, 0, 3.f, {4, 4, 4, 4});  // a person
  SetAnchor(&heads[0], 40, 41, 0, 1.f, {5, 4, 3, 4});  // the same box, weaker: suppressed
  SetAnchor(&heads[0], 40, 42, 2, 0.5f, {6, 4, 2, 4});  // the same box, a car: kept
  SetAnchor(&heads[2], 5, 5, 15, -3.f, {1, 1, 1, 1});  // a cat at 0.047: under the floor
  const models::DetectionOptions opt = models::DetectionDefaults(YoloManifest(), 0.1f);  // NMS at 0.7
  auto dets = models::DecodeYolo(YoloManifest(), heads, {640, 640}, opt);
  ASSERT_TRUE(dets.ok()) << dets.status().ToString();
  ASSERT_EQ(dets->size(), 2u);
  EXPECT_EQ((*dets)[0].class_id, 0);
  EXPECT_EQ((*dets)[1].class_id, 2);
  EXPECT_NEAR((*dets)[0].x1, (40.5f - 4) * 8, 1e-3);
}

TEST(DecodeYoloTest, AMissingOrMisshapenHeadIsAClearError) {
  auto heads = EmptyHeads();
  heads.pop_back();
  auto dets = models::DecodeYolo(YoloManifest(), heads, {640, 640}, {});
  ASSERT_FALSE(dets.ok());
  EXPECT_NE(dets.status().ToString().find("head_32"), std::string::npos) << dets.status().ToString();
  heads = EmptyHeads();
  heads[0].shape[1] = 84;
  EXPECT_FALSE(models::DecodeYolo(YoloManifest(), heads, {640, 640}, {}).ok());
}

// The golden check against an independent reference (tools/models/reference.mjs): ONNX Runtime
// runs the shipped, uncut graph (its own decode inside) on make_inputs.py's letterbox, written
// in Python from Ultralytics' source, and a NMS written apart in JavaScript. Ours: the cut graph
// in cv::dnn on our letterbox, and DecodeYolo. Every object the same: label, score within
// 2e-3, box within a pixel of the picture's.
class YoloGoldenTest : public ::testing::TestWithParam<const char*> {};

TEST_P(YoloGoldenTest, SameObjectsAsOnnxRuntimeOnTheUncutGraph) {
  const std::string name = GetParam();
  FM_LOAD_MODEL_OR_SKIP(m, name);
  const std::filesystem::path ref = std::filesystem::path(testing::GoldenDir()) / "reference" / name;
  if (!std::filesystem::exists(ref / "done.json")) {
    if (testing::ModelsRequired()) FAIL() << "no reference in " << ref;
    GTEST_SKIP() << "no reference in " << ref << " (tools/models/make_reference.sh)";
  }
  auto dnn = models::DnnModel::Open(m);
  ASSERT_TRUE(dnn.ok()) << dnn.status().ToString();
  int pictures = 0, objects = 0;
  for (int i = 0; std::filesystem::exists(ref / ("decoded_" + std::to_string(i) + ".json")); ++i) {
    std::ifstream f(ref / ("decoded_" + std::to_string(i) + ".json"));
    const nlohmann::json want = nlohmann::json::parse(f);
    const cv::Mat picture = cv::imread(want["image"].get<std::string>(), cv::IMREAD_COLOR);
    ASSERT_FALSE(picture.empty()) << want["image"];
    ASSERT_EQ(picture.cols, want["width"].get<int>());
    auto outs = (*dnn)->Run({picture});
    ASSERT_TRUE(outs.ok()) << outs.status().ToString();
    models::DetectionOptions opt;
    opt.min_score = want["min_score"].get<float>();
    opt.iou_threshold = want["iou"].get<float>();
    opt.max_detections = 100;
    auto got = models::DecodeYolo(m, (*outs)[0], picture.size(), opt);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const auto& dets = want["detections"];
    ASSERT_EQ(got->size(), dets.size()) << name << " " << want["image"];
    for (size_t k = 0; k < got->size(); ++k) {
      const Detection& d = (*got)[k];
      const auto& w = dets[k];
      EXPECT_EQ(d.class_id, w["class"].get<int>()) << want["image"] << " #" << k;
      EXPECT_NEAR(d.score, w["score"].get<double>(), 2e-3) << want["image"] << " #" << k;
      const float box[4] = {d.x1, d.y1, d.x2, d.y2};
      for (int c = 0; c < 4; ++c) EXPECT_NEAR(box[c], w["box"][c].get<double>(), 1.0) << want["image"] << " #" << k;
    }
    ++pictures;
    objects += static_cast<int>(got->size());
  }
  std::printf("%s: %d pictures, %d objects, each the reference's\n", name.c_str(), pictures, objects);
  EXPECT_GE(pictures, 5);
}

INSTANTIATE_TEST_SUITE_P(Models, YoloGoldenTest, ::testing::Values("yolov8n", "yolov8s"));

// The categorize stage with YOLOv8n as its detector (categorize.detector: yolov8n).
CategorizeStage YoloNanoStage() {
  CategorizeOptions options;
  options.detector = "yolov8n";
  return CategorizeStage(std::make_shared<models::ModelCache>(testing::ModelsDir()), ModelStageOptions{}, options);
}

// The real YOLOv8n through the categorize stage: messi5.jpg's footballer and ball (CenterNet
// at 0.6 shows the ball only), fruits.jpg's oranges (CenterNet shows none), and boxes in the
// picture's own pixels.
TEST(CategorizeYoloTest, ShowsTheFootballerAndTheBallAndTheFruit) {
  FM_REQUIRE_MODEL("yolov8n");
  FM_REQUIRE_MODEL("nsfw");
  CategorizeStage stage = YoloNanoStage();
  for (const auto& [file, w, h, want] : std::vector<std::tuple<std::string, int, int, std::set<std::string>>>{
           {"messi5.jpg", 548, 342, {"person", "sports ball"}}, {"fruits.jpg", 512, 480, {"orange"}}}) {
    Outcome out = stage.Run(testing::JobFor("categorize", testing::SampleData(file), MediaKind::kImage));
    ASSERT_EQ(out.kind, Outcome::Kind::kDone) << file << ": " << out.error.ToString();
    EXPECT_EQ(out.result["model"], "yolov8n");
    std::set<std::string> shown;
    for (const auto& c : out.result["categories"]) shown.insert(c["label"].get<std::string>());
    for (const std::string& label : want) EXPECT_TRUE(shown.count(label)) << file << ": " << out.result.dump();
    for (const auto& o : out.result["objects"]) {
      const auto& b = o["box"];
      EXPECT_LT(b[0].get<double>(), b[2].get<double>()) << o.dump();
      EXPECT_LE(b[2].get<double>(), w);
      EXPECT_LE(b[3].get<double>(), h);
    }
  }
}

// Pictures as collections hold them: tiny, a thin strip, large, one-channel, 16-bit and with
// alpha are analysed (converted as for the other models: 16-bit scaled to 8, alpha dropped),
// the converted ones showing what their 8-bit original shows; a file that is not a picture
// fails its own job with the reason.
TEST(CategorizeYoloTest, OddPicturesAreAnalysedAndAnUnreadableOneFailsItsOwnJob) {
  FM_REQUIRE_MODEL("yolov8n");
  FM_REQUIRE_MODEL("nsfw");
  CategorizeStage stage = YoloNanoStage();
  testing::TempDir dir;
  const cv::Mat messi = cv::imread(testing::SampleData("messi5.jpg"), cv::IMREAD_COLOR);
  cv::Mat deep, alpha, gray, large;
  messi.convertTo(deep, CV_16UC3, 257.0);
  cv::cvtColor(messi, alpha, cv::COLOR_BGR2BGRA);
  cv::cvtColor(messi, gray, cv::COLOR_BGR2GRAY);
  cv::resize(messi, large, cv::Size(4000, 2496), 0, 0, cv::INTER_LINEAR);
  const std::vector<std::pair<std::string, cv::Mat>> pictures = {
      {"messi.png", messi}, {"deep.png", deep}, {"alpha.png", alpha}, {"gray.png", gray},
      {"large.jpg", large}, {"tiny.png", cv::Mat(1, 1, CV_8UC3, cv::Scalar(40, 90, 200))},
      {"strip.png", cv::Mat(3, 1500, CV_8UC3, cv::Scalar(128, 128, 128))}};
  std::map<std::string, std::set<std::string>> shown;
  for (const auto& [name, picture] : pictures) {
    ASSERT_TRUE(cv::imwrite(dir / name, picture)) << name;
    Outcome out = stage.Run(testing::JobFor("categorize", dir / name, MediaKind::kImage));
    ASSERT_EQ(out.kind, Outcome::Kind::kDone) << name << ": " << out.error.ToString();
    for (const auto& c : out.result["categories"]) shown[name].insert(c["label"].get<std::string>());
    for (const auto& o : out.result["objects"]) {
      const auto& b = o["box"];
      EXPECT_GE(b[0].get<double>(), 0) << name << ": " << o.dump();
      EXPECT_LE(b[2].get<double>(), picture.cols) << name << ": " << o.dump();
      EXPECT_LE(b[3].get<double>(), picture.rows) << name << ": " << o.dump();
    }
  }
  EXPECT_TRUE(shown["messi.png"].count("person")) << "the footballer";
  EXPECT_EQ(shown["deep.png"], shown["messi.png"]) << "16-bit: the same picture";
  EXPECT_EQ(shown["alpha.png"], shown["messi.png"]) << "an opaque alpha channel changes nothing";
  EXPECT_TRUE(shown["gray.png"].count("person"));
  EXPECT_TRUE(shown["large.jpg"].count("person"));
  EXPECT_TRUE(shown["tiny.png"].empty());
  testing::WriteFile(dir / "broken.jpg", std::string("\xff\xd8\xff\xe0", 4) + "not really a JPEG");
  Outcome broken = stage.Run(testing::JobFor("categorize", dir / "broken.jpg", MediaKind::kImage));
  EXPECT_EQ(broken.kind, Outcome::Kind::kFailed);
  EXPECT_FALSE(broken.error.message().empty());
}

}  // namespace
}  // namespace framemill
