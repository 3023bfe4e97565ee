// DnnModel on an installed model (FRAMEMILL_MODELS, default <repo>/.cache/models); the
// tests that need one skip when it is absent unless FRAMEMILL_REQUIRE_MODELS=1.
#include "tests/support/dnn_model.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>

#include "models/manifest.h"
#include "tests/support/model_test_support.h"

namespace framemill::models {
namespace {

const char* kData = "/usr/share/doc/opencv-doc/examples/data/";

TEST(DnnModelTest, CorruptOnnxIsCorruptionNamingTheFile) {
  auto dir = std::filesystem::temp_directory_path() / ("fm_dnn_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ModelManifest m;
  m.name = "broken";
  m.onnx_file = (dir / "model.onnx").string();
  { std::ofstream(m.onnx_file) << "this is not a protobuf"; }
  m.outputs.push_back({"y", {-1, 2}, "NC", ""});
  auto r = DnnModel::Open(m);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  EXPECT_NE(r.status().message().find(m.onnx_file), std::string::npos);
  m.onnx_file = (dir / "missing.onnx").string();
  EXPECT_TRUE(DnnModel::Open(m).status().IsNotFound());
  std::filesystem::remove_all(dir);
}

TEST(DnnModelTest, RejectsEmptyAndNonBgrImages) {
  FM_LOAD_MODEL_OR_SKIP(m, "mobilefacenet");
  auto model = DnnModel::Open(m);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_TRUE((*model)->Run({cv::Mat()}).status().IsInvalidArgument());
  EXPECT_TRUE((*model)->Run({cv::Mat(8, 8, CV_8UC1, cv::Scalar(1))}).status().IsInvalidArgument());
}

// One batched forward gives each image what a forward of its own gives.
TEST(DnnModelTest, BatchEqualsOneByOne) {
  FM_LOAD_MODEL_OR_SKIP(m, "mobilefacenet");
  auto model = DnnModel::Open(m);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<cv::Mat> imgs;
  for (const char* f : {"messi5.jpg", "basketball1.png", "lena.jpg"}) {
    cv::Mat i = cv::imread(std::string(kData) + f);
    if (!i.empty()) imgs.push_back(i);
  }
  ASSERT_GE(imgs.size(), 2u);
  auto batch = (*model)->Run(imgs);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_EQ(batch->size(), imgs.size());
  EXPECT_TRUE((*model)->batched()) << "mobilefacenet lost its batch dimension in cv::dnn";
  for (size_t b = 0; b < imgs.size(); ++b) {
    auto one = (*model)->Run({imgs[b]});
    ASSERT_TRUE(one.ok());
    ASSERT_EQ((*one)[0].size(), m.outputs.size());
    const auto& x = (*one)[0][0];
    const auto& y = (*batch)[b][0];
    EXPECT_EQ(x.name, "embedding");
    EXPECT_EQ(x.shape, (std::vector<int64_t>{1, 192}));
    EXPECT_EQ(y.shape, x.shape);
    float md = 0;
    for (size_t i = 0; i < x.data.size(); ++i) md = std::max(md, std::fabs(x.data[i] - y.data[i]));
    EXPECT_LT(md, 1e-3f) << "image " << b;
  }
  // Different images give different embeddings (the slices are not all one image's).
  EXPECT_NE((*batch)[0][0].data, (*batch)[1][0].data);
}

}  // namespace
}  // namespace framemill::models
