// Our CPU path (cv::imread, crop, gpu::PreprocessCpu, the engine on oneDNN, host decode) against the
// references tools/models/make_reference.sh made from the original TF.js graphs (ISNet:
// onnxruntime-node). Reads FRAMEMILL_MODELS (default <repo>/.cache/models) and
// FRAMEMILL_GOLDEN_DIR (default <repo>/.cache/golden); skips when either lacks a model
// unless FRAMEMILL_REQUIRE_MODELS=1. Prints the measured numbers for quoting.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "gpu/ops.h"
#include "media/geometry.h"
#include "models/decode.h"
#include "models/model_cache.h"
#include "models/manifest.h"

#include "tests/support/model_test_support.h"

namespace framemill::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using testing::GoldenDir;
using testing::ModelsDir;
using testing::ModelsRequired;

json ReadJson(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

using testing::ReadF32;

// A reference tensor: its raw file when it has one, else inline data.
std::vector<float> RefData(const json& t, const fs::path& dir) {
  if (t.contains("raw")) return ReadF32(dir / t["raw"].get<std::string>());
  return t["data"].get<std::vector<float>>();
}

struct Diff {
  double cosine = 0, max_abs = 0, max_ref = 0;
};
Diff Compare(const std::vector<float>& a, const std::vector<float>& b) {
  Diff d;
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
    d.max_abs = std::max(d.max_abs, double(std::fabs(a[i] - b[i])));
    d.max_ref = std::max(d.max_ref, double(std::fabs(b[i])));
  }
  d.cosine = (aa == 0 && bb == 0) ? 1.0 : ab / std::sqrt(aa * bb + 1e-300);
  return d;
}

void Report(const std::string& key, double v) {
  ::testing::Test::RecordProperty(key, std::to_string(v));
  std::printf("[golden] %s = %.6g\n", key.c_str(), v);
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, MatchesReference) {
  const std::string name = GetParam();
  auto man = LoadManifest(ModelsDir() + "/" + name);
  const fs::path in_dir = fs::path(GoldenDir()) / "inputs" / name;
  const fs::path ref_dir = fs::path(GoldenDir()) / "reference" / name;
  std::string missing;
  if (!man.ok()) missing = man.status().ToString();
  else if (!fs::exists(in_dir / "index.json")) missing = (in_dir / "index.json").string() + " absent";
  else if (!fs::exists(ref_dir / "0.json")) missing = (ref_dir / "0.json").string() + " absent";
  if (!missing.empty()) {
    if (ModelsRequired()) FAIL() << name << ": " << missing;
    GTEST_SKIP() << name << ": " << missing;
  }
  auto model = OpenRunner(*man, nullptr);  // the CPU's: the engine on its oneDNN kernels
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const json index = ReadJson(in_dir / "index.json");
  const bool nhwc = index.value("layout", "NHWC") == "NHWC";
  const int W = man->preprocess.width, H = man->preprocess.height;
  std::vector<cv::Mat> images;
  std::vector<std::vector<OutputTensor>> singles;  // each image's heads from a forward of its own

  for (const auto& item : index["items"]) {
    const int i = item["i"].get<int>();
    const std::string tag = name + "." + item["id"].get<std::string>();
    SCOPED_TRACE(tag);
    cv::Mat img = cv::imread(item["image"].get<std::string>(), cv::IMREAD_COLOR);
    ASSERT_FALSE(img.empty()) << item["image"];
    if (!item["crop"].is_null()) {
      auto c = item["crop"].get<std::vector<int>>();
      img = img(cv::Rect(c[0], c[1], c[2], c[3])).clone();
    }
    images.push_back(img);

    // 1. Our preprocessing vs the input the reference was fed.
    gpu::Tensor ours = gpu::PreprocessCpu({img}, man->preprocess);
    RoundIfIntegerInput(*man, &ours);  // what the runner feeds the net
    std::vector<float> raw_in;
    if (item["dtype"] == "int32") {
      std::ifstream f(in_dir / item["file"].get<std::string>(), std::ios::binary);
      std::vector<int32_t> iv(size_t(3) * W * H);
      f.read(reinterpret_cast<char*>(iv.data()), iv.size() * 4);
      raw_in.assign(iv.begin(), iv.end());
    } else {
      raw_in = ReadF32(in_dir / item["file"].get<std::string>());
    }
    ASSERT_EQ(raw_in.size(), size_t(3) * W * H);
    std::vector<float> ref_nchw(raw_in.size());
    double in_diff = 0;
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
          size_t o = (size_t(c) * H + y) * W + x;
          float r = nhwc ? raw_in[(size_t(y) * W + x) * 3 + c] : raw_in[o];
          ref_nchw[o] = r;
          in_diff = std::max(in_diff, double(std::fabs(ours.At(o) - r)));
        }
    Report(tag + ".input_max_abs", in_diff);
    // movenet's reference takes int32 pixels; we round the resize to integers as it does.
    EXPECT_LE(in_diff, 1e-5);

    // 2. Raw heads: ours from the image, and ours from the reference's own input.
    // When our input is the reference's bit for bit (every model today), the second forward
    // would repeat the first exactly: its result is taken, not recomputed.
    auto res = (*model)->Run({img});
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    singles.push_back((*res)[0]);
    gpu::Tensor blob{{1, 3, H, W}, gpu::TensorType::kFloat32, std::vector<uint8_t>(ref_nchw.size() * 4)};
    std::memcpy(blob.data.data(), ref_nchw.data(), blob.data.size());
    auto res_ref_in = in_diff == 0 ? res : (*model)->RunTensor(blob);
    ASSERT_TRUE(res_ref_in.ok()) << res_ref_in.status().ToString();
    const json ref = ReadJson(ref_dir / (std::to_string(i) + ".json"));
    std::map<std::string, std::vector<float>> heads;  // ours, by output name
    for (size_t o = 0; o < man->outputs.size(); ++o) {
      const auto& spec = man->outputs[o];
      const auto& mine = (*res)[0][o];
      heads[spec.name] = mine.data;
      std::string key = spec.tfjs_node.empty() ? spec.name : spec.tfjs_node;
      if (!ref["outputs"].contains(key)) key = spec.name;
      ASSERT_TRUE(ref["outputs"].contains(key)) << "reference lacks " << key;
      const auto rd = RefData(ref["outputs"][key], ref_dir);
      ASSERT_EQ(rd.size(), mine.data.size()) << spec.name;
      Diff d = Compare(mine.data, rd);
      Diff d2 = Compare((*res_ref_in)[0][o].data, rd);
      Report(tag + "." + spec.name + ".cosine", d.cosine);
      Report(tag + "." + spec.name + ".max_abs", d.max_abs);
      Report(tag + "." + spec.name + ".refin_cosine", d2.cosine);
      Report(tag + "." + spec.name + ".refin_max_abs", d2.max_abs);
      EXPECT_GE(d2.cosine, 0.999) << spec.name << " (reference input)";
      EXPECT_GE(d.cosine, 0.999) << spec.name;
      // A classifier's probabilities are what users read: each within 1e-3 of TF.js's.
      if (spec.name == "probabilities") {
        EXPECT_LE(d.max_abs, 1e-3) << spec.name;
        EXPECT_LE(d2.max_abs, 1e-3) << spec.name << " (reference input)";
      }
    }

    if (man->postprocess == "sigmoid_mask") {
      const auto& spec = man->outputs[0];
      std::string key = spec.tfjs_node.empty() ? spec.name : spec.tfjs_node;
      if (!ref["outputs"].contains(key)) key = spec.name;
      auto rd = RefData(ref["outputs"][key], ref_dir);
      OutputTensor rt{spec.name, (*res)[0][0].shape, rd};
      auto a = DecodeMask((*res)[0][0], img.size());
      auto b = DecodeMask(rt, img.size());
      ASSERT_TRUE(a.ok() && b.ok());
      double iou = testing::MaskIoU(a->binary, b->binary);
      Report(tag + ".mask_iou", iou);
      EXPECT_GE(iou, 0.98);
    }

    // 3. Decoded results vs the full graph's own decode (or H2's host reference).
    const fs::path dec_path = ref_dir / ("decoded_" + std::to_string(i) + ".json");
    if (!fs::exists(dec_path)) continue;
    const json dec = ReadJson(dec_path);
    const auto& pp = man->postprocess;
    if (pp == "l2_normalize") {
      std::string key = dec["outputs"].contains("embeddings") ? "embeddings" : "global_pooling/Mean";
      if (!dec["outputs"].contains(key)) continue;
      Embedding e = L2Normalize(heads.at("embedding"));
      Embedding r = L2Normalize(RefData(dec["outputs"][key], ref_dir));
      double c = Compare(e.values, r.values).cosine;
      Report(tag + ".embedding_cosine", c);
      EXPECT_GE(c, 0.999);
    } else if (pp == "movenet") {
      const auto rd = RefData(dec["outputs"]["Identity"], ref_dir);
      // Two runs: ours from the image, and ours from the reference's own int32 input.
      for (int path = 0; path < 2; ++path) {
        const auto& outs = path == 0 ? (*res)[0] : (*res_ref_in)[0];
        std::map<std::string, const std::vector<float>*> h;
        for (const auto& t : outs) h[t.name] = &t.data;
        MoveNetHeads hd;
        hd.heatmap = h.at("heatmap")->data();
        hd.center = h.at("center")->data();
        hd.center_weighted = true;  // the converter cuts after truediv_2 (manifest notes)
        hd.regress = h.at("regression")->data();
        hd.offset = h.at("offset")->data();
        auto kps = DecodeMoveNet(hd);
        double worst = 0, worst_confident = 0, worst_score = 0;
        for (int k = 0; k < 17; ++k) {
          double dy = (kps[k].y - rd[k * 3]) * H, dx = (kps[k].x - rd[k * 3 + 1]) * W;
          worst = std::max(worst, std::hypot(dy, dx));
          if (rd[k * 3 + 2] >= 0.3f) worst_confident = std::max(worst_confident, std::hypot(dy, dx));
          worst_score = std::max(worst_score, double(std::fabs(kps[k].score - rd[k * 3 + 2])));
        }
        const std::string p = path == 0 ? "" : ".refin";
        Report(tag + p + ".keypoint_max_px", worst);
        Report(tag + p + ".keypoint_max_px_score_ge_0.3", worst_confident);
        Report(tag + p + ".keypoint_score_max_abs", worst_score);
        EXPECT_LE(worst, 1.0) << (path == 1 ? "decode differs from the graph's own"
                                            : "keypoints on our own input path");
      }
    } else if (pp == "movenet_multipose") {
      // Identity [1,6,56]: 17 x (y, x, score), box (ymin, xmin, ymax, xmax), person score.
      const auto rd = RefData(dec["outputs"]["Identity"], ref_dir);
      ASSERT_EQ(rd.size(), 6u * 56);
      for (int path = 0; path < 2; ++path) {
        auto pose = DecodePose(*man, path == 0 ? (*res)[0] : (*res_ref_in)[0]);
        ASSERT_TRUE(pose.ok()) << pose.status().ToString();
        ASSERT_EQ(pose->people.size(), 6u);
        double worst = 0, worst_score = 0, worst_box = 0;
        int people = 0;
        for (int n = 0; n < 6; ++n) {
          const float* row = &rd[n * 56];
          const PosePerson& q = pose->people[n];
          worst_score = std::max(worst_score, double(std::fabs(q.score - row[55])));
          if (row[55] < 0.1f) continue;  // the weak tail may reorder on float rounding
          ++people;
          for (int k = 0; k < 17; ++k) {
            worst = std::max(worst, double(std::hypot((q.keypoints[k].y - row[k * 3]) * H,
                                               (q.keypoints[k].x - row[k * 3 + 1]) * W)));
            worst_score = std::max(worst_score, double(std::fabs(q.keypoints[k].score - row[k * 3 + 2])));
          }
          const float box[4] = {q.ymin, q.xmin, q.ymax, q.xmax};
          for (int c = 0; c < 4; ++c)
            worst_box = std::max(worst_box, double(std::fabs(box[c] - row[51 + c])) * H);
        }
        const std::string p = path == 0 ? "" : ".refin";
        Report(tag + p + ".people_ge_0.1", people);
        Report(tag + p + ".keypoint_max_px", worst);
        Report(tag + p + ".box_max_px", worst_box);
        Report(tag + p + ".score_max_abs", worst_score);
        // Measured 4e-5 px: an argmax that flips on rounding moves a point by a whole cell (4 px).
        EXPECT_LE(worst, 0.1);
        EXPECT_LE(worst_box, 0.1);
        EXPECT_LE(worst_score, 1e-3);
      }
    } else if (pp == "blazepose") {
      const auto rd = RefData(dec["outputs"].contains("Identity_2") ? dec["outputs"]["Identity_2"]
                                                                     : ref["outputs"]["Identity_2"],
                              ref_dir);
      auto lm = DecodeBlazePose(heads.at("landmarks"));
      double worst = 0;
      for (size_t k = 0; k < lm.size(); ++k)
        worst = std::max(worst, double(std::hypot(lm[k].x - rd[k * 5], lm[k].y - rd[k * 5 + 1])));
      Report(tag + ".landmark_max_px", worst);
      EXPECT_LE(worst, 1.0);
    } else if (pp == "centernet") {
      const auto rd = RefData(dec["outputs"]["tower_0/detections"], ref_dir);
      auto det = CenterNetTopK(heads.at("keypoints").data(), heads.at("wh").data(), 128, 128, 80);
      // Compare the detections that matter (score >= 0.2); the low tail of the top 100
      // reorders on float rounding.
      int n = 0, matched = 0;
      double min_iou = 1;
      for (int r = 0; r < 100; ++r) {
        const float* q = &rd[r * 6];
        if (q[4] < 0.2f) continue;
        ++n;
        cv::Rect2f rb(q[0], q[1], q[2] - q[0], q[3] - q[1]);
        double best = 0;
        for (const auto& d : det)
          if (d.class_id == int(q[5]) && d.score >= 0.1f)
            best = std::max(best, double(IoU(rb, cv::Rect2f(d.x1, d.y1, d.x2 - d.x1, d.y2 - d.y1))));
        min_iou = std::min(min_iou, best);
        matched += best >= 0.95;
      }
      Report(tag + ".detections_ref", n);
      Report(tag + ".detections_min_iou", min_iou);
      EXPECT_EQ(matched, n);
    } else if (pp == "blazeface") {
      const auto& p = dec["params"];
      BlazeFaceOptions opt;
      opt.input_size = p.value("inputSize", 256);
      opt.min_score = p.value("minScore", 0.5f);
      opt.iou_threshold = p.value("iou", 0.3f);
      opt.max_faces = p.value("maxDetections", 20);
      auto full = DecodeOutputs(*man, (*res)[0], img.size());  // the infer path runs too
      EXPECT_TRUE(full.ok()) << full.status().ToString();
      // Rebuild rows as DecodeOutputs does, in model-input pixels.
      std::vector<float> rows;
      for (const char* g : {"16", "8"}) {
        const auto& s = heads.at(std::string("classificators_") + g);
        const auto& r = heads.at(std::string("regressors_") + g);
        for (size_t a = 0; a < s.size(); ++a) {
          rows.push_back(s[a]);
          rows.insert(rows.end(), r.begin() + a * 16, r.begin() + a * 16 + 16);
        }
      }
      auto faces = DecodeBlazeFace(rows, cv::Size(opt.input_size, opt.input_size), opt);
      const auto& want = dec["detections"];
      Report(tag + ".faces_ref", want.size());
      Report(tag + ".faces_ours", faces.size());
      EXPECT_EQ(faces.size(), want.size());
      double min_iou = 1, kp = 0;
      for (size_t f = 0; f < std::min(faces.size(), want.size()); ++f) {
        auto b = want[f]["box"].get<std::vector<float>>();
        double iou = IoU(cv::Rect2f(b[0], b[1], b[2] - b[0], b[3] - b[1]),
                         cv::Rect2f(faces[f].x1, faces[f].y1, faces[f].x2 - faces[f].x1,
                                    faces[f].y2 - faces[f].y1));
        min_iou = std::min(min_iou, iou);
        if (want[f].contains("landmarks")) {
          auto l = want[f]["landmarks"].get<std::vector<std::vector<float>>>();
          for (int k = 0; k < 6; ++k)
            kp = std::max(kp, double(std::hypot(faces[f].keypoints[k].x - l[k][0],
                                                faces[f].keypoints[k].y - l[k][1])));
        }
      }
      Report(tag + ".face_min_iou", min_iou);
      Report(tag + ".face_keypoint_max_px", kp);
      EXPECT_GE(min_iou, 0.95);
      EXPECT_LE(kp, 1.0);
    }
  }

  // 4. The golden images as one batch (batchable models): each image's heads are its own
  // forward's. Speed is models_bench's (`models_bench --benchmarks=engine`), not a test's.
  if (!man->batchable || name == "isnet" || images.size() < 2) return;
  auto batch = (*model)->Run(images);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_EQ(batch->size(), images.size());
  Report(name + ".batched_in_one_forward", (*model)->batchable() ? 1 : 0);
  for (size_t k = 0; k < images.size(); ++k)
    for (size_t o = 0; o < singles[k].size(); ++o) {
      ASSERT_EQ((*batch)[k][o].data.size(), singles[k][o].data.size()) << "image " << k;
      const Diff d = Compare((*batch)[k][o].data, singles[k][o].data);
      EXPECT_GE(d.cosine, 0.9999) << "image " << k << ", " << singles[k][o].name;
      EXPECT_LE(d.max_abs, 1e-3 * std::max(1.0, d.max_ref)) << "image " << k << ", " << singles[k][o].name;
    }
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenTest,
                         ::testing::Values("mobilefacenet", "faceres", "blazeface",
                                           "movenet-lightning", "movenet-multipose",
                                           "blazepose-full", "centernet",
                                           "selfie", "isnet", "facemesh", "nsfw"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& c : s)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

}  // namespace
}  // namespace framemill::models
