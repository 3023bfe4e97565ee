#include "analysis/lighting_analysis.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace framemill::lighting {
namespace {

// Percentiles are read off a 4096-bin histogram over sqrt(L) (gpu::LumaStats), so
// they sit within half a bin of the exact value: |dL| <= sqrt(L)/4096 + (0.5/4096)^2.
double PercentileTolerance(double l) { return std::sqrt(l) / 4096.0 + 1.6e-8; }

// Real photographs shipped by Debian's opencv-doc package.
const std::string kPhotoDir = "/usr/share/doc/opencv-doc/examples/data/";

cv::Mat LoadPhoto(const std::string& name) {
  cv::Mat img = cv::imread(kPhotoDir + name, cv::IMREAD_COLOR);
  if (img.empty()) ADD_FAILURE() << "cannot read " << kPhotoDir << name << " (package opencv-doc)";
  return img;
}

cv::Mat Uniform(int b, int g, int r, int w = 64, int h = 48) {
  return cv::Mat(h, w, CV_8UC3, cv::Scalar(b, g, r));
}

double SrgbToLinear(double v) {
  return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4);
}

// Smallest angle between two directions, in degrees.
double AngleBetween(const LightingStats& a, const LightingStats& b) {
  const double dot = a.light_dir_x * b.light_dir_x + a.light_dir_y * b.light_dir_y;
  return std::acos(std::clamp(dot, -1.0, 1.0)) * 180.0 / std::numbers::pi;
}

void ExpectNear(const LightingStats& a, const LightingStats& b, double tol) {
  EXPECT_NEAR(a.p01, b.p01, tol);
  EXPECT_NEAR(a.p05, b.p05, tol);
  EXPECT_NEAR(a.p50, b.p50, tol);
  EXPECT_NEAR(a.p95, b.p95, tol);
  EXPECT_NEAR(a.p99, b.p99, tol);
  EXPECT_NEAR(a.mean_luminance, b.mean_luminance, tol);
  EXPECT_NEAR(a.clipped_shadows, b.clipped_shadows, tol);
  EXPECT_NEAR(a.clipped_highlights, b.clipped_highlights, tol);
  EXPECT_NEAR(a.log_avg_luminance, b.log_avg_luminance, tol);
  EXPECT_NEAR(a.exposure_ev, b.exposure_ev, tol);
  EXPECT_NEAR(a.rms_contrast, b.rms_contrast, tol);
  EXPECT_NEAR(a.dynamic_range_stops, b.dynamic_range_stops, tol);
  EXPECT_NEAR(a.cct_kelvin, b.cct_kelvin, tol);
  EXPECT_NEAR(a.chroma_x, b.chroma_x, tol);
  EXPECT_NEAR(a.chroma_y, b.chroma_y, tol);
  EXPECT_NEAR(a.light_dir_x, b.light_dir_x, tol);
  EXPECT_NEAR(a.light_dir_y, b.light_dir_y, tol);
  EXPECT_NEAR(a.light_direction_deg, b.light_direction_deg, tol);
  EXPECT_NEAR(a.light_direction_strength, b.light_direction_strength, tol);
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.height, b.height);
}

// ---------------------------------------------------------------- synthetic, exact expectations

TEST(LightingAnalysis, UniformGreyHasNoContrastNoClippingNoDirection) {
  const LightingStats s = AnalyzeFrame(Uniform(128, 128, 128));
  const double expected = SrgbToLinear(128 / 255.0);  // ~0.2159
  EXPECT_NEAR(s.p50, expected, PercentileTolerance(expected));
  EXPECT_NEAR(s.mean_luminance, expected, 1e-6);
  EXPECT_DOUBLE_EQ(s.p01, s.p99);
  EXPECT_DOUBLE_EQ(s.p05, s.p95);
  EXPECT_DOUBLE_EQ(s.p01, s.p50);
  EXPECT_NEAR(s.rms_contrast, 0.0, 1e-6);
  EXPECT_NEAR(s.dynamic_range_stops, 0.0, 1e-9);
  EXPECT_EQ(s.clipped_shadows, 0.0);
  EXPECT_EQ(s.clipped_highlights, 0.0);
  EXPECT_NEAR(s.light_direction_strength, 0.0, 1e-9);
  EXPECT_EQ(s.width, 64);
  EXPECT_EQ(s.height, 48);
}

TEST(LightingAnalysis, PureWhiteIsFullyClippedHighlights) {
  const LightingStats s = AnalyzeFrame(Uniform(255, 255, 255));
  EXPECT_EQ(s.clipped_highlights, 1.0);
  EXPECT_EQ(s.clipped_shadows, 0.0);
  EXPECT_NEAR(s.p50, 1.0, PercentileTolerance(1.0));
  EXPECT_NEAR(s.exposure_ev, std::log2(1.0 / 0.18), 1e-3);
}

TEST(LightingAnalysis, PureBlackIsFullyClippedShadowsAndStaysFinite) {
  const LightingStats s = AnalyzeFrame(Uniform(0, 0, 0));
  EXPECT_EQ(s.clipped_shadows, 1.0);
  EXPECT_EQ(s.clipped_highlights, 0.0);
  EXPECT_NEAR(s.p99, 0.0, PercentileTolerance(0.0));
  EXPECT_EQ(s.dynamic_range_stops, 0.0);
  EXPECT_LT(s.exposure_ev, -10.0);
  EXPECT_TRUE(std::isfinite(s.exposure_ev));
  // No colour to measure: falls back to the D65 white point instead of NaN.
  EXPECT_NEAR(s.chroma_x, 0.3127, 1e-4);
  EXPECT_NEAR(s.chroma_y, 0.3290, 1e-4);
  EXPECT_EQ(ToJson(s).dump().find("null"), std::string::npos);
}

TEST(LightingAnalysis, PrimariesHaveRec709Luminance) {
  // Input is BGR: a swapped channel order would show up here.
  EXPECT_NEAR(AnalyzeFrame(Uniform(255, 0, 0)).mean_luminance, 0.0722, 1e-4);
  EXPECT_NEAR(AnalyzeFrame(Uniform(0, 255, 0)).mean_luminance, 0.7152, 1e-4);
  EXPECT_NEAR(AnalyzeFrame(Uniform(0, 0, 255)).mean_luminance, 0.2126, 1e-4);
}

TEST(LightingAnalysis, ClippingNeedsEveryChannel) {
  // Saturated red: G and B are 0 but the pixel is not black; R is 255 but it is not white.
  const LightingStats red = AnalyzeFrame(Uniform(0, 0, 255));
  EXPECT_EQ(red.clipped_shadows, 0.0);
  EXPECT_EQ(red.clipped_highlights, 0.0);
  // Threshold edges: 2 counts as crushed, 3 does not; 253 counts as blown, 252 does not.
  EXPECT_EQ(AnalyzeFrame(Uniform(2, 2, 2)).clipped_shadows, 1.0);
  EXPECT_EQ(AnalyzeFrame(Uniform(3, 3, 3)).clipped_shadows, 0.0);
  EXPECT_EQ(AnalyzeFrame(Uniform(253, 253, 253)).clipped_highlights, 1.0);
  EXPECT_EQ(AnalyzeFrame(Uniform(252, 252, 252)).clipped_highlights, 0.0);
}

TEST(LightingAnalysis, HalfBlackHalfWhitePercentilesAndContrast) {
  cv::Mat img = Uniform(0, 0, 0, 100, 100);
  img(cv::Rect(0, 0, 100, 30)).setTo(cv::Scalar::all(255));  // top 30% white
  const LightingStats s = AnalyzeFrame(img);
  EXPECT_NEAR(s.clipped_highlights, 0.30, 1e-9);
  EXPECT_NEAR(s.clipped_shadows, 0.70, 1e-9);
  EXPECT_NEAR(s.p50, 0.0, PercentileTolerance(0.0));
  EXPECT_NEAR(s.p95, 1.0, PercentileTolerance(1.0));
  EXPECT_NEAR(s.mean_luminance, 0.30, 1e-6);
  EXPECT_NEAR(s.rms_contrast, std::sqrt(0.3 * 0.7), 1e-4);
  // p01 is floored at the luminance of code value 1, not 0: no infinity.
  EXPECT_NEAR(s.dynamic_range_stops, std::log2(1.0 / SrgbToLinear(1 / 255.0)), 1e-3);
  // Bright at the top: lit from above.
  EXPECT_GT(s.light_dir_y, 0.9);
}

TEST(LightingAnalysis, VerticalGradientBrightAtTopPointsUp) {
  cv::Mat img(256, 320, CV_8UC3);
  for (int y = 0; y < img.rows; ++y) img.row(y).setTo(cv::Scalar::all(255 - y));
  const LightingStats s = AnalyzeFrame(img);
  EXPECT_GT(s.light_dir_y, 0.9);
  EXPECT_NEAR(s.light_dir_x, 0.0, 1e-3);
  EXPECT_NEAR(s.light_direction_deg, 90.0, 1.0);
  EXPECT_GT(s.light_direction_strength, 0.9);
}

TEST(LightingAnalysis, HorizontalAndDiagonalGradients) {
  cv::Mat left_lit(200, 200, CV_8UC1);
  for (int x = 0; x < left_lit.cols; ++x) left_lit.col(x).setTo(250 - x);
  const LightingStats l = AnalyzeFrame(left_lit);
  EXPECT_LT(l.light_dir_x, -0.99);
  EXPECT_NEAR(std::abs(l.light_direction_deg), 180.0, 1.0);

  // Brightness grows towards the bottom-right corner: the light is down-right, at -45 degrees.
  cv::Mat diag(200, 200, CV_8UC1);
  for (int y = 0; y < diag.rows; ++y)
    for (int x = 0; x < diag.cols; ++x) diag.at<uchar>(y, x) = static_cast<uchar>((x + y) / 2 + 20);
  const LightingStats d = AnalyzeFrame(diag);
  EXPECT_NEAR(d.light_direction_deg, -45.0, 1.0);
  EXPECT_GT(d.light_direction_strength, 0.9);
}

TEST(LightingAnalysis, NeutralGreyReadsD65) {
  for (int v : {40, 128, 220}) {
    const LightingStats s = AnalyzeFrame(Uniform(v, v, v));
    EXPECT_NEAR(s.cct_kelvin, 6504.0, 300.0) << "grey " << v;
    EXPECT_NEAR(s.chroma_x, 0.3127, 1e-3) << "grey " << v;
    EXPECT_NEAR(s.chroma_y, 0.3290, 1e-3) << "grey " << v;
  }
}

TEST(LightingAnalysis, WarmTintReadsLowerCctThanCoolTint) {
  const LightingStats warm = AnalyzeFrame(Uniform(100, 128, 160));  // B < R
  const LightingStats cool = AnalyzeFrame(Uniform(160, 128, 100));  // B > R
  EXPECT_LT(warm.cct_kelvin, 5000.0);
  EXPECT_GT(cool.cct_kelvin, 8000.0);
  EXPECT_LT(warm.cct_kelvin, cool.cct_kelvin);
  EXPECT_GT(warm.chroma_x, cool.chroma_x);
}

TEST(LightingAnalysis, CctStaysInSaneRangeForExtremeColours) {
  // Pure red is far off the Planckian locus; McCamy's cubic turns back up there and would read
  // it as ~5000 K daylight without clamping to the monotonic branch.
  const LightingStats red = AnalyzeFrame(Uniform(0, 0, 255));
  EXPECT_LT(red.cct_kelvin, 2000.0);
  EXPECT_GE(red.cct_kelvin, 1000.0);
  const LightingStats blue = AnalyzeFrame(Uniform(255, 0, 0));
  EXPECT_LE(blue.cct_kelvin, 25000.0);
  EXPECT_GT(blue.cct_kelvin, 15000.0);
}

TEST(LightingAnalysis, MidGreyIsZeroEvAndDoublingIsOneStop) {
  // sRGB 118 decodes to linear 0.181, i.e. 18% mid-grey.
  EXPECT_NEAR(AnalyzeFrame(Uniform(118, 118, 118)).exposure_ev, 0.0, 0.05);
  // sRGB 162 decodes to ~0.361: twice mid-grey.
  EXPECT_NEAR(AnalyzeFrame(Uniform(162, 162, 162)).exposure_ev, 1.0, 0.05);
  // sRGB 82 decodes to ~0.0844: a bit over one stop under. 1e-4 is the documented log guard.
  EXPECT_NEAR(AnalyzeFrame(Uniform(82, 82, 82)).exposure_ev,
              std::log2((SrgbToLinear(82 / 255.0) + 1e-4) / 0.18), 1e-4);
}

TEST(LightingAnalysis, GreyAndBgraInputsMatchBgr) {
  const cv::Mat bgr = LoadPhoto("building.jpg");
  ASSERT_FALSE(bgr.empty());
  cv::Mat grey, grey_bgr, bgra;
  cv::cvtColor(bgr, grey, cv::COLOR_BGR2GRAY);
  cv::cvtColor(grey, grey_bgr, cv::COLOR_GRAY2BGR);
  cv::cvtColor(bgr, bgra, cv::COLOR_BGR2BGRA);
  ExpectNear(AnalyzeFrame(grey), AnalyzeFrame(grey_bgr), 1e-9);
  ExpectNear(AnalyzeFrame(bgra), AnalyzeFrame(bgr), 1e-9);
  EXPECT_NEAR(AnalyzeFrame(grey).cct_kelvin, 6504.0, 50.0);
}

TEST(LightingAnalysis, RejectsEmptyAndUnsupportedImages) {
  EXPECT_THROW(AnalyzeFrame(cv::Mat()), std::invalid_argument);
  EXPECT_THROW(AnalyzeFrame(cv::Mat(10, 10, CV_32FC3, cv::Scalar::all(0.5))), std::invalid_argument);
  EXPECT_THROW(AnalyzeFrame(cv::Mat(10, 10, CV_8UC2, cv::Scalar::all(1))), std::invalid_argument);
  EXPECT_THROW(Aggregate({}), std::invalid_argument);
}

TEST(LightingAnalysis, ReportsInputSizeNotWorkingSize) {
  const LightingStats s = AnalyzeFrame(Uniform(90, 90, 90, 2000, 1000));
  EXPECT_EQ(s.width, 2000);
  EXPECT_EQ(s.height, 1000);
}

// ---------------------------------------------------------------- aggregation

TEST(LightingAnalysis, AggregateOfIdenticalFramesEqualsTheFrame) {
  const cv::Mat img = LoadPhoto("leuvenA.jpg");
  ASSERT_FALSE(img.empty());
  const LightingStats f = AnalyzeFrame(img);
  ExpectNear(Aggregate({f, f}), f, 1e-9);
  ExpectNear(Aggregate({f}), f, 1e-12);
}

TEST(LightingAnalysis, AggregatePoolsVarianceAndAveragesExposure) {
  const LightingStats black = AnalyzeFrame(Uniform(0, 0, 0));
  const LightingStats white = AnalyzeFrame(Uniform(255, 255, 255));
  const LightingStats a = Aggregate({black, white});
  EXPECT_NEAR(a.mean_luminance, 0.5, 1e-6);
  // Each frame is flat, but the sampled video alternates black/white: pooled std-dev is 0.5.
  EXPECT_NEAR(a.rms_contrast, 0.5, 1e-6);
  EXPECT_NEAR(a.clipped_shadows, 0.5, 1e-12);
  EXPECT_NEAR(a.clipped_highlights, 0.5, 1e-12);
  EXPECT_NEAR(a.exposure_ev, (black.exposure_ev + white.exposure_ev) / 2, 1e-9);
  EXPECT_NEAR(a.log_avg_luminance, std::sqrt(black.log_avg_luminance * white.log_avg_luminance), 1e-12);
}

TEST(LightingAnalysis, AggregateDirectionIsStrengthWeightedMeanVector) {
  const cv::Mat img = LoadPhoto("leuvenA.jpg");
  ASSERT_FALSE(img.empty());
  cv::Mat flipped;
  cv::flip(img, flipped, 0);
  const LightingStats up = AnalyzeFrame(img);
  const LightingStats down = AnalyzeFrame(flipped);
  // Opposite frames cancel: whatever remains is weak.
  EXPECT_LT(Aggregate({up, down}).light_direction_strength, 0.1 * up.light_direction_strength);
  // Two agreeing frames and one flat frame: same direction, strength diluted by a third.
  const LightingStats flat = AnalyzeFrame(Uniform(128, 128, 128));
  const LightingStats a = Aggregate({up, up, flat});
  EXPECT_NEAR(a.light_dir_x, up.light_dir_x, 1e-9);
  EXPECT_NEAR(a.light_dir_y, up.light_dir_y, 1e-9);
  EXPECT_NEAR(a.light_direction_strength, up.light_direction_strength * 2 / 3, 1e-9);
}

TEST(LightingAnalysis, AggregateColourIsGreyWorldOverAllFrames) {
  const LightingStats warm = AnalyzeFrame(Uniform(100, 128, 160));
  const LightingStats cool = AnalyzeFrame(Uniform(160, 128, 100));
  const LightingStats a = Aggregate({warm, cool});
  // The mean of the two tints' linear RGB is neutral-ish, so the video reads near daylight,
  // between the two and far from both.
  EXPECT_GT(a.cct_kelvin, warm.cct_kelvin + 1000);
  EXPECT_LT(a.cct_kelvin, cool.cct_kelvin - 1000);
  EXPECT_NEAR(a.cct_kelvin, 6504.0, 500.0);
}

// ---------------------------------------------------------------- JSON

TEST(LightingAnalysis, JsonLayout) {
  const cv::Mat img = LoadPhoto("orange.jpg");
  ASSERT_FALSE(img.empty());
  const LightingStats s = AnalyzeFrame(img);
  const nlohmann::json j = ToJson(s);
  EXPECT_DOUBLE_EQ(j.at("luminance_percentiles").at("p1").get<double>(), s.p01);
  EXPECT_DOUBLE_EQ(j.at("luminance_percentiles").at("p5").get<double>(), s.p05);
  EXPECT_DOUBLE_EQ(j.at("luminance_percentiles").at("p50").get<double>(), s.p50);
  EXPECT_DOUBLE_EQ(j.at("luminance_percentiles").at("p95").get<double>(), s.p95);
  EXPECT_DOUBLE_EQ(j.at("luminance_percentiles").at("p99").get<double>(), s.p99);
  EXPECT_DOUBLE_EQ(j.at("mean_luminance").get<double>(), s.mean_luminance);
  EXPECT_DOUBLE_EQ(j.at("clipped_shadows").get<double>(), s.clipped_shadows);
  EXPECT_DOUBLE_EQ(j.at("clipped_highlights").get<double>(), s.clipped_highlights);
  EXPECT_DOUBLE_EQ(j.at("log_average_luminance").get<double>(), s.log_avg_luminance);
  EXPECT_DOUBLE_EQ(j.at("exposure_ev").get<double>(), s.exposure_ev);
  EXPECT_DOUBLE_EQ(j.at("rms_contrast").get<double>(), s.rms_contrast);
  EXPECT_DOUBLE_EQ(j.at("dynamic_range_stops").get<double>(), s.dynamic_range_stops);
  EXPECT_DOUBLE_EQ(j.at("color_temperature_k").get<double>(), s.cct_kelvin);
  EXPECT_DOUBLE_EQ(j.at("chromaticity").at("x").get<double>(), s.chroma_x);
  EXPECT_DOUBLE_EQ(j.at("chromaticity").at("y").get<double>(), s.chroma_y);
  EXPECT_DOUBLE_EQ(j.at("light_direction").at("x").get<double>(), s.light_dir_x);
  EXPECT_DOUBLE_EQ(j.at("light_direction").at("y").get<double>(), s.light_dir_y);
  EXPECT_DOUBLE_EQ(j.at("light_direction").at("degrees").get<double>(), s.light_direction_deg);
  EXPECT_DOUBLE_EQ(j.at("light_direction").at("strength").get<double>(), s.light_direction_strength);
  EXPECT_EQ(j.at("width").get<int>(), 512);
  EXPECT_EQ(j.at("height").get<int>(), 512);
}

// ---------------------------------------------------------------- real photographs

// apple.jpg: a red apple on a yellow-green backdrop shot under warm (tungsten-like) light; the
// whole frame has an orange/yellow cast. stuff.jpg: pen, coin and lighter on a grey desk under
// neutral/cool indoor light, almost no saturated colour.
TEST(LightingAnalysisPhotos, WarmPhotoReadsWarmerThanNeutralPhoto) {
  const cv::Mat warm_img = LoadPhoto("apple.jpg");
  const cv::Mat neutral_img = LoadPhoto("stuff.jpg");
  ASSERT_FALSE(warm_img.empty());
  ASSERT_FALSE(neutral_img.empty());
  const LightingStats warm = AnalyzeFrame(warm_img);
  const LightingStats neutral = AnalyzeFrame(neutral_img);
  EXPECT_LT(warm.cct_kelvin, 4500.0);
  EXPECT_NEAR(neutral.cct_kelvin, 6500.0, 1000.0);
  EXPECT_LT(warm.cct_kelvin + 1500.0, neutral.cct_kelvin);
  EXPECT_GT(warm.chroma_x, neutral.chroma_x);
}

// leuvenA.jpg: a street of brick houses under an overcast sky; the bright sky fills the top
// of the frame and the cobbles at the bottom are in shade. There is no true night scene among
// the sample photos, so the night version is synthesised by scaling the 8-bit values by 0.15.
TEST(LightingAnalysisPhotos, DarkenedPhotoReadsUnderexposed) {
  const cv::Mat day = LoadPhoto("leuvenA.jpg");
  ASSERT_FALSE(day.empty());
  cv::Mat night;
  day.convertTo(night, -1, 0.15);
  const LightingStats d = AnalyzeFrame(day);
  const LightingStats n = AnalyzeFrame(night);
  EXPECT_LT(n.exposure_ev, -2.0);
  EXPECT_LT(n.p50, 0.01);
  EXPECT_LT(n.mean_luminance, 0.02);
  EXPECT_GT(d.exposure_ev, n.exposure_ev + 3.0);
  EXPECT_GT(d.p50, 5.0 * n.p50);
  EXPECT_GT(d.exposure_ev, -2.0);
  // Darkening changes neither where the light comes from nor (much) its colour.
  EXPECT_LT(AngleBetween(d, n), 10.0);
  EXPECT_NEAR(d.cct_kelvin, n.cct_kelvin, 500.0);
}

TEST(LightingAnalysisPhotos, SkyLitStreetIsLitFromAboveAndFlipsWithTheImage) {
  const cv::Mat img = LoadPhoto("leuvenA.jpg");
  ASSERT_FALSE(img.empty());
  const LightingStats s = AnalyzeFrame(img);
  EXPECT_GT(s.light_dir_y, 0.9);
  EXPECT_NEAR(s.light_direction_deg, 90.0, 25.0);
  EXPECT_GT(s.light_direction_strength, 0.2);

  cv::Mat vflip, hflip;
  cv::flip(img, vflip, 0);
  cv::flip(img, hflip, 1);
  const LightingStats v = AnalyzeFrame(vflip);
  const LightingStats h = AnalyzeFrame(hflip);
  EXPECT_LT(v.light_dir_y, -0.9);
  EXPECT_NEAR(v.light_dir_x, s.light_dir_x, 0.02);
  // The street is nearly symmetric, so x is small; a mirror must still mirror it.
  EXPECT_NEAR(h.light_dir_x, -s.light_dir_x, 0.02);
  EXPECT_NEAR(h.light_dir_y, s.light_dir_y, 0.02);
}

// building.jpg: a white office block in daylight, sky at the top left, dark lawn along the bottom.
TEST(LightingAnalysisPhotos, DaylitBuildingIsLitFromAbove) {
  const cv::Mat img = LoadPhoto("building.jpg");
  ASSERT_FALSE(img.empty());
  EXPECT_GT(AnalyzeFrame(img).light_dir_y, 0.9);
  cv::Mat vflip;
  cv::flip(img, vflip, 0);
  EXPECT_LT(AnalyzeFrame(vflip).light_dir_y, -0.9);
}

// orange.jpg: an orange lit from the upper right; its left half falls into shadow.
TEST(LightingAnalysisPhotos, SideLitOrangeIsLitFromTheRightAndMirrors) {
  const cv::Mat img = LoadPhoto("orange.jpg");
  ASSERT_FALSE(img.empty());
  const LightingStats s = AnalyzeFrame(img);
  EXPECT_GT(s.light_dir_x, 0.5);
  EXPECT_GT(s.light_dir_y, 0.0);
  cv::Mat hflip;
  cv::flip(img, hflip, 1);
  const LightingStats h = AnalyzeFrame(hflip);
  EXPECT_LT(h.light_dir_x, -0.5);
  EXPECT_NEAR(h.light_dir_y, s.light_dir_y, 0.05);
}

class LightingScaleInvariance : public ::testing::TestWithParam<const char*> {};

TEST_P(LightingScaleInvariance, DoubleSizeGivesCloseResults) {
  const cv::Mat img = LoadPhoto(GetParam());
  ASSERT_FALSE(img.empty());
  cv::Mat big;
  cv::resize(img, big, cv::Size(), 2.0, 2.0, cv::INTER_CUBIC);
  const LightingStats a = AnalyzeFrame(img);
  const LightingStats b = AnalyzeFrame(big);
  EXPECT_EQ(b.width, 2 * a.width);
  EXPECT_NEAR(a.clipped_shadows, b.clipped_shadows, 0.02);
  EXPECT_NEAR(a.clipped_highlights, b.clipped_highlights, 0.02);
  EXPECT_NEAR(a.p05, b.p05, 0.01);
  EXPECT_NEAR(a.p50, b.p50, 0.01);
  EXPECT_NEAR(a.p95, b.p95, 0.01);
  EXPECT_NEAR(a.mean_luminance, b.mean_luminance, 0.01);
  EXPECT_NEAR(a.rms_contrast, b.rms_contrast, 0.01);
  EXPECT_NEAR(a.exposure_ev, b.exposure_ev, 0.05);
  EXPECT_NEAR(a.cct_kelvin, b.cct_kelvin, 100.0);
  EXPECT_NEAR(a.light_direction_strength, b.light_direction_strength, 0.05);
  EXPECT_LT(AngleBetween(a, b), 3.0);
}

// starry_night.jpg has a visible fraction (~5%) of crushed blacks, so clipping is exercised too.
INSTANTIATE_TEST_SUITE_P(Photos, LightingScaleInvariance,
                         ::testing::Values("leuvenA.jpg", "orange.jpg", "starry_night.jpg"));

}  // namespace
}  // namespace framemill::lighting
