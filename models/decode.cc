#include "models/decode.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <opencv2/imgproc.hpp>

#include "gpu/ops.h"
#include "media/geometry.h"
#include "models/decode_internal.h"

namespace framemill::models {

using namespace decode_internal;

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
  if (pp == "centernet" || pp == "yolov8") return json_of(DecodeObjects(m, outs, image));
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
