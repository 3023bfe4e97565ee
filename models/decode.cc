#include "models/decode.h"
#include "models/face_tiles.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <opencv2/imgproc.hpp>

#include "gpu/ops.h"
#include "media/geometry.h"

namespace framemill::models {
namespace {

float Sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

// MoveNet's graph holds its decode constants as float16 (human-models ships fp16
// weights); using the same rounded values keeps our argmax identical to Identity:0.
float Fp16(float v) { return gpu::HalfToFloat(gpu::FloatToHalf(v)); }

int64_t LastDim(const OutputTensor& t) { return t.shape.empty() ? 0 : t.shape.back(); }

bool Contains(const std::string& s, const char* needle) {
  std::string a = s, b = needle;
  std::transform(a.begin(), a.end(), a.begin(), ::tolower);
  std::transform(b.begin(), b.end(), b.begin(), ::tolower);
  return a.find(b) != std::string::npos;
}

// The manifest spec of output i (its tfjs_node tells which head it is).
const ModelOutputSpec* SpecOf(const ModelManifest& m, const OutputTensor& t) {
  for (const auto& o : m.outputs)
    if (o.name == t.name) return &o;
  return nullptr;
}

bool NameHas(const ModelManifest& m, const OutputTensor& t, const char* needle) {
  if (Contains(t.name, needle)) return true;
  const ModelOutputSpec* s = SpecOf(m, t);
  return s && Contains(s->tfjs_node, needle);
}

bool AllProbabilities(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return x >= 0.f && x <= 1.f; });
}

// The head's probabilities: its own data when the graph already applied the sigmoid (not
// copied: CenterNet's heatmap is 5 MB), else `scratch` filled with them.
const std::vector<float>& Sigmoided(const OutputTensor& t, const ModelManifest& m, std::vector<float>* scratch) {
  if (NameHas(m, t, "sigmoid") || AllProbabilities(t.data)) return t.data;
  scratch->resize(t.data.size());
  for (size_t i = 0; i < scratch->size(); ++i) (*scratch)[i] = Sigmoid(t.data[i]);
  return *scratch;
}

}  // namespace

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

float MaskIoU(const cv::Mat& a, const cv::Mat& b) {
  CV_Assert(a.size() == b.size() && a.type() == CV_8U && b.type() == CV_8U);
  cv::Mat i, u;
  cv::bitwise_and(a != 0, b != 0, i);
  cv::bitwise_or(a != 0, b != 0, u);
  int nu = cv::countNonZero(u);
  return nu == 0 ? 1.f : static_cast<float>(cv::countNonZero(i)) / nu;
}

std::vector<int> Nms(const std::vector<cv::Rect2f>& boxes, const std::vector<float>& scores,
                     float iou, float min_score, int max_out) {
  std::vector<int> order;
  for (int i = 0; i < static_cast<int>(scores.size()); ++i)
    if (scores[i] > min_score) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return scores[a] > scores[b]; });
  std::vector<int> kept;
  for (int i : order) {
    if (static_cast<int>(kept.size()) >= max_out) break;
    bool drop = false;
    for (int k : kept)
      if (IoU(boxes[i], boxes[k]) > iou) { drop = true; break; }
    if (!drop) kept.push_back(i);
  }
  return kept;
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

std::vector<Detection> CenterNetTopK(const float* heat, const float* wh, int h, int w, int c,
                                     int k, float stride) {
  // Peaks: a score equal to the max of its 3x3 neighbourhood (SAME padding) survives, the
  // rest count as 0; the k best, ties by index. Only positive peaks can rank above the
  // zeros, so only they are sorted (a few thousand of 1.3 M scores). A photo's decode on a
  // device worker's thread: 24 ms before (sim, 20 photos, bench/feed_device.sh), the same
  // detections (CenterNetTest.TopKIsTheDefinitionsOnRandomHeatMaps).
  const int total = h * w * c;
  k = std::min(k, total);
  // The 3x3 max of each channel, separably: across x into a ring of three rows, then across
  // those rows, a cell's channels at a time (contiguous: the compiler vectorises it), the
  // ring staying in cache.
  const size_t row = static_cast<size_t>(w) * c;
  std::vector<float> ring(3 * row), around(row);
  auto across = [&](int y) {  // row y's max across x, into its ring slot
    const float* in = heat + static_cast<size_t>(y) * row;
    float* out = ring.data() + static_cast<size_t>(y % 3) * row;
    for (int x = 0; x < w; ++x) {
      const float *a = in + std::max(0, x - 1) * c, *b = in + x * c, *d = in + std::min(w - 1, x + 1) * c;
      float* o = out + static_cast<size_t>(x) * c;
      for (int ch = 0; ch < c; ++ch) o[ch] = std::max(std::max(a[ch], b[ch]), d[ch]);
    }
  };
  std::vector<std::pair<float, int>> peaks;
  across(0);
  for (int y = 0; y < h; ++y) {
    if (y + 1 < h) across(y + 1);
    const float* up = ring.data() + static_cast<size_t>(std::max(0, y - 1) % 3) * row;
    const float* mid = ring.data() + static_cast<size_t>(y % 3) * row;
    const float* down = ring.data() + static_cast<size_t>(std::min(h - 1, y + 1) % 3) * row;
    for (size_t i = 0; i < row; ++i) around[i] = std::max(std::max(up[i], mid[i]), down[i]);
    const float* in = heat + static_cast<size_t>(y) * row;
    for (size_t i = 0; i < row; ++i)
      if (in[i] > 0 && in[i] == around[i]) peaks.emplace_back(in[i], static_cast<int>(y * row + i));
  }
  auto better = [](const std::pair<float, int>& a, const std::pair<float, int>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  const size_t top = std::min<size_t>(static_cast<size_t>(k), peaks.size());
  std::partial_sort(peaks.begin(), peaks.begin() + static_cast<long>(top), peaks.end(), better);
  peaks.resize(top);
  if (static_cast<int>(top) < k) {  // fewer peaks than k: the zeros follow, by index
    std::vector<bool> taken(total, false);
    for (const auto& p : peaks) taken[p.second] = true;
    for (int id = 0; id < total && static_cast<int>(peaks.size()) < k; ++id)
      if (!taken[id]) peaks.emplace_back(0.f, id);
  }
  std::vector<Detection> out(k);
  for (int i = 0; i < k; ++i) {
    const auto [score, id] = peaks[i];
    const int cls = id % c, pix = id / c, y = pix / w, x = pix % w;
    const float* b = wh + pix * 4;
    out[i] = {x * stride - b[0], y * stride - b[1], x * stride + b[2], y * stride + b[3], score, cls};
  }
  return out;
}

std::vector<Detection> FilterDetections(const std::vector<Detection>& raw, cv::Size input,
                                        cv::Size image, const DetectionOptions& opt) {
  std::vector<cv::Rect2f> rects;
  std::vector<float> scores;
  for (const auto& d : raw) {
    rects.emplace_back(d.x1, d.y1, d.x2 - d.x1, d.y2 - d.y1);
    scores.push_back(d.score);
  }
  const float fx = static_cast<float>(image.width) / input.width;
  const float fy = static_cast<float>(image.height) / input.height;
  std::vector<Detection> out;
  for (int i : Nms(rects, scores, opt.iou_threshold, opt.min_score, opt.max_detections)) {
    Detection d = raw[i];
    d.x1 *= fx; d.x2 *= fx; d.y1 *= fy; d.y2 *= fy;
    out.push_back(d);
  }
  return out;
}

const char* CocoLabel(int id) {
  static const char* kLabels[80] = {
      "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
      "traffic light", "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog",
      "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella",
      "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite",
      "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle",
      "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple", "sandwich",
      "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch",
      "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote",
      "keyboard", "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "book",
      "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush"};
  return id >= 0 && id < 80 ? kLabels[id] : "unknown";
}

Result<Mask> DecodeMask(const OutputTensor& t, cv::Size image, float threshold) {
  std::vector<int64_t> d;
  for (int64_t s : t.shape)
    if (s != 1) d.push_back(s);
  if (d.size() != 2 || static_cast<int64_t>(t.data.size()) != d[0] * d[1])
    return Status::InvalidArgument("mask output '" + t.name + "' is not a single-channel map");
  Mask m;
  m.prob = cv::Mat(static_cast<int>(d[0]), static_cast<int>(d[1]), CV_32F,
                   const_cast<float*>(t.data.data()))
               .clone();
  cv::Mat resized;
  cv::resize(m.prob, resized, image, 0, 0, cv::INTER_LINEAR);
  m.binary = resized > threshold;
  int fg = cv::countNonZero(m.binary);
  m.coverage = image.area() > 0 ? static_cast<double>(fg) / image.area() : 0;
  if (fg > 0) m.bbox = cv::boundingRect(m.binary);
  return m;
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

nlohmann::json ToJson(const std::vector<Detection>& dets) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& d : dets)
    a.push_back({{"box", {d.x1, d.y1, d.x2, d.y2}}, {"score", d.score}, {"class", d.class_id},
                 {"label", CocoLabel(d.class_id)}});
  return {{"detections", a}};
}

nlohmann::json ToJson(const Mask& m) {
  nlohmann::json j = {{"width", m.binary.cols}, {"height", m.binary.rows},
                      {"coverage", m.coverage}};
  j["bbox"] = m.bbox.area() > 0 ? nlohmann::json{m.bbox.x, m.bbox.y, m.bbox.width, m.bbox.height}
                                : nlohmann::json(nullptr);
  return j;
}

namespace {

Status Bad(const ModelManifest& m, const std::string& why) {
  return Status::Corruption("model " + m.name + " (" + m.postprocess + "): " + why);
}

template <typename Pred>
const OutputTensor* Find(const std::vector<OutputTensor>& outs, Pred pred) {
  for (const auto& o : outs)
    if (pred(o)) return &o;
  return nullptr;
}

// The output called `name`, else the first that `pred` accepts.
template <typename Pred>
const OutputTensor* Named(const std::vector<OutputTensor>& outs, const char* name, Pred pred) {
  if (const OutputTensor* o = Find(outs, [&](const OutputTensor& t) { return t.name == name; }))
    return o;
  return Find(outs, pred);
}

cv::Size InputSize(const ModelManifest& m) { return {m.preprocess.width, m.preprocess.height}; }

}  // namespace

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

}  // namespace

Result<std::vector<FaceBox>> DecodeFaceDetections(const ModelManifest& m,
                                                  const std::vector<OutputTensor>& outs,
                                                  cv::Size image, BlazeFaceOptions opt) {
  auto rows = FaceRows(m, outs, &opt);
  if (!rows.ok()) return rows.status();
  return DecodeBlazeFace(*rows, image, opt);
}

Result<std::vector<FaceBox>> DecodeFaceCandidates(const ModelManifest& m,
                                                  const std::vector<OutputTensor>& outs,
                                                  cv::Size image, BlazeFaceOptions opt) {
  auto rows = FaceRows(m, outs, &opt);
  if (!rows.ok()) return rows.status();
  return BlazeFaceCandidates(*rows, image, opt);
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

Result<std::vector<Detection>> DecodeObjects(const ModelManifest& m,
                                             const std::vector<OutputTensor>& outs,
                                             cv::Size image, const DetectionOptions& opt) {
  const OutputTensor* heat = Named(outs, "keypoints", [](const OutputTensor& o) {
    return o.shape.size() == 4 && LastDim(o) == 80;
  });
  const OutputTensor* wh = Named(outs, "wh", [](const OutputTensor& o) {
    return o.shape.size() == 4 && LastDim(o) == 4;
  });
  if (heat == nullptr || wh == nullptr || heat->shape.size() != 4)
    return Bad(m, "needs class heatmap [..,80] and wh [..,4] heads");
  const int h = static_cast<int>(heat->shape[1]), w = static_cast<int>(heat->shape[2]);
  if (heat->data.size() != static_cast<size_t>(h) * w * 80 ||
      wh->data.size() != static_cast<size_t>(h) * w * 4)
    return Bad(m, "head sizes disagree");
  const cv::Size input = InputSize(m);
  std::vector<float> scratch;
  const std::vector<float>& hs = Sigmoided(*heat, m, &scratch);
  auto raw = CenterNetTopK(hs.data(), wh->data.data(), h, w, 80, 100,
                           static_cast<float>(input.width) / w);
  return FilterDetections(raw, input, image, opt);
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

Result<Mask> DecodeSegmentation(const ModelManifest& m, const std::vector<OutputTensor>& outs,
                                cv::Size image, float threshold) {
  const OutputTensor* best = nullptr;  // the mask: the largest output
  for (const auto& o : outs)
    if (!best || o.data.size() > best->data.size()) best = &o;
  if (!best) return Bad(m, "no output");
  return DecodeMask(*best, image, threshold);
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

Result<ContentDecoded> DecodeContent(const ModelManifest& m, const std::vector<OutputTensor>& outs) {
  auto* probs = Named(outs, "probabilities", [](const OutputTensor& o) { return o.data.size() == 5; });
  if (!probs || probs->data.size() != 5) return Bad(m, "needs probabilities (5 values)");
  const LinearProbe& probe = m.content_probe;
  if (probe.weights.empty()) return Bad(m, "its manifest has no content_probe: re-convert it (`framemill models fetch --force`)");
  auto* feats = Named(outs, probe.output.c_str(), [](const OutputTensor&) { return false; });
  if (!feats || feats->data.size() != probe.weights.size())
    return Bad(m, "content_probe reads " + probe.output + " (" + std::to_string(probe.weights.size()) +
                      " values), which the outputs do not hold");
  ContentDecoded c;
  std::copy(probs->data.begin(), probs->data.end(), c.classes.begin());
  c.unsafe = c.classes[1] + c.classes[3];  // hentai + porn
  double dot = 0, norm = 0;
  for (size_t i = 0; i < feats->data.size(); ++i) {
    dot += double(probe.weights[i]) * feats->data[i];
    norm += double(feats->data[i]) * feats->data[i];
  }
  if (probe.l2_normalise && norm > 0) dot /= std::sqrt(norm);
  const double p = 1.0 / (1.0 + std::exp(-(dot + probe.bias)));
  // The probe names its positive class; the other one is the complement.
  const bool positive_is_photo = probe.positive == "photo";
  c.photo = static_cast<float>(positive_is_photo ? p : 1 - p);
  c.is_photo = positive_is_photo ? p >= probe.threshold : p < probe.threshold;
  return c;
}

nlohmann::json ToJson(const ContentDecoded& c) {
  nlohmann::json nsfw = nlohmann::json::object();
  for (size_t i = 0; i < kNsfwClasses.size(); ++i) nsfw[kNsfwClasses[i]] = c.classes[i];
  nsfw["unsafe"] = c.unsafe;
  return {{"content", {{"type", c.is_photo ? "photo" : "drawing"}, {"p", c.is_photo ? c.photo : 1 - c.photo}}},
          {"nsfw", nsfw}};
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

Result<nlohmann::json> DecodeOutputs(const ModelManifest& m, const std::vector<OutputTensor>& outs,
                                     cv::Size image) {
  const std::string& pp = m.postprocess;
  auto json_of = [&](const auto& r) -> Result<nlohmann::json> {
    if (!r.ok()) return r.status();
    return ToJson(*r);
  };
  if (pp.empty() || pp == "none") return nlohmann::json(nullptr);
  if (pp == "faceres" || pp == "l2_normalize") {
    auto d = DecodeFaceDescription(m, outs);
    if (!d.ok()) return d.status();
    return d->has_attributes ? ToJson(*d) : ToJson(d->embedding);
  }
  if (pp == "blazeface") return json_of(DecodeFaceDetections(m, outs, image));
  if (pp == "facemesh") return json_of(DecodeFaceMesh(m, outs, image));
  if (pp == "centernet") return json_of(DecodeObjects(m, outs, image));
  if (pp == "sigmoid_mask" || pp == "selfie" || pp == "isnet")
    return json_of(DecodeSegmentation(m, outs, image));
  if (pp == "movenet" || pp == "movenet_multipose" || pp == "blazepose") {
    auto p = DecodePose(m, outs);
    if (!p.ok()) return p.status();
    return ToJson(*p, image);
  }
  return Status::Unsupported("model " + m.name + ": unknown postprocess '" + pp + "'");
}

}  // namespace framemill::models
