// ONNX Resize's source taps along one axis, as the reference computes them: for each output
// index the two input indices and the weight of the second (nearest: one index, weight 0).
// Shared with the oneDNN kernels' channels-last resize, which blends each pixel's channels
// with the same arithmetic: the same floats as the reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/kernels.h"

namespace framemill::engine {

struct ResizeTap {
  int64_t i0, i1;
  float f;
};

inline float ResizeSourceCoord(ResizeCoord c, int64_t o, int64_t in, int64_t out, float scale) {
  switch (c) {
    case ResizeCoord::kHalfPixel: return (o + 0.5f) / scale - 0.5f;
    case ResizeCoord::kPytorchHalfPixel: return out > 1 ? (o + 0.5f) / scale - 0.5f : 0.0f;
    case ResizeCoord::kAlignCorners:
      return out > 1 ? static_cast<float>(o) * (in - 1) / static_cast<float>(out - 1) : 0.0f;
    case ResizeCoord::kAsymmetric: return o / scale;
    case ResizeCoord::kTfHalfPixelForNn: return (o + 0.5f) / scale;
  }
  return 0;
}

// The taps of `out` outputs from `in` inputs at `scale` (p's mode, coordinates and rounding).
inline std::vector<ResizeTap> ResizeTaps(const ResizeParams& p, int64_t in, int64_t out, float scale) {
  std::vector<ResizeTap> t(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    float s = ResizeSourceCoord(p.coord, o, in, out, scale);
    if (p.mode == ResizeMode::kNearest) {
      float fl = std::floor(s);
      int64_t i;
      switch (p.nearest) {
        case ResizeNearest::kRoundPreferFloor: i = (s - fl == 0.5f) ? static_cast<int64_t>(fl) : static_cast<int64_t>(std::round(s)); break;
        case ResizeNearest::kRoundPreferCeil: i = (s - fl == 0.5f) ? static_cast<int64_t>(fl) + 1 : static_cast<int64_t>(std::round(s)); break;
        case ResizeNearest::kFloor: i = static_cast<int64_t>(fl); break;
        default: i = static_cast<int64_t>(std::ceil(s)); break;
      }
      i = std::clamp<int64_t>(i, 0, in - 1);
      t[o] = {i, i, 0.0f};
    } else {
      s = std::clamp(s, 0.0f, static_cast<float>(in - 1));
      int64_t i0 = static_cast<int64_t>(std::floor(s));
      int64_t i1 = std::min(i0 + 1, in - 1);
      t[o] = {i0, i1, s - static_cast<float>(i0)};
    }
  }
  return t;
}

}  // namespace framemill::engine
