// Host decoders on synthetic heads: no model files needed.
#include "models/decode.h"

#include <cmath>
#include <numeric>
#include <random>

#include <gtest/gtest.h>
#include <opencv2/imgproc.hpp>

#include "tests/support/chaos.h"

#include "tests/support/model_test_support.h"

namespace framemill::models {
namespace {

float Logit(float p) { return std::log(p / (1 - p)); }

TEST(L2NormalizeTest, UnitLengthAndDirection) {
  Embedding e = L2Normalize({3.f, 0.f, -4.f});
  EXPECT_FLOAT_EQ(e.norm, 5.f);
  EXPECT_FLOAT_EQ(e.values[0], 0.6f);
  EXPECT_FLOAT_EQ(e.values[2], -0.8f);
  Embedding z = L2Normalize({0.f, 0.f});
  EXPECT_EQ(z.values, std::vector<float>({0.f, 0.f}));
}

TEST(FaceResTest, AgeInterpolatesTowardsLargerNeighbour) {
  std::vector<float> age(100, 0.f);
  age[3] = 0.6f;
  age[4] = 0.3f;
  age[2] = 0.1f;
  FaceDescription d = DecodeFaceRes({1.f, 1.f}, age, 0.75f);
  EXPECT_NEAR(d.age, (10 * 3 + 100 * 0.3f) / 10.f, 1e-4);
  EXPECT_EQ(d.gender, "male");
  EXPECT_NEAR(d.gender_confidence, 0.5f, 1e-6);  // |p - 0.5| * 2, truncated to 0.01
  EXPECT_EQ(DecodeFaceRes({1.f}, age, 0.2f).gender, "female");
}

TEST(BlazeFaceTest, AnchorsMatchTheTwoGrids) {
  auto a = BlazeFaceAnchors(256);
  ASSERT_EQ(a.size(), 896u);
  EXPECT_EQ(a[0], cv::Point2f(8, 8));
  EXPECT_EQ(a[1], cv::Point2f(8, 8));
  EXPECT_EQ(a[2], cv::Point2f(24, 8));
  EXPECT_EQ(a[512], cv::Point2f(16, 16));
  EXPECT_EQ(a[517], cv::Point2f(16, 16));
  EXPECT_EQ(a[518], cv::Point2f(48, 16));
  EXPECT_EQ(a[895], cv::Point2f(240, 240));
}

TEST(BlazeFaceTest, DecodesOneFaceAndSuppressesItsNeighbour) {
  std::vector<float> rows(896 * 17, 0.f);
  for (int i = 0; i < 896; ++i) rows[i * 17] = -10.f;  // nothing
  auto set = [&](int i, float p, float dx, float dy, float w, float h) {
    float* r = &rows[i * 17];
    r[0] = Logit(p); r[1] = dx; r[2] = dy; r[3] = w; r[4] = h;
    for (int k = 0; k < 6; ++k) { r[5 + 2 * k] = k; r[6 + 2 * k] = -k; }
  };
  // Anchor 2 is centred at (24, 8); anchor 3 has the same centre, overlapping box.
  set(2, 0.9f, 4.f, 2.f, 20.f, 10.f);
  set(3, 0.8f, 5.f, 2.f, 20.f, 10.f);
  // Anchor 895 at (240, 240): a separate face.
  set(895, 0.7f, 0.f, 0.f, 16.f, 16.f);
  auto faces = DecodeBlazeFace(rows, cv::Size(512, 256));
  ASSERT_EQ(faces.size(), 2u);
  EXPECT_NEAR(faces[0].score, 0.9f, 1e-5);
  // centre (28, 10) in input pixels, x scaled by 2 for the 512-wide image.
  EXPECT_NEAR(faces[0].x1, (28 - 10) * 2.f, 1e-4);
  EXPECT_NEAR(faces[0].x2, (28 + 10) * 2.f, 1e-4);
  EXPECT_NEAR(faces[0].y1, 5.f, 1e-4);
  EXPECT_NEAR(faces[0].y2, 15.f, 1e-4);
  EXPECT_NEAR(faces[0].keypoints[3].x, (3 + 24) * 2.f, 1e-4);
  EXPECT_NEAR(faces[0].keypoints[3].y, -3 + 8.f, 1e-4);
  EXPECT_NEAR(faces[1].score, 0.7f, 1e-5);

  BlazeFaceOptions w;
  w.weighted_nms = true;
  auto blended = DecodeBlazeFace(rows, cv::Size(256, 256), w);
  ASSERT_EQ(blended.size(), 2u);
  // Weighted mean of centres 28 and 29 with weights 0.9, 0.8.
  float cx = (0.9f * 28 + 0.8f * 29) / 1.7f;
  EXPECT_NEAR((blended[0].x1 + blended[0].x2) / 2, cx, 1e-4);
  EXPECT_NEAR(blended[0].score, 0.9f, 1e-5);
}

TEST(NmsTest, KeepsByScoreAndDropsOverlaps) {
  std::vector<cv::Rect2f> b = {{0, 0, 10, 10}, {1, 1, 10, 10}, {20, 20, 5, 5}, {0, 0, 10, 10}};
  std::vector<float> s = {0.5f, 0.9f, 0.6f, 0.1f};
  EXPECT_EQ(Nms(b, s, 0.3f, 0.2f, 10), std::vector<int>({1, 2}));
  EXPECT_EQ(Nms(b, s, 0.3f, 0.2f, 1), std::vector<int>({1}));
  EXPECT_EQ(Nms(b, s, 0.99f, 0.0f, 10), std::vector<int>({1, 2, 0}));  // 3 duplicates 0
}

// A synthetic MoveNet: one person centred at cell (20, 30), keypoints spread around it.
TEST(MoveNetTest, FollowsCentreRegressionAndOffsets) {
  const int H = 48, W = 48, K = 17;
  std::vector<float> heat(H * W * K, 0.01f), center(H * W, 0.01f), reg(H * W * 2 * K, 0.f),
      off(H * W * 2 * K, 0.f);
  center[20 * W + 30] = 0.9f;
  center[24 * W + 24] = 0.3f;  // weaker, but at the frame centre: weight favours it x3.4
  for (int k = 0; k < K; ++k) {
    const int ky = 10 + k, kx = 5 + 2 * k;
    reg[(20 * W + 30) * 2 * K + 2 * k] = ky - 20 + 0.3f;
    reg[(20 * W + 30) * 2 * K + 2 * k + 1] = kx - 30 - 0.2f;
    heat[(ky * W + kx) * K + k] = 0.8f;
    heat[(ky * W + kx + 12) * K + k] = 0.85f;  // stronger but far from the regressed spot
    off[(ky * W + kx) * 2 * K + 2 * k] = 0.25f;
    off[(ky * W + kx) * 2 * K + 2 * k + 1] = -0.5f;
  }
  MoveNetHeads hd{H, W, K, heat.data(), center.data(), false, reg.data(), off.data()};
  auto kps = DecodeMoveNet(hd);
  ASSERT_EQ(kps.size(), 17u);
  // Unweighted, the frame-centre cell wins (0.3 * 0.5557 > 0.9 / (sqrt(52) + 1.8)).
  EXPECT_NE(kps[0].y * 48, 10 + 0.25f);
  hd.center_weighted = true;  // same heads read as pre-weighted: the 0.9 cell wins
  kps = DecodeMoveNet(hd);
  for (int k = 0; k < K; ++k) {
    EXPECT_NEAR(kps[k].y * 48, 10 + k + 0.25f, 0.02f) << k;
    EXPECT_NEAR(kps[k].x * 48, 5 + 2 * k - 0.5f, 0.02f) << k;
    EXPECT_FLOAT_EQ(kps[k].score, 0.8f);
  }
}

TEST(MoveNetTest, CentreWeightFavoursTheMiddle) {
  const int H = 48, W = 48, K = 17;
  std::vector<float> heat(H * W * K, 0.f), center(H * W, 0.f), reg(H * W * 2 * K, 0.f),
      off(H * W * 2 * K, 0.f);
  center[2 * W + 2] = 0.9f;
  center[24 * W + 24] = 0.3f;
  for (int k = 0; k < K; ++k) heat[(2 * W + 2) * K + k] = heat[(24 * W + 24) * K + k] = 0.5f;
  MoveNetHeads hd{H, W, K, heat.data(), center.data(), false, reg.data(), off.data()};
  auto kps = DecodeMoveNet(hd);
  // Regressing to (24,24) and scoring by distance, every keypoint lands in the middle.
  EXPECT_NEAR(kps[0].y * 48, 24, 0.05f);
  hd.center_weighted = true;
  kps = DecodeMoveNet(hd);
  EXPECT_NEAR(kps[0].y * 48, 2, 0.05f);
}

// Two people on a 16x16 grid. The strongest heatmap cell of every keypoint lies in B's box;
// A's keypoints come from the weaker cell at A's regressed point, inside A's own box.
TEST(MultiPoseTest, PeopleFromCentrePeaksWithKeypointsInsideTheirOwnBoxes) {
  const int H = 16, W = 16, K = 17;
  std::vector<float> center(H * W, 0.f), scale(H * W * 2, 0.f), boff(H * W * 2, 0.f),
      reg(H * W * 2 * K, 0.f), heat(H * W * K, 0.f), off(H * W * 2 * K, 0.f);
  const int a = 4 * W + 4, b = 10 * W + 12;  // centre cells of A (y 4, x 4) and B (y 10, x 12)
  center[a] = 0.9f;
  center[a + 1] = 0.85f;  // A's neighbour: not a peak of the 5x5 pool
  center[b] = 0.6f;
  for (int c : {a, b}) {
    scale[c * 2] = 6;  // 6 cells tall, 4 wide
    scale[c * 2 + 1] = 4;
  }
  boff[a * 2] = 0.5f;  // A's centre at (4.5, 4)
  for (int k = 0; k < K; ++k) {
    reg[a * 2 * K + 2 * k] = 1;  // A's keypoints regress to (5, 5)
    reg[a * 2 * K + 2 * k + 1] = 1;
    heat[(5 * W + 5) * K + k] = 0.5f;    // near A's regressed point, inside A's box
    heat[(10 * W + 12) * K + k] = 0.9f;  // stronger, but in B's box only
    off[(5 * W + 5) * 2 * K + 2 * k] = 0.25f;
  }
  MultiPoseHeads hd{H, W, K, 2, center.data(), scale.data(), boff.data(), reg.data(), heat.data(), off.data()};
  auto people = DecodeMultiPose(hd);
  ASSERT_EQ(people.size(), 2u);
  const PosePerson& p = people[0];  // the strongest centre first
  EXPECT_FLOAT_EQ(p.ymin * H, 1.5f);
  EXPECT_FLOAT_EQ(p.ymax * H, 7.5f);
  EXPECT_FLOAT_EQ(p.xmin * W, 2.f);
  EXPECT_FLOAT_EQ(p.xmax * W, 6.f);
  for (int k = 0; k < K; ++k) {
    EXPECT_FLOAT_EQ(p.keypoints[k].y * H, 5.25f) << k;
    EXPECT_FLOAT_EQ(p.keypoints[k].x * W, 5.f) << k;
    EXPECT_FLOAT_EQ(p.keypoints[k].score, 0.5f);  // exp(0) at the regressed point
  }
  // Every keypoint is valid (> 0.127): the person's score is its centre's times their mean.
  EXPECT_FLOAT_EQ(p.score, 0.9f * 0.5f);
  EXPECT_NEAR(people[1].ymin * H, 7.f, 1e-6);  // B: 6 tall about row 10, no offset
}

TEST(BlazePoseTest, SigmoidsVisibility) {
  std::vector<float> ld(195, 0.f);
  ld[5 * 3 + 0] = 100; ld[5 * 3 + 1] = 50; ld[5 * 3 + 3] = 0; ld[5 * 3 + 4] = Logit(0.75f);
  auto l = DecodeBlazePose(ld);
  ASSERT_EQ(l.size(), 39u);
  EXPECT_FLOAT_EQ(l[3].x, 100);
  EXPECT_FLOAT_EQ(l[3].visibility, 0.5f);
  EXPECT_NEAR(l[3].presence, 0.75f, 1e-6);
}

TEST(CenterNetTest, PeaksTopKAndBoxes) {
  const int h = 8, w = 8, c = 3;
  std::vector<float> heat(h * w * c, 0.f), wh(h * w * 4, 1.f);
  heat[(2 * w + 3) * c + 1] = 0.9f;   // a peak
  heat[(2 * w + 4) * c + 1] = 0.8f;   // its neighbour: not a peak
  heat[(6 * w + 6) * c + 2] = 0.5f;   // another peak
  wh[(2 * w + 3) * 4 + 0] = 2; wh[(2 * w + 3) * 4 + 3] = 5;
  auto d = CenterNetTopK(heat.data(), wh.data(), h, w, c, 4, 4.f);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_FLOAT_EQ(d[0].score, 0.9f);
  EXPECT_EQ(d[0].class_id, 1);
  EXPECT_FLOAT_EQ(d[0].x1, 3 * 4 - 2);
  EXPECT_FLOAT_EQ(d[0].y2, 2 * 4 + 5);
  EXPECT_FLOAT_EQ(d[1].score, 0.5f);
  EXPECT_EQ(d[1].class_id, 2);
  EXPECT_FLOAT_EQ(d[2].score, 0.f);  // zeros follow in index order
  auto f = FilterDetections(d, cv::Size(32, 32), cv::Size(64, 32));
  ASSERT_EQ(f.size(), 2u);
  EXPECT_FLOAT_EQ(f[0].x1, (3 * 4 - 2) * 2.f);
  EXPECT_STREQ(CocoLabel(0), "person");
}

// The definition the fast top-k keeps to: every score that is the max of its 3x3
// neighbourhood stays, the rest are 0, and the k best win, ties by index (what
// CenterNetTopK computed before it sorted the peaks only).
std::vector<Detection> TopKByDefinition(const std::vector<float>& heat, const std::vector<float>& wh, int h,
                                        int w, int c, int k, float stride) {
  const int total = h * w * c;
  std::vector<float> kept(total);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int ch = 0; ch < c; ++ch) {
        const float v = heat[(y * w + x) * c + ch];
        float m = v;
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx) {
            const int yy = y + dy, xx = x + dx;
            if (yy >= 0 && yy < h && xx >= 0 && xx < w) m = std::max(m, heat[(yy * w + xx) * c + ch]);
          }
        kept[(y * w + x) * c + ch] = v == m ? v : 0.f;
      }
  std::vector<int> idx(total);
  std::iota(idx.begin(), idx.end(), 0);
  k = std::min(k, total);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int a, int b) { return kept[a] > kept[b] || (kept[a] == kept[b] && a < b); });
  std::vector<Detection> out;
  for (int i = 0; i < k; ++i) {
    const int id = idx[i], cls = id % c, pix = id / c, y = pix / w, x = pix % w;
    const float* b = wh.data() + pix * 4;
    out.push_back({x * stride - b[0], y * stride - b[1], x * stride + b[2], y * stride + b[3], kept[id], cls});
  }
  return out;
}

// Random heat maps (seeded, the seed printed) with plateaus of equal scores, saturated ones
// (sigmoid's 1.0) and few peaks: the same detections, in the same order, as the definition.
TEST(CenterNetTest, TopKIsTheDefinitionsOnRandomHeatMaps) {
  const uint32_t seed = framemill::testing::ChaosSeed();  // prints FRAMEMILL_TEST_SEED
  std::mt19937 rng(seed);
  for (int round = 0; round < 40; ++round) {
    const int h = 4 + static_cast<int>(rng() % 30), w = 4 + static_cast<int>(rng() % 30), c = 1 + static_cast<int>(rng() % 5);
    const int levels = round % 4 == 0 ? 3 : 1000;  // few levels: many ties
    std::vector<float> heat(h * w * c), wh(h * w * 4);
    for (float& v : heat) v = static_cast<float>(rng() % levels) / static_cast<float>(levels - 1);
    if (round % 5 == 1) for (float& v : heat) v = rng() % 10 == 0 ? v : 0.f;  // mostly zeros
    for (float& v : wh) v = static_cast<float>(rng() % 50);
    for (int k : {1, 7, 100}) {
      const auto fast = CenterNetTopK(heat.data(), wh.data(), h, w, c, k, 4.f);
      const auto ref = TopKByDefinition(heat, wh, h, w, c, k, 4.f);
      ASSERT_EQ(fast.size(), ref.size());
      for (size_t i = 0; i < ref.size(); ++i) {
        EXPECT_EQ(fast[i].score, ref[i].score) << "round " << round << " k " << k << " at " << i;
        EXPECT_EQ(fast[i].class_id, ref[i].class_id) << "round " << round << " k " << k << " at " << i;
        EXPECT_EQ(fast[i].x1, ref[i].x1);
        EXPECT_EQ(fast[i].y2, ref[i].y2);
      }
    }
  }
}

TEST(MaskTest, ResizesAndThresholds) {
  OutputTensor t{"mask", {1, 4, 4, 1}, std::vector<float>(16, 0.1f)};
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 2; ++x) t.data[y * 4 + x] = 0.9f;
  auto m = DecodeMask(t, cv::Size(40, 40));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->binary.size(), cv::Size(40, 40));
  EXPECT_NEAR(m->coverage, 0.25, 0.03);
  EXPECT_EQ(m->bbox.x, 0);
  EXPECT_NEAR(m->bbox.width, 20, 1);
  OutputTensor bad{"x", {1, 4, 4, 2}, std::vector<float>(32, 0.f)};
  EXPECT_FALSE(DecodeMask(bad, cv::Size(4, 4)).ok());
  EXPECT_FLOAT_EQ(testing::MaskIoU(m->binary, m->binary), 1.f);
}

TEST(FaceMeshTest, LandmarksScaleToTheCropAndTheMouthOpensAsTheLipsPart) {
  ModelManifest m;
  m.name = "facemesh";
  m.postprocess = "facemesh";
  m.preprocess.width = m.preprocess.height = 192;
  std::vector<float> mesh(3 * 468, 0.f);
  auto put = [&](int i, float x, float y) { mesh[3 * i] = x, mesh[3 * i + 1] = y; };
  put(61, 70, 120);   // mouth corners 40 px apart
  put(291, 110, 120);
  put(13, 90, 116);   // inner lips 10 px apart
  put(14, 90, 126);
  std::vector<OutputTensor> outs = {{"mesh", {1, 1404}, mesh}, {"faceflag", {1, 1}, {0.9f}}};
  auto f = DecodeFaceMesh(m, outs, cv::Size(384, 384));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_FLOAT_EQ(f->presence, 0.9f);
  ASSERT_EQ(f->points.size(), 468u);
  EXPECT_FLOAT_EQ(f->points[291].x, 220.f);  // twice the input's pixels
  ASSERT_TRUE(MouthOpening(*f).has_value());
  EXPECT_NEAR(*MouthOpening(*f), 0.25, 1e-6);  // the ratio does not depend on the scale
  put(14, 90, 116);
  outs[0].data = mesh;
  EXPECT_NEAR(*MouthOpening(*DecodeFaceMesh(m, outs, cv::Size(192, 192))), 0.0, 1e-9);
  put(291, 70.5f, 120);  // corners half a pixel apart: no mouth to measure
  outs[0].data = mesh;
  EXPECT_FALSE(MouthOpening(*DecodeFaceMesh(m, outs, cv::Size(192, 192))).has_value());
  // Frontalness: the nose tip (1) halfway between the face's edges (234, 454) is frontal;
  // a third of the way, 1 - 1/3 / 1 = 0.667; at an edge, profile.
  put(234, 40, 100);
  put(454, 140, 100);
  put(1, 90, 110);
  outs[0].data = mesh;
  EXPECT_NEAR(FaceFrontalness(*DecodeFaceMesh(m, outs, cv::Size(192, 192))), 1.0, 1e-6);
  put(1, 73.333336f, 110);
  outs[0].data = mesh;
  EXPECT_NEAR(FaceFrontalness(*DecodeFaceMesh(m, outs, cv::Size(384, 384))), 2.0 / 3.0, 1e-5);
  put(1, 140, 110);
  outs[0].data = mesh;
  EXPECT_NEAR(FaceFrontalness(*DecodeFaceMesh(m, outs, cv::Size(192, 192))), 0.0, 1e-6);
  auto j = DecodeOutputs(m, outs, cv::Size(192, 192));  // `framemill infer` decodes it
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["landmarks"].size(), 468u);
  EXPECT_FALSE((*j).contains("mouth_opening"));
  outs.pop_back();
  EXPECT_FALSE(DecodeFaceMesh(m, outs, cv::Size(192, 192)).ok());
}

TEST(DecodeOutputsTest, ChoosesByPostprocessAndRefusesUnknown) {
  ModelManifest m;
  m.name = "x";
  m.postprocess = "l2_normalize";
  std::vector<OutputTensor> outs = {{"embedding", {1, 2}, {3.f, 4.f}}};
  auto j = DecodeOutputs(m, outs, cv::Size(10, 10));
  ASSERT_TRUE(j.ok());
  EXPECT_FLOAT_EQ((*j)["embedding"][0].get<float>(), 0.6f);
  m.postprocess = "nonsense";
  EXPECT_FALSE(DecodeOutputs(m, outs, cv::Size(10, 10)).ok());
  m.postprocess = "centernet";
  EXPECT_FALSE(DecodeOutputs(m, outs, cv::Size(10, 10)).ok());
}

}  // namespace
}  // namespace framemill::models
