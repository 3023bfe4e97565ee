// The object detector's decode: CenterNet's peaks, NMS and COCO labels.
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

nlohmann::json ToJson(const std::vector<Detection>& dets) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& d : dets)
    a.push_back({{"box", {d.x1, d.y1, d.x2, d.y2}}, {"score", d.score}, {"class", d.class_id},
                 {"label", CocoLabel(d.class_id)}});
  return {{"detections", a}};
}

DetectionOptions DetectionDefaults(const ModelManifest& m, float min_score) {
  DetectionOptions opt;
  opt.min_score = min_score;
  opt.max_detections = 20;
  if (m.postprocess == "yolov8") {
    opt.iou_threshold = 0.7f;
    opt.max_detections = 100;
  }
  return opt;
}

Result<std::vector<Detection>> DecodeObjects(const ModelManifest& m,
                                             const std::vector<OutputTensor>& outs,
                                             cv::Size image, const DetectionOptions& opt) {
  if (m.postprocess == "yolov8") return DecodeYolo(m, outs, image, opt);
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

}  // namespace framemill::models
