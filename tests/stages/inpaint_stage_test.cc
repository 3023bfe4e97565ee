// The inpaint stage on real photos with the user's masks (the segment-driven path runs
// through the binary in tests/integration/inpaint_test.cc): masks matched by stem, one
// mask for every item, empty and bad masks, videos, and a user's ONNX network built here.
#include "stages/inpaint_stage.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "media/image.h"
#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

namespace fs = std::filesystem;
using testing::JobFor;
using testing::SampleData;

cv::Mat Decoded(const std::string& path) { return DecodeImageFile(path, ImageLimits{}).value(); }

// The PNG the outcome names: the source's pixels outside `hole`, something else inside.
void ExpectFilledOnlyInside(const Outcome& o, const std::string& source, const cv::Mat& hole) {
  ASSERT_TRUE(o.done()) << o.error.ToString();
  ASSERT_EQ(o.artifacts.size(), 1u);
  EXPECT_EQ(o.artifacts[0], o.result["image"].get<std::string>());
  const cv::Mat out = cv::imread(o.artifacts[0], cv::IMREAD_UNCHANGED), in = Decoded(source);
  ASSERT_EQ(out.size(), in.size());
  ASSERT_EQ(out.type(), CV_8UC3);
  cv::Mat diff;
  cv::absdiff(out, in, diff);
  cv::Mat outside = cv::Mat::zeros(in.size(), CV_8UC3);
  diff.copyTo(outside, hole == 0);
  EXPECT_EQ(cv::countNonZero(outside.reshape(1)), 0) << "a pixel outside the mask changed";
  cv::Mat inside = cv::Mat::zeros(in.size(), CV_8UC3);
  diff.copyTo(inside, hole);
  EXPECT_GT(cv::countNonZero(inside.reshape(1)), 0) << "nothing was filled";
  EXPECT_NEAR(o.result["mask_coverage"].get<double>(),
              double(cv::countNonZero(hole)) / double(hole.total()), 1e-4);
}

cv::Mat Ellipse(cv::Size size, double fx, double fy) {
  cv::Mat m = cv::Mat::zeros(size, CV_8U);
  cv::ellipse(m, cv::Point(size.width / 2, size.height / 2),
              cv::Size(int(size.width * fx), int(size.height * fy)), 0, 0, 360, 255, cv::FILLED);
  return m;
}

// `mask` written as a PNG at `path`; returns the path.
std::string Written(const std::string& path, const cv::Mat& mask) {
  EXPECT_TRUE(cv::imwrite(path, mask)) << path;
  return path;
}

InpaintOptions Masks(const std::string& masks, const std::string& method = "auto") {
  InpaintOptions o;
  o.masks = masks;
  o.method = method;
  return o;
}

TEST(InpaintStageTest, UserMasksAreMatchedByFileStem) {
  testing::TempDir dir;
  const std::string masks = dir / "masks";
  fs::create_directories(masks);
  const std::string fruits = SampleData("fruits.jpg"), baboon = SampleData("baboon.jpg");
  const cv::Mat hole = Ellipse(Decoded(fruits).size(), 0.12, 0.1);
  ASSERT_TRUE(cv::imwrite(masks + "/fruits.png", hole));
  InpaintStage stage(Masks(masks), dir / "out");
  EXPECT_TRUE(stage.spec().deps.empty());  // user masks: no wait on segment
  const Outcome o = stage.Run(JobFor("inpaint", fruits, MediaKind::kImage, 1));
  ExpectFilledOnlyInside(o, fruits, hole);
  EXPECT_EQ(o.result["mask_source"], "folder");
  EXPECT_EQ(o.result["mask"], masks + "/fruits.png");
  EXPECT_EQ(o.result["method"], "telea");  // a hole of 3.8%: the measured choice
  EXPECT_EQ(o.artifacts[0].rfind(dir / "out" + "/inpaint/", 0), 0u);
  // No mask of that stem: skipped, with where it was looked for.
  const Outcome none = stage.Run(JobFor("inpaint", baboon, MediaKind::kImage, 2));
  ASSERT_EQ(none.kind, Outcome::Kind::kSkipped);
  EXPECT_NE(none.error.message().find("no mask named baboon.* in " + masks), std::string::npos);
  // Two files of one stem: which one is meant cannot be known.
  ASSERT_TRUE(cv::imwrite(masks + "/baboon.png", hole));
  ASSERT_TRUE(cv::imwrite(masks + "/baboon.jpg", hole));
  const Outcome two = stage.Run(JobFor("inpaint", baboon, MediaKind::kImage, 2));
  ASSERT_TRUE(two.failed());
  EXPECT_NE(two.error.message().find("two masks"), std::string::npos);
}

TEST(InpaintStageTest, OneMaskFileAppliesToEveryItemScaledToIt) {
  testing::TempDir dir;
  // A watermark in the lower right corner, drawn at 400x300.
  cv::Mat mark = cv::Mat::zeros(300, 400, CV_8U);
  cv::putText(mark, "(c) 2026", cv::Point(250, 280), cv::FONT_HERSHEY_SIMPLEX, 0.9, 255, 3);
  const std::string path = dir / "watermark.png";
  ASSERT_TRUE(cv::imwrite(path, mark));
  InpaintStage stage(Masks(path), dir / "out");
  for (const char* name : {"fruits.jpg", "building.jpg"}) {
    const std::string source = SampleData(name);
    const cv::Size size = Decoded(source).size();
    cv::Mat hole;
    cv::resize(mark, hole, size, 0, 0, cv::INTER_NEAREST);
    hole = hole > 127;
    const Outcome o = stage.Run(JobFor("inpaint", source, MediaKind::kImage, 3));
    ExpectFilledOnlyInside(o, source, hole);
    EXPECT_EQ(o.result["mask_source"], "file");
    EXPECT_EQ(o.result.value("mask_scaled", false), size != mark.size()) << name;
    EXPECT_EQ(o.result["method"], "telea") << "a small hole: Telea on its box, the measured choice";
  }
}

TEST(InpaintStageTest, EmptyBadAndOversizedMasksAndVideos) {
  testing::TempDir dir;
  const std::string fruits = SampleData("fruits.jpg");
  const cv::Size size = Decoded(fruits).size();
  const std::string empty = dir / "empty.png", full = dir / "full.png", broken = dir / "broken.png";
  ASSERT_TRUE(cv::imwrite(empty, cv::Mat::zeros(size, CV_8U)));
  ASSERT_TRUE(cv::imwrite(full, cv::Mat(size, CV_8U, cv::Scalar(255))));
  std::ofstream(broken) << "\x89PNG\r\n\x1a\n not really";
  const ClaimedJob job = JobFor("inpaint", fruits, MediaKind::kImage, 4);
  const Outcome e = InpaintStage(Masks(empty), dir / "out").Run(job);
  ASSERT_EQ(e.kind, Outcome::Kind::kSkipped);
  EXPECT_NE(e.error.message().find("is empty"), std::string::npos);
  const Outcome f = InpaintStage(Masks(full), dir / "out").Run(job);
  ASSERT_EQ(f.kind, Outcome::Kind::kSkipped);
  EXPECT_NE(f.error.message().find("covers 100% of the image"), std::string::npos);
  const Outcome b = InpaintStage(Masks(broken), dir / "out").Run(job);
  ASSERT_TRUE(b.failed());
  EXPECT_EQ(b.error.code(), Status::Code::kCorruption);
  EXPECT_NE(b.error.message().find(broken), std::string::npos);
  const Outcome missing = InpaintStage(Masks(dir / "nowhere"), dir / "out").Run(job);
  ASSERT_TRUE(missing.failed());
  EXPECT_NE(missing.error.message().find("neither a folder nor a file"), std::string::npos);
  const Outcome video = InpaintStage(Masks(empty), dir / "out")
                            .Run(JobFor("inpaint", SampleData("vtest.avi"), MediaKind::kVideo, 5));
  EXPECT_EQ(video.kind, Outcome::Kind::kSkipped);
  // A damaged image fails its own job with the reason.
  const std::string cut = dir / "cut.jpg";
  {
    std::ifstream in(fruits, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, 300);
  }
  const Outcome d = InpaintStage(Masks(empty), dir / "out").Run(JobFor("inpaint", cut, MediaKind::kImage, 6));
  EXPECT_TRUE(d.failed());
}

TEST(InpaintStageTest, TheConfiguredMethodIsUsed) {
  testing::TempDir dir;
  const std::string fruits = SampleData("fruits.jpg");
  const cv::Mat hole = Ellipse(Decoded(fruits).size(), 0.1, 0.1);
  const std::string path = Written(dir / "hole.png", hole);
  for (const char* method : {"telea", "ns", "exemplar"}) {
    const Outcome o = InpaintStage(Masks(path, method), dir / "out").Run(JobFor("inpaint", fruits, MediaKind::kImage, 7));
    ExpectFilledOnlyInside(o, fruits, hole);
    EXPECT_EQ(o.result["method"], method);
  }
}

// A network in ONNX, made here by Debian's python3-onnx: the image and the mask joined,
// then a 1x1 convolution giving mid-grey where the mask is 1 (the image's weights are
// zero). No weights of a real inpainting network are claimed.
std::string GreyFillNetwork(const std::string& dir) {
  const std::string path = dir + "/grey_fill.onnx";
  const std::string script = R"(
import sys, onnx
from onnx import helper, TensorProto as T
S = 64
image = helper.make_tensor_value_info('image', T.FLOAT, [1, 3, S, S])
mask = helper.make_tensor_value_info('mask', T.FLOAT, [1, 1, S, S])
out = helper.make_tensor_value_info('filled', T.FLOAT, [1, 3, S, S])
w = [0.0] * 12
for c in range(3): w[c * 4 + 3] = 0.5
weights = helper.make_tensor('w', T.FLOAT, [3, 4, 1, 1], w)
bias = helper.make_tensor('b', T.FLOAT, [3], [0.0, 0.0, 0.0])
nodes = [helper.make_node('Concat', ['image', 'mask'], ['both'], axis=1),
         helper.make_node('Conv', ['both', 'w', 'b'], ['filled'], kernel_shape=[1, 1])]
g = helper.make_graph(nodes, 'grey_fill', [image, mask], [out], [weights, bias])
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
)";
  auto r = testing::RunProcess({"/usr/bin/python3", "-c", script, path}, {}, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err << " (python3-onnx: scripts/install-deps.sh)";
  return path;
}

TEST(InpaintStageTest, AUsersOnnxNetworkFillsTheHole) {
  testing::TempDir dir;
  const std::string fruits = SampleData("fruits.jpg");
  const cv::Mat hole = Ellipse(Decoded(fruits).size(), 0.2, 0.2);
  const std::string mask = Written(dir / "hole.png", hole);
  InpaintOptions o = Masks(mask);
  o.model = GreyFillNetwork(dir.path());
  o.model_size = 64;
  const Outcome out = InpaintStage(o, dir / "out").Run(JobFor("inpaint", fruits, MediaKind::kImage, 8));
  ExpectFilledOnlyInside(out, fruits, hole);
  EXPECT_EQ(out.result["method"], "model:grey_fill");
  // Deep inside the hole the network's grey is there.
  const cv::Mat filled = cv::imread(out.artifacts[0]);
  const cv::Vec3b centre = filled.at<cv::Vec3b>(filled.rows / 2, filled.cols / 2);
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(centre[c], 128, 2);
  // A file that is not a network fails the job with the reason; the stage stays usable.
  o.model = mask;
  const Outcome bad = InpaintStage(o, dir / "out").Run(JobFor("inpaint", fruits, MediaKind::kImage, 9));
  ASSERT_TRUE(bad.failed());
  EXPECT_NE(bad.error.message().find("cannot be loaded"), std::string::npos) << bad.error.ToString();
}

}  // namespace
}  // namespace framemill
