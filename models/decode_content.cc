// The content model's decode: photo or drawing, and the NSFW classes.
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

}  // namespace framemill::models
