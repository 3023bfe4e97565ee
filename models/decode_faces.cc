// The face models' decodes: blazeface (detection, its anchors and candidates), faceres and
// mobilefacenet (embeddings, age and gender), facemesh (landmarks, mouth, frontalness).
#include <algorithm>
#include <cmath>
#include <numeric>

#include <opencv2/imgproc.hpp>

#include "gpu/ops.h"
#include "media/geometry.h"
#include "models/decode.h"
#include "models/decode_internal.h"
#include "models/face_tiles.h"

namespace framemill::models {

using namespace decode_internal;

Embedding L2Normalize(const std::vector<float>& v) {
  Embedding e;
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  e.norm = static_cast<float>(std::sqrt(s));
  e.values.resize(v.size(), 0.f);
  if (e.norm > 0)
    for (size_t i = 0; i < v.size(); ++i) e.values[i] = static_cast<float>(v[i] / std::sqrt(s));
  return e;
}

FaceDescription DecodeFaceRes(const std::vector<float>& embedding, const std::vector<float>& age,
                              float gender) {
  FaceDescription d;
  d.embedding = L2Normalize(embedding);
  d.gender_score = gender;
  d.gender = gender <= 0.5f ? "female" : "male";
  d.gender_confidence = std::min(0.99f, std::trunc(200.f * std::fabs(gender - 0.5f)) / 100.f);
  if (!age.empty()) {
    int idx = static_cast<int>(std::max_element(age.begin(), age.end()) - age.begin());
    float prev = idx > 0 ? age[idx - 1] : 0.f;
    float next = idx + 1 < static_cast<int>(age.size()) ? age[idx + 1] : 0.f;
    float v = prev > next ? 10.f * idx - 100.f * prev : 10.f * idx + 100.f * next;
    d.age = std::round(v) / 10.f;
  }
  return d;
}

std::vector<cv::Point2f> BlazeFaceAnchors(int input_size) {
  const int strides[2] = {input_size / 16, input_size / 8};
  const int per_cell[2] = {2, 6};
  std::vector<cv::Point2f> a;
  for (int s = 0; s < 2; ++s) {
    const int stride = strides[s];
    const int grid = (input_size + stride - 1) / stride;
    for (int gy = 0; gy < grid; ++gy)
      for (int gx = 0; gx < grid; ++gx)
        for (int n = 0; n < per_cell[s]; ++n)
          a.emplace_back(stride * (gx + 0.5f), stride * (gy + 0.5f));
  }
  return a;
}

namespace {

// Every anchor's face in image pixels, and its box in input pixels (human's NMS space).
void BlazeFaceAll(const std::vector<float>& rows, cv::Size image, const BlazeFaceOptions& opt,
                  std::vector<FaceBox>* all, std::vector<cv::Rect2f>* rects) {
  const auto anchors = BlazeFaceAnchors(opt.input_size);
  const size_t n = std::min(anchors.size(), rows.size() / 17);
  const float fx = static_cast<float>(image.width) / opt.input_size;
  const float fy = static_cast<float>(image.height) / opt.input_size;
  all->assign(n, FaceBox{});
  rects->assign(n, cv::Rect2f{});
  for (size_t i = 0; i < n; ++i) {
    const float* r = rows.data() + i * 17;
    const float cx = r[1] + anchors[i].x, cy = r[2] + anchors[i].y;
    FaceBox& f = (*all)[i];
    f.score = Sigmoid(r[0]);
    f.x1 = (cx - r[3] / 2) * fx;
    f.y1 = (cy - r[4] / 2) * fy;
    f.x2 = (cx + r[3] / 2) * fx;
    f.y2 = (cy + r[4] / 2) * fy;
    for (int k = 0; k < 6; ++k)
      f.keypoints[k] = {(r[5 + 2 * k] + anchors[i].x) * fx, (r[6 + 2 * k] + anchors[i].y) * fy};
    (*rects)[i] = cv::Rect2f(cx - r[3] / 2, cy - r[4] / 2, r[3], r[4]);
  }
}

}  // namespace

std::vector<FaceBox> BlazeFaceCandidates(const std::vector<float>& rows, cv::Size image,
                                         const BlazeFaceOptions& opt) {
  std::vector<FaceBox> all, out;
  std::vector<cv::Rect2f> rects;
  BlazeFaceAll(rows, image, opt, &all, &rects);
  for (const FaceBox& f : all)
    if (f.score > opt.min_score) out.push_back(f);
  return out;
}

std::vector<FaceBox> DecodeBlazeFace(const std::vector<float>& rows, cv::Size image,
                                     const BlazeFaceOptions& opt) {
  if (opt.weighted_nms)
    return MergeFaces(BlazeFaceCandidates(rows, image, opt), opt.iou_threshold, opt.containment,
                      opt.max_faces);
  // NMS in input pixels, as human runs it before scaling.
  std::vector<FaceBox> all, out;
  std::vector<cv::Rect2f> rects;
  BlazeFaceAll(rows, image, opt, &all, &rects);
  std::vector<float> scores(all.size());
  for (size_t i = 0; i < all.size(); ++i) scores[i] = all[i].score;
  for (int i : Nms(rects, scores, opt.iou_threshold, opt.min_score, opt.max_faces))
    out.push_back(all[i]);
  return out;
}

nlohmann::json ToJson(const Embedding& e) {
  return {{"embedding", e.values}, {"norm", e.norm}};
}

nlohmann::json ToJson(const FaceDescription& d) {
  return {{"embedding", d.embedding.values}, {"norm", d.embedding.norm},
          {"gender", d.gender}, {"gender_score", d.gender_score},
          {"gender_confidence", d.gender_confidence}, {"age", d.age}};
}

nlohmann::json ToJson(const std::vector<FaceBox>& faces) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& f : faces) {
    nlohmann::json kp = nlohmann::json::array();
    for (const auto& p : f.keypoints) kp.push_back({p.x, p.y});
    a.push_back({{"box", {f.x1, f.y1, f.x2, f.y2}}, {"score", f.score}, {"keypoints", kp}});
  }
  return {{"faces", a}};
}

Result<std::vector<float>> BlazeFaceRows(const std::vector<OutputTensor>& outs) {
  if (const OutputTensor* whole = Find(outs, [](const OutputTensor& o) { return LastDim(o) == 17; }))
    return whole->data;
  std::vector<const OutputTensor*> sc, rg;
  for (const auto& o : outs) {
    if (LastDim(o) == 1) sc.push_back(&o);
    if (LastDim(o) == 16) rg.push_back(&o);
  }
  if (sc.empty() || sc.size() != rg.size())
    return Status::Corruption("blazeface: needs score [..,1] and regressor [..,16] heads in pairs");
  auto larger = [](const OutputTensor* a, const OutputTensor* b) {
    return a->data.size() > b->data.size();
  };
  std::stable_sort(sc.begin(), sc.end(), larger);
  std::stable_sort(rg.begin(), rg.end(), larger);
  std::vector<float> rows;
  for (size_t g = 0; g < sc.size(); ++g) {
    const size_t n = sc[g]->data.size();
    if (rg[g]->data.size() != n * 16)
      return Status::Corruption("blazeface: score and regressor heads do not pair up");
    for (size_t i = 0; i < n; ++i) {
      rows.push_back(sc[g]->data[i]);
      rows.insert(rows.end(), rg[g]->data.begin() + static_cast<long>(i * 16),
                  rg[g]->data.begin() + static_cast<long>(i * 16 + 16));
    }
  }
  return rows;
}

namespace {

// The 896 x 17 rows of a BlazeFace run, checked against the manifest's input size.
Result<std::vector<float>> FaceRows(const ModelManifest& m, const std::vector<OutputTensor>& outs,
                                    BlazeFaceOptions* opt) {
  auto rows = BlazeFaceRows(outs);
  if (!rows.ok()) return Bad(m, rows.status().message());
  opt->input_size = m.preprocess.width;
  const size_t anchors = BlazeFaceAnchors(opt->input_size).size();
  if (rows->size() != anchors * 17)
    return Bad(m, "expected " + std::to_string(anchors) + " anchors");
  return rows;
}

// The model's face rows (options as its manifest sets them) through `decode`.
Result<std::vector<FaceBox>> DecodeRows(
    const ModelManifest& m, const std::vector<OutputTensor>& outs, cv::Size image,
    BlazeFaceOptions opt,
    std::vector<FaceBox> (*decode)(const std::vector<float>&, cv::Size, const BlazeFaceOptions&)) {
  auto rows = FaceRows(m, outs, &opt);
  if (!rows.ok()) return rows.status();
  return decode(*rows, image, opt);
}

}  // namespace

Result<std::vector<FaceBox>> DecodeFaceDetections(const ModelManifest& m,
                                                  const std::vector<OutputTensor>& outs,
                                                  cv::Size image, BlazeFaceOptions opt) {
  return DecodeRows(m, outs, image, opt, DecodeBlazeFace);
}

Result<std::vector<FaceBox>> DecodeFaceCandidates(const ModelManifest& m,
                                                  const std::vector<OutputTensor>& outs,
                                                  cv::Size image, BlazeFaceOptions opt) {
  return DecodeRows(m, outs, image, opt, BlazeFaceCandidates);
}

Result<FaceDescription> DecodeFaceDescription(const ModelManifest& m,
                                              const std::vector<OutputTensor>& outs) {
  const OutputTensor* e =
      outs.size() == 1 ? &outs.front()
                       : Named(outs, "embedding", [](const OutputTensor& o) { return o.data.size() == 1024; });
  if (e == nullptr) return Bad(m, "no embedding output");
  const OutputTensor* age = Named(outs, "age", [](const OutputTensor& o) { return o.data.size() == 100; });
  const OutputTensor* gender =
      Named(outs, "gender", [](const OutputTensor& o) { return o.data.size() == 1; });
  if (m.postprocess == "faceres" && (age == nullptr || gender == nullptr || gender->data.empty()))
    return Bad(m, "needs 1024-d embedding, 100-d age and 1-d gender outputs");
  if (age == nullptr || gender == nullptr || gender->data.empty() || age == e || gender == e) {
    FaceDescription d;
    d.embedding = L2Normalize(e->data);
    return d;
  }
  FaceDescription d = DecodeFaceRes(e->data, age->data, gender->data[0]);
  d.has_attributes = true;
  return d;
}

Result<FaceMesh> DecodeFaceMesh(const ModelManifest& m, const std::vector<OutputTensor>& outs,
                                cv::Size crop) {
  constexpr size_t kPoints = 468;
  auto* mesh = Named(outs, "mesh", [](const OutputTensor& o) { return o.data.size() == 3 * kPoints; });
  auto* flag = Named(outs, "faceflag", [](const OutputTensor& o) { return o.data.size() == 1; });
  if (!mesh || !flag || mesh->data.size() != 3 * kPoints || flag->data.empty())
    return Bad(m, "needs mesh (1404 values) and faceflag (1 value)");
  const cv::Size in = InputSize(m);
  const float sx = in.width > 0 ? static_cast<float>(crop.width) / in.width : 1.0f;
  const float sy = in.height > 0 ? static_cast<float>(crop.height) / in.height : 1.0f;
  FaceMesh f;
  f.presence = flag->data[0];
  f.points.reserve(kPoints);
  for (size_t i = 0; i < kPoints; ++i) {
    const float* p = mesh->data.data() + 3 * i;
    f.points.push_back({p[0] * sx, p[1] * sy, p[2] * sx});
  }
  return f;
}

std::optional<double> MouthOpening(const FaceMesh& mesh) {
  constexpr int kUpperLip = 13, kLowerLip = 14, kMouthLeft = 61, kMouthRight = 291;
  if (mesh.points.size() <= kMouthRight) return std::nullopt;
  const auto xy = [&](int i) { return cv::Point2f(mesh.points[i].x, mesh.points[i].y); };
  const double width = cv::norm(xy(kMouthLeft) - xy(kMouthRight));
  if (width < 1) return std::nullopt;
  return cv::norm(xy(kUpperLip) - xy(kLowerLip)) / width;
}

double FaceFrontalness(const FaceMesh& mesh) {
  constexpr int kNoseTip = 1, kRightEdge = 234, kLeftEdge = 454;
  if (mesh.points.size() <= kLeftEdge) return 0;
  const double right = std::abs(mesh.points[kNoseTip].x - mesh.points[kRightEdge].x);
  const double left = std::abs(mesh.points[kLeftEdge].x - mesh.points[kNoseTip].x);
  return left + right >= 1e-3 ? 2 * std::min(left, right) / (left + right) : 0.0;
}

nlohmann::json ToJson(const FaceMesh& mesh) {
  nlohmann::json points = nlohmann::json::array();
  for (const cv::Point3f& p : mesh.points) points.push_back({p.x, p.y, p.z});
  nlohmann::json j = {{"presence", mesh.presence}, {"landmarks", points}};
  if (auto mouth = MouthOpening(mesh)) j["mouth_opening"] = *mouth;
  return j;
}

}  // namespace framemill::models
