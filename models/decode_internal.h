// What the decode files (models/decode_*.cc) share: finding a model's outputs by name or
// shape, the sigmoid, and the error naming the model. Internal to models/.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "gpu/ops.h"
#include "models/decode.h"

namespace framemill::models::decode_internal {

inline float Sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

// MoveNet's graph holds its decode constants as float16 (human-models ships fp16
// weights); using the same rounded values keeps our argmax identical to Identity:0.
inline float Fp16(float v) { return gpu::HalfToFloat(gpu::FloatToHalf(v)); }

inline int64_t LastDim(const OutputTensor& t) { return t.shape.empty() ? 0 : t.shape.back(); }

inline bool Contains(const std::string& s, const char* needle) {
  std::string a = s, b = needle;
  std::transform(a.begin(), a.end(), a.begin(), ::tolower);
  std::transform(b.begin(), b.end(), b.begin(), ::tolower);
  return a.find(b) != std::string::npos;
}

// The manifest spec of output i (its tfjs_node tells which head it is).
inline const ModelOutputSpec* SpecOf(const ModelManifest& m, const OutputTensor& t) {
  for (const auto& o : m.outputs)
    if (o.name == t.name) return &o;
  return nullptr;
}

inline bool NameHas(const ModelManifest& m, const OutputTensor& t, const char* needle) {
  if (Contains(t.name, needle)) return true;
  const ModelOutputSpec* s = SpecOf(m, t);
  return s && Contains(s->tfjs_node, needle);
}

inline bool AllProbabilities(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return x >= 0.f && x <= 1.f; });
}

// The head's probabilities: its own data when the graph already applied the sigmoid (not
// copied: CenterNet's heatmap is 5 MB), else `scratch` filled with them.
inline const std::vector<float>& Sigmoided(const OutputTensor& t, const ModelManifest& m, std::vector<float>* scratch) {
  if (NameHas(m, t, "sigmoid") || AllProbabilities(t.data)) return t.data;
  scratch->resize(t.data.size());
  for (size_t i = 0; i < scratch->size(); ++i) (*scratch)[i] = Sigmoid(t.data[i]);
  return *scratch;
}


inline Status Bad(const ModelManifest& m, const std::string& why) {
  return Status::Corruption("model " + m.name + " (" + m.postprocess + "): " + why);
}

template <typename Pred>
inline const OutputTensor* Find(const std::vector<OutputTensor>& outs, Pred pred) {
  for (const auto& o : outs)
    if (pred(o)) return &o;
  return nullptr;
}

// The output called `name`, else the first that `pred` accepts.
template <typename Pred>
inline const OutputTensor* Named(const std::vector<OutputTensor>& outs, const char* name, Pred pred) {
  if (const OutputTensor* o = Find(outs, [&](const OutputTensor& t) { return t.name == name; }))
    return o;
  return Find(outs, pred);
}

inline cv::Size InputSize(const ModelManifest& m) { return {m.preprocess.width, m.preprocess.height}; }


}  // namespace framemill::models::decode_internal
