// The pose models' decodes: movenet single and multipose, blazepose.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <opencv2/imgproc.hpp>

#include "gpu/ops.h"
#include "media/geometry.h"
#include "models/decode.h"
#include "models/decode_internal.h"

namespace framemill::models {

using namespace decode_internal;

std::vector<PoseKeypoint> DecodeMoveNet(const MoveNetHeads& hd) {
  const int H = hd.h, W = hd.w, K = hd.k;
  const float kBias = Fp16(1.8f), kScale = Fp16(1.f / W);
  // Centre: sigmoid(center) weighted towards the frame centre, argmax (first max wins).
  int best = 0;
  float best_v = -1;
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      float d = std::sqrt(static_cast<float>((y - H / 2) * (y - H / 2) + (x - W / 2) * (x - W / 2)));
      float v = hd.center[y * W + x] * (hd.center_weighted ? 1.f : Fp16(1.f / (d + kBias)));
      if (v > best_v) { best_v = v; best = y * W + x; }
    }
  const int cy = best / W, cx = best % W;
  std::vector<PoseKeypoint> kps(K);
  for (int k = 0; k < K; ++k) {
    const float ry = cy + hd.regress[best * 2 * K + 2 * k];
    const float rx = cx + hd.regress[best * 2 * K + 2 * k + 1];
    int kb = 0;
    float kv = -1;
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        float dy = y - ry, dx = x - rx;
        float v = hd.heatmap[(y * W + x) * K + k] / (std::sqrt(dy * dy + dx * dx) + kBias);
        if (v > kv) { kv = v; kb = y * W + x; }
      }
    const int ky = kb / W, kx = kb % W;
    kps[k].y = (ky + hd.offset[kb * 2 * K + 2 * k]) * kScale;
    kps[k].x = (kx + hd.offset[kb * 2 * K + 2 * k + 1]) * kScale;
    kps[k].score = hd.heatmap[kb * K + k];
  }
  return kps;
}

namespace {

// TF's MaxPool (SAME, stride 1) then the graph's peak test |v - pool| < eps.
std::vector<std::pair<float, int>> CentrePeaks(const float* c, int H, int W, int pool) {
  const float kPeakEps = 1.0132789611816406e-06f;  // Less/y in the graph
  const int r = pool / 2;
  std::vector<std::pair<float, int>> peaks;
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      float m = c[y * W + x];
      for (int yy = std::max(0, y - r); yy <= std::min(H - 1, y + r); ++yy)
        for (int xx = std::max(0, x - r); xx <= std::min(W - 1, x + r); ++xx)
          m = std::max(m, c[yy * W + xx]);
      const float v = c[y * W + x];
      peaks.push_back({std::fabs(v - m) < kPeakEps ? v : 0.f, y * W + x});
    }
  return peaks;
}

// The person's box in grid cells, clipped to the grid (stack_2 in the graph).
void PersonBox(const MultiPoseHeads& hd, int cell, float* box) {
  const float cy = static_cast<float>(cell / hd.w), cx = static_cast<float>(cell % hd.w);
  const float h = std::max(hd.box_scale[cell * 2], 0.f), w = std::max(hd.box_scale[cell * 2 + 1], 0.f);
  const float oy = cy + hd.box_offset[cell * 2], ox = cx + hd.box_offset[cell * 2 + 1];
  box[0] = std::clamp(oy - h * 0.5f, 0.f, static_cast<float>(hd.h));
  box[1] = std::clamp(ox - w * 0.5f, 0.f, static_cast<float>(hd.w));
  box[2] = std::clamp(oy + h * 0.5f, 0.f, static_cast<float>(hd.h));
  box[3] = std::clamp(ox + w * 0.5f, 0.f, static_cast<float>(hd.w));
}

}  // namespace

std::vector<PosePerson> DecodeMultiPose(const MultiPoseHeads& hd) {
  const int H = hd.h, W = hd.w, K = hd.k, HW = H * W, N = std::min(hd.people, HW);
  const float kSigma2 = static_cast<float>(std::min(H, W)) * 0.300048828125f;  // mul_6
  const float kValid = 0.126953125f;                                            // Greater_1/y
  // Top N centre peaks, ties to the lower index (TopKV2).
  std::vector<std::pair<float, int>> peaks = CentrePeaks(hd.center, H, W, 5);
  std::partial_sort(peaks.begin(), peaks.begin() + N, peaks.end(),
                    [](const auto& a, const auto& b) {
                      return a.first != b.first ? a.first > b.first : a.second < b.second;
                    });
  // Each person's keypoint maps: heatmap * exp(-d^2 / sigma2) inside its box.
  std::vector<float> maps(static_cast<size_t>(N) * K * HW);  // [person][k][cell]
  std::vector<PosePerson> out(N);
  for (int n = 0; n < N; ++n) {
    const int cell = peaks[n].second;
    float box[4];
    PersonBox(hd, cell, box);
    out[n].ymin = box[0] / H;  // the graph's *4/256: both powers of two, so exact alike
    out[n].xmin = box[1] / W;
    out[n].ymax = box[2] / H;
    out[n].xmax = box[3] / W;
    for (int k = 0; k < K; ++k) {
      const float ry = static_cast<float>(cell / W) + hd.regress[cell * 2 * K + 2 * k];
      const float rx = static_cast<float>(cell % W) + hd.regress[cell * 2 * K + 2 * k + 1];
      float* m = &maps[(static_cast<size_t>(n) * K + k) * HW];
      for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
          const float fy = static_cast<float>(y), fx = static_cast<float>(x);
          const bool inside = fy >= box[0] && fy < box[2] && fx >= box[1] && fx < box[3];
          const float dy = fy - ry, dx = fx - rx;
          const float d2 = dy * dy + dx * dx;
          m[y * W + x] = inside ? hd.heatmap[(y * W + x) * K + k] * std::exp(-d2 / kSigma2) : 0.f;
        }
    }
  }
  for (int n = 0; n < N; ++n) {
    PosePerson& p = out[n];
    p.keypoints.resize(K);
    float sum = 0, count = 0;
    for (int k = 0; k < K; ++k) {
      const float* m = &maps[(static_cast<size_t>(n) * K + k) * HW];
      const int best = static_cast<int>(std::max_element(m, m + HW) - m);  // first max
      float score = 0;  // the graph takes the max over every person's map at that cell
      for (int o = 0; o < N; ++o) score = std::max(score, maps[(static_cast<size_t>(o) * K + k) * HW + best]);
      p.keypoints[k].y = (static_cast<float>(best / W) + hd.offset[best * 2 * K + 2 * k]) / H;
      p.keypoints[k].x = (static_cast<float>(best % W) + hd.offset[best * 2 * K + 2 * k + 1]) / W;
      p.keypoints[k].score = score;
      if (score > kValid) {
        sum += peaks[n].first * score;
        count += 1;
      }
    }
    p.score = sum / std::max(count, 1.f);
  }
  return out;
}

std::vector<PoseLandmark> DecodeBlazePose(const std::vector<float>& ld) {
  std::vector<PoseLandmark> out(ld.size() / 5);
  for (size_t i = 0; i < out.size(); ++i) {
    const float* p = ld.data() + i * 5;
    out[i] = {p[0], p[1], p[2], Sigmoid(p[3]), Sigmoid(p[4])};
  }
  return out;
}

nlohmann::json ToJson(const std::vector<PoseKeypoint>& kps, cv::Size image) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& k : kps)
    a.push_back({{"y", k.y}, {"x", k.x}, {"score", k.score},
                 {"px", {k.x * image.width, k.y * image.height}}});
  return {{"keypoints", a}};
}

nlohmann::json ToJson(const std::vector<PoseLandmark>& lms, cv::Size input, cv::Size image) {
  nlohmann::json a = nlohmann::json::array();
  const float fx = static_cast<float>(image.width) / input.width;
  const float fy = static_cast<float>(image.height) / input.height;
  for (const auto& l : lms)
    a.push_back({{"x", l.x}, {"y", l.y}, {"z", l.z}, {"visibility", l.visibility},
                 {"presence", l.presence}, {"px", {l.x * fx, l.y * fy}}});
  return {{"landmarks", a}};
}

namespace {

Result<PoseDecoded> DecodeMultiPoseOutputs(const ModelManifest& m,
                                           const std::vector<OutputTensor>& outs, PoseDecoded p) {
  auto named = [&](const char* name) {
    return Find(outs, [&](const OutputTensor& o) { return o.name == name; });
  };
  const OutputTensor *center = named("center"), *scale = named("box_scale"),
                     *boff = named("box_offset"), *reg = named("regression"),
                     *heat = named("heatmap"), *off = named("offset");
  if (!center || !scale || !boff || !reg || !heat || !off || heat->shape.size() != 4)
    return Bad(m, "needs center, box_scale, box_offset, regression, heatmap and offset heads");
  MultiPoseHeads hd;
  hd.h = static_cast<int>(heat->shape[1]);
  hd.w = static_cast<int>(heat->shape[2]);
  const size_t cells = static_cast<size_t>(hd.h) * hd.w;
  if (heat->data.size() != cells * 17 || center->data.size() != cells ||
      scale->data.size() != cells * 2 || boff->data.size() != cells * 2 ||
      reg->data.size() != cells * 34 || off->data.size() != cells * 34)
    return Bad(m, "head sizes disagree");
  hd.center = center->data.data();
  hd.box_scale = scale->data.data();
  hd.box_offset = boff->data.data();
  hd.regress = reg->data.data();
  hd.heatmap = heat->data.data();
  hd.offset = off->data.data();
  p.people = DecodeMultiPose(hd);
  return p;
}

}  // namespace

Result<PoseDecoded> DecodePose(const ModelManifest& m, const std::vector<OutputTensor>& outs) {
  PoseDecoded p;
  p.input = InputSize(m);
  if (m.postprocess == "blazepose") {
    auto* ld = Find(outs, [](const OutputTensor& o) { return o.data.size() == 195; });
    if (!ld) return Bad(m, "needs ld_3d (195 values)");
    p.landmarks = DecodeBlazePose(ld->data);
    if (auto* flag = Find(outs, [](const OutputTensor& o) { return o.data.size() == 1; })) {
      p.has_pose_score = true;
      p.pose_score = flag->data[0];
    }
    return p;
  }
  if (m.postprocess == "movenet_multipose") return DecodeMultiPoseOutputs(m, outs, p);
  auto* heat = Find(outs, [](const OutputTensor& o) { return LastDim(o) == 17; });
  auto* center = Find(outs, [](const OutputTensor& o) { return LastDim(o) == 1 && o.data.size() > 1; });
  auto* reg = Find(outs, [&](const OutputTensor& o) { return LastDim(o) == 34 && NameHas(m, o, "regress"); });
  auto* off = Find(outs, [&](const OutputTensor& o) { return LastDim(o) == 34 && NameHas(m, o, "offset"); });
  if (!heat || !center || !reg || !off || heat->shape.size() < 3)
    return Bad(m, "needs heatmap [..,17], center [..,1], regress and offset [..,34] heads");
  MoveNetHeads hd;
  hd.k = 17;
  hd.h = static_cast<int>(heat->shape[heat->shape.size() - 3]);
  hd.w = static_cast<int>(heat->shape[heat->shape.size() - 2]);
  std::vector<float> heat_scratch, center_scratch;
  const std::vector<float>& hs = Sigmoided(*heat, m, &heat_scratch);
  const std::vector<float>& cs = Sigmoided(*center, m, &center_scratch);
  hd.heatmap = hs.data();
  hd.center = cs.data();
  hd.center_weighted = NameHas(m, *center, "truediv");
  hd.regress = reg->data.data();
  hd.offset = off->data.data();
  if (hs.size() != static_cast<size_t>(hd.h * hd.w * 17) || cs.size() != static_cast<size_t>(hd.h * hd.w) ||
      reg->data.size() != hs.size() * 2 || off->data.size() != hs.size() * 2)
    return Bad(m, "head sizes disagree");
  p.keypoints = DecodeMoveNet(hd);
  return p;
}

nlohmann::json ToJson(const PoseDecoded& p, cv::Size image) {
  if (!p.people.empty()) {
    nlohmann::json people = nlohmann::json::array();
    for (const PosePerson& q : p.people) {
      nlohmann::json j = ToJson(q.keypoints, image);
      j["score"] = q.score;
      j["box"] = {q.xmin * image.width, q.ymin * image.height, (q.xmax - q.xmin) * image.width,
                  (q.ymax - q.ymin) * image.height};
      people.push_back(std::move(j));
    }
    return {{"people", people}};
  }
  if (p.landmarks.empty()) return ToJson(p.keypoints, image);
  nlohmann::json j = ToJson(p.landmarks, p.input, image);
  if (p.has_pose_score) j["pose_score"] = p.pose_score;
  return j;
}

}  // namespace framemill::models
