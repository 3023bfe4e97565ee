// YOLOv8's decode (Ultralytics' head, after the graph's cut: tools/models/fmlib/yolo.py):
// distances by a softmax expectation over 16 bins, classes by sigmoid, class-aware NMS, and
// boxes mapped back through the letterbox the input was made with.
#include <algorithm>
#include <array>
#include <cmath>

#include "models/decode.h"
#include "models/decode_internal.h"
#include "models/letterbox.h"

namespace framemill::models {

using namespace decode_internal;

namespace {

constexpr int kBins = 16, kClasses = 80, kChannels = 4 * kBins + kClasses;

// The expected bin of one side's 16 logits (softmax weights), at cell `c`'s channels.
float Expectation(const float* head, int64_t plane, int64_t c, int side) {
  const float* x = head + static_cast<int64_t>(side) * kBins * plane + c;
  float top = x[0];
  for (int b = 1; b < kBins; ++b) top = std::max(top, x[b * plane]);
  float sum = 0, weighted = 0;
  for (int b = 0; b < kBins; ++b) {
    const float e = std::exp(x[b * plane] - top);
    sum += e;
    weighted += e * static_cast<float>(b);
  }
  return weighted / sum;
}

// The anchors of one head [1, 144, g, g] whose best class reaches `min_score`, in input pixels.
void HeadCandidates(const OutputTensor& t, float stride, float min_score, std::vector<Detection>* out) {
  const int64_t gh = t.shape[2], gw = t.shape[3], plane = gh * gw;
  const float min_logit = std::log(min_score / (1 - min_score));
  const float* head = t.data.data();
  for (int64_t c = 0; c < plane; ++c) {
    int best = 0;
    float logit = head[4 * kBins * plane + c];
    for (int k = 1; k < kClasses; ++k) {
      const float v = head[(4 * kBins + k) * plane + c];
      if (v > logit) logit = v, best = k;
    }
    if (logit < min_logit) continue;
    const float cx = static_cast<float>(c % gw) + 0.5f, cy = static_cast<float>(c / gw) + 0.5f;
    Detection d;
    d.x1 = (cx - Expectation(head, plane, c, 0)) * stride;
    d.y1 = (cy - Expectation(head, plane, c, 1)) * stride;
    d.x2 = (cx + Expectation(head, plane, c, 2)) * stride;
    d.y2 = (cy + Expectation(head, plane, c, 3)) * stride;
    d.score = 1.f / (1.f + std::exp(-logit));
    d.class_id = best;
    out->push_back(d);
  }
}

}  // namespace

Result<std::vector<Detection>> DecodeYolo(const ModelManifest& m, const std::vector<OutputTensor>& outs,
                                          cv::Size image, const DetectionOptions& opt) {
  const cv::Size input = InputSize(m);
  std::vector<Detection> raw;
  for (const char* name : {"head_8", "head_16", "head_32"}) {
    const OutputTensor* t = Find(outs, [&](const OutputTensor& o) { return o.name == name; });
    if (t == nullptr || t->shape.size() != 4 || t->shape[1] != kChannels || t->shape[2] <= 0 ||
        t->data.size() != static_cast<size_t>(t->Elements()))
      return Bad(m, std::string("needs head ") + name + " [1,144,h,w]");
    HeadCandidates(*t, static_cast<float>(input.width) / static_cast<float>(t->shape[3]),
                   std::max(opt.min_score, 1e-6f), &raw);
  }
  // Class-aware NMS: each class's boxes moved apart from every other class's, as Ultralytics does.
  std::vector<cv::Rect2f> rects;
  std::vector<float> scores;
  for (const Detection& d : raw) {
    const float shift = static_cast<float>(d.class_id) * 8192.f;
    rects.emplace_back(d.x1 + shift, d.y1, d.x2 - d.x1, d.y2 - d.y1);
    scores.push_back(d.score);
  }
  // Input pixels to the picture's: back through the letterbox, or the stretch where none.
  LetterboxGeometry g;
  float sx = static_cast<float>(input.width) / image.width;
  float sy = static_cast<float>(input.height) / image.height;
  if (m.letterbox_pad >= 0) {
    g = LetterboxOf(image, input);
    sx = sy = static_cast<float>(g.scale);
  }
  std::vector<Detection> out;
  for (int i : Nms(rects, scores, opt.iou_threshold, opt.min_score, opt.max_detections)) {
    Detection d = raw[i];
    d.x1 = (d.x1 - g.left) / sx;
    d.x2 = (d.x2 - g.left) / sx;
    d.y1 = (d.y1 - g.top) / sy;
    d.y2 = (d.y2 - g.top) / sy;
    out.push_back(d);
  }
  return out;
}

}  // namespace framemill::models
