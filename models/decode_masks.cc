// The segmentation models' decode: selfie, isnet, blazepose's mask.
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

nlohmann::json ToJson(const Mask& m) {
  nlohmann::json j = {{"width", m.binary.cols}, {"height", m.binary.rows},
                      {"coverage", m.coverage}};
  j["bbox"] = m.bbox.area() > 0 ? nlohmann::json{m.bbox.x, m.bbox.y, m.bbox.width, m.bbox.height}
                                : nlohmann::json(nullptr);
  return j;
}

Result<Mask> DecodeSegmentation(const ModelManifest& m, const std::vector<OutputTensor>& outs,
                                cv::Size image, float threshold) {
  const OutputTensor* best = nullptr;  // the mask: the largest output
  for (const auto& o : outs)
    if (!best || o.data.size() > best->data.size()) best = &o;
  if (!best) return Bad(m, "no output");
  return DecodeMask(*best, image, threshold);
}

}  // namespace framemill::models
