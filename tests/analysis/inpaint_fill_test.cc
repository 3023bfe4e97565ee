// The inpainting methods on real photos (opencv-doc): what they must keep, what they fill,
// and where the exemplar fill earns its cost.
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/photo.hpp>

#include "analysis/inpaint_fill.h"
#include "gpu/compute_backend.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

cv::Mat Photo(const std::string& name, int width) {
  cv::Mat m = cv::imread(testing::SampleData(name));
  cv::resize(m, m, cv::Size(width, m.rows * width / m.cols), 0, 0, cv::INTER_AREA);
  return m;
}

cv::Mat Blob(cv::Size size) {
  cv::Mat hole = cv::Mat::zeros(size, CV_8U);
  cv::ellipse(hole, cv::Point(size.width / 2, size.height / 2), cv::Size(size.width / 7, size.height / 9), 30, 0,
              360, 255, cv::FILLED);
  cv::line(hole, cv::Point(5, 5), cv::Point(size.width / 3, size.height - 10), 255, 3);
  return hole;
}

TEST(InpaintFillTest, EveryMethodKeepsThePixelsOutsideTheHoleAndFillsInside) {
  const cv::Mat photo = Photo("fruits.jpg", 200);
  const cv::Mat hole = Blob(photo.size());
  cv::Mat marked = photo.clone();
  marked.setTo(cv::Scalar(255, 0, 255), hole);  // what a fill must not leave behind
  for (InpaintMethod m : AllInpaintMethods()) {
    SCOPED_TRACE(std::string(InpaintMethodName(m)));
    auto filled = Inpaint(marked, hole, m);
    ASSERT_TRUE(filled.ok()) << filled.status().ToString();
    cv::Mat diff;
    cv::absdiff(*filled, marked, diff);
    cv::Mat outside_diff = cv::Mat::zeros(photo.size(), CV_8UC3);
    diff.copyTo(outside_diff, hole == 0);
    EXPECT_EQ(cv::countNonZero(outside_diff.reshape(1)), 0) << "a pixel outside the hole changed";
    // Inside, the magenta is gone: the fill is near the photo, not the mark.
    EXPECT_GT(HolePsnr(photo, *filled, hole), HolePsnr(photo, marked, hole) + 8);
  }
}

TEST(InpaintFillTest, TheExemplarFillRebuildsARepeatingTextureThatDiffusionBlurs) {
  // A 24x24 tile of a real photo repeated: the hole's content exists elsewhere exactly.
  const cv::Mat tile = Photo("baboon.jpg", 96)(cv::Rect(30, 30, 24, 24)).clone();
  cv::Mat image;
  cv::repeat(tile, 8, 10, image);  // 240 x 192
  cv::Mat hole = cv::Mat::zeros(image.size(), CV_8U);
  hole(cv::Rect(90, 70, 50, 44)) = 255;
  auto exemplar = Inpaint(image, hole, InpaintMethod::kExemplar);
  auto telea = Inpaint(image, hole, InpaintMethod::kTelea);
  ASSERT_TRUE(exemplar.ok() && telea.ok());
  const double pe = HolePsnr(image, *exemplar, hole), pt = HolePsnr(image, *telea, hole);
  EXPECT_GT(pe, 30) << "telea " << pt;
  EXPECT_GT(pe, pt + 10);
  EXPECT_GT(HoleSsim(image, *exemplar, hole), 0.9);
  EXPECT_LT(HoleSsim(image, *telea, hole), 0.6);
}

TEST(InpaintFillTest, TheExemplarFillIsTheSameWhereverItsSearchRuns) {
  const cv::Mat photo = Photo("building.jpg", 180);
  const cv::Mat hole = Blob(photo.size());
  auto cpu = Inpaint(photo, hole, InpaintMethod::kExemplar);
  auto sim = gpu::MakeSimBackend(256);
  int calls = 0;
  PatchSearchFn search = [&](const gpu::PatchMatchTask& t, const gpu::PatchMatchSpec& s)
      -> Result<gpu::PatchMatchResult> {
    ++calls;
    auto r = sim->PatchMatchBatch({t}, s);
    if (!r.ok()) return r.status();
    return std::move(r->front());
  };
  auto on_sim = Inpaint(photo, hole, InpaintMethod::kExemplar, {}, {.search = search});
  ASSERT_TRUE(cpu.ok() && on_sim.ok());
  EXPECT_GT(calls, 3);  // every EM step of every level searched there
  EXPECT_EQ(cv::norm(*cpu, *on_sim, cv::NORM_INF), 0);
  // A search that fails fails the fill, with its reason.
  PatchSearchFn broken = [](const gpu::PatchMatchTask&, const gpu::PatchMatchSpec&)
      -> Result<gpu::PatchMatchResult> { return Status::OutOfMemory("device full"); };
  EXPECT_EQ(Inpaint(photo, hole, InpaintMethod::kExemplar, {}, {.search = broken}).status().code(),
            Status::Code::kOutOfMemory);
}

TEST(InpaintFillTest, EdgeCasesOfTheMask) {
  const cv::Mat photo = Photo("fruits.jpg", 120);
  const cv::Mat none = cv::Mat::zeros(photo.size(), CV_8U);
  auto same = Inpaint(photo, none, InpaintMethod::kExemplar);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(cv::norm(*same, photo, cv::NORM_INF), 0);
  const cv::Mat all(photo.size(), CV_8U, cv::Scalar(255));
  EXPECT_EQ(Inpaint(photo, all, InpaintMethod::kTelea).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Inpaint(photo, cv::Mat::zeros(10, 10, CV_8U), InpaintMethod::kTelea).status().code(),
            Status::Code::kInvalidArgument);
  // A hole that leaves no whole known patch: the exemplar fill falls back to Telea.
  cv::Mat stripes = cv::Mat::zeros(photo.size(), CV_8U);
  for (int y = 0; y < photo.rows; y += 5) stripes.row(y) = 255;
  auto striped = Inpaint(photo, stripes, InpaintMethod::kExemplar);
  auto telea = Inpaint(photo, stripes, InpaintMethod::kTelea);
  ASSERT_TRUE(striped.ok() && telea.ok());
  EXPECT_EQ(cv::norm(*striped, *telea, cv::NORM_INF), 0);
}

// The harmonic fill the inpaint stage runs on a device: on real photos it is at least as close
// to what the hole hid as Telea, at every size the bench measures (bench/README "Inpainting":
// +1.3 to +2 dB).
TEST(InpaintFillTest, ThePyramidFillIsAtLeastTeleasOnRealPhotos) {
  double pyramid = 0, telea = 0;
  int n = 0;
  for (const char* name : {"aero1.jpg", "fruits.jpg", "baboon.jpg", "building.jpg"}) {
    const cv::Mat photo = Photo(name, 640);
    for (const cv::Size axes : {cv::Size(12, 8), cv::Size(50, 35), cv::Size(110, 80)}) {
      cv::Mat hole = cv::Mat::zeros(photo.size(), CV_8U);
      cv::ellipse(hole, cv::Point(photo.cols / 2, photo.rows / 2), axes, 25, 0, 360, 255, cv::FILLED);
      auto p = Inpaint(photo, hole, InpaintMethod::kPyramid);
      auto t = Inpaint(photo, hole, InpaintMethod::kTelea);
      ASSERT_TRUE(p.ok() && t.ok());
      pyramid += HolePsnr(photo, *p, hole), telea += HolePsnr(photo, *t, hole), ++n;
    }
  }
  std::printf("[pyramid] mean PSNR in the hole over %d holes: pyramid %.2f dB, telea %.2f dB\n", n, pyramid / n,
              telea / n);
  EXPECT_GE(pyramid / n, telea / n);
}

// Telea and Navier-Stokes run on the hole's box, not the whole image: the same pixels, at a
// cost that follows the hole (a tiny hole in a large photo no longer pays for the photo).
TEST(InpaintFillTest, TeleaOnTheHolesBoxIsTeleaOnTheImage) {
  const cv::Mat photo = Photo("aero1.jpg", 640);
  for (const cv::Rect& at : {cv::Rect(300, 200, 30, 20), cv::Rect(0, 0, 25, 40), cv::Rect(600, 400, 40, 80)}) {
    cv::Mat hole = cv::Mat::zeros(photo.size(), CV_8U);
    const cv::Rect in = at & cv::Rect(0, 0, photo.cols, photo.rows);
    cv::ellipse(hole, (in.tl() + in.br()) / 2, in.size() / 2, 0, 0, 360, 255, cv::FILLED);
    for (auto [method, flags] : {std::pair{InpaintMethod::kTelea, cv::INPAINT_TELEA},
                                 std::pair{InpaintMethod::kNavierStokes, cv::INPAINT_NS}}) {
      cv::Mat whole;
      cv::inpaint(photo, hole, whole, 3, flags);
      auto boxed = Inpaint(photo, hole, method);
      ASSERT_TRUE(boxed.ok());
      EXPECT_EQ(cv::norm(*boxed, whole, cv::NORM_INF), 0) << InpaintMethodName(method) << " at " << at;
    }
  }
}

// auto: a wide hole of many pixels is filled on a reduced copy (as good as Telea or better,
// bench/README "Inpainting"), a thin or small one by Telea at full size.
TEST(InpaintFillTest, AWideHoleIsFilledReducedAndAThinOneAtFullSize) {
  const cv::Mat photo = Photo("aero1.jpg", 1000);
  cv::Mat wide = cv::Mat::zeros(photo.size(), CV_8U);
  cv::ellipse(wide, cv::Point(500, 380), cv::Size(180, 140), 20, 0, 360, 255, cv::FILLED);
  const HoleShape w = MeasureHole(wide);
  EXPECT_GT(w.pixels, kCoarseMinPixels);
  EXPECT_GT(w.mean_distance, 40);
  EXPECT_GE(CoarseFactor(w), 4);  // mean distance ~47 px: at least 6 reduced px at 4
  EXPECT_EQ(ChooseInpaintMethod(w), InpaintMethod::kTeleaCoarse);
  auto coarse = Inpaint(photo, wide, InpaintMethod::kTeleaCoarse, {}, {}, &w);
  auto telea = Inpaint(photo, wide, InpaintMethod::kTelea);
  ASSERT_TRUE(coarse.ok() && telea.ok());
  EXPECT_GT(HolePsnr(photo, *coarse, wide), HolePsnr(photo, *telea, wide) - 0.5);
  cv::Mat outside;
  cv::absdiff(*coarse, photo, outside);
  outside.setTo(cv::Scalar::all(0), wide);
  EXPECT_EQ(cv::countNonZero(outside.reshape(1)), 0);

  cv::Mat thin = cv::Mat::zeros(photo.size(), CV_8U);  // strokes 15 px wide: 8% of the photo
  for (int y = 40; y < photo.rows; y += 60) cv::line(thin, {0, y}, {photo.cols, y + 30}, 255, 15);
  const HoleShape t = MeasureHole(thin);
  EXPECT_GT(t.pixels, kCoarseMinPixels);
  EXPECT_EQ(CoarseFactor(t), 1);
  EXPECT_EQ(ChooseInpaintMethod(t), InpaintMethod::kTelea);
  cv::Mat small = cv::Mat::zeros(photo.size(), CV_8U);  // wide but small: 2,800 px
  cv::circle(small, {300, 300}, 30, 255, cv::FILLED);
  EXPECT_EQ(ChooseInpaintMethod(MeasureHole(small)), InpaintMethod::kTelea);
  // Named, the coarse fill of a thin hole is Telea's.
  auto named = Inpaint(photo, thin, InpaintMethod::kTeleaCoarse);
  auto full = Inpaint(photo, thin, InpaintMethod::kTelea);
  ASSERT_TRUE(named.ok() && full.ok());
  EXPECT_EQ(cv::norm(*named, *full, cv::NORM_INF), 0);
}

TEST(InpaintFillTest, HoleMeasuresAndQualityMeasures) {
  cv::Mat stroke = cv::Mat::zeros(100, 200, CV_8U);
  stroke(cv::Rect(20, 40, 150, 9)) = 255;
  const HoleShape s = MeasureHole(stroke);
  EXPECT_NEAR(s.coverage, 150.0 * 9 / 20000, 1e-9);
  EXPECT_NEAR(s.half_width, 5, 0.01);
  EXPECT_EQ(s.pixels, 150 * 9);
  EXPECT_NEAR(s.mean_distance, (1 + 2 + 3 + 4 + 5 + 4 + 3 + 2 + 1) / 9.0, 0.1);
  const cv::Mat photo = Photo("fruits.jpg", 200);
  cv::Mat hole = cv::Mat::zeros(photo.size(), CV_8U);
  hole(cv::Rect(50, 50, 40, 40)) = 255;
  EXPECT_EQ(HolePsnr(photo, photo, hole), 99.0);
  EXPECT_NEAR(HoleSsim(photo, photo, hole), 1.0, 1e-9);
  cv::Mat grey = photo.clone();
  grey.setTo(cv::Scalar(128, 128, 128), hole);
  EXPECT_LT(HolePsnr(photo, grey, hole), 20);
  EXPECT_LT(HoleSsim(photo, grey, hole), 0.5);
  EXPECT_EQ(ParseInpaintMethod("shiftmap").value(), InpaintMethod::kShiftMap);
  EXPECT_NE(ParseInpaintMethod("lama").status().message().find("telea, ns, exemplar"), std::string::npos);
}

}  // namespace
}  // namespace framemill
