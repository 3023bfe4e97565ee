// The convolution's inner loops of the engine's CPU kernels (cpu_kernels.cc, built at -O3 so
// that they vectorize; included there only). Each output is summed one product at a time in
// the same order as the plain per-pixel loops they replaced, so the same floats come out:
// Megamind.avi's pose on the simulated device 18.8 -> 6.2 s in fp32 (2026-11-28, 2-core VM),
// its results byte for byte equal.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <tbb/parallel_for.h>

#include "engine/kernels.h"

namespace framemill::engine::cpu_conv {

// A fused activation, as every kernel applies it.
inline float Act(const ActivationParams& a, float v) {
  switch (a.kind) {
    case Activation::kNone: return v;
    case Activation::kRelu: return v > 0 ? v : 0.0f;
    case Activation::kClip: return std::min(std::max(v, a.lo), a.hi);
    case Activation::kSigmoid: return 1.0f / (1.0f + std::exp(-v));
    case Activation::kLeakyRelu: return v >= 0 ? v : a.alpha * v;
    case Activation::kTanh: return std::tanh(v);
    case Activation::kSwish: return v / (1.0f + std::exp(-v));
  }
  return v;
}

// One channel of a depthwise convolution. Each output sums its taps in (ky, kx) order, one
// product at a time, skipping the taps outside the input, as the per-pixel loop it replaces
// did; the loop runs a tap over a row's outputs it reaches, so that it vectorizes.
inline void DepthwisePlane(const Conv2dParams& p, const float* x, const float* w, float* y) {
  std::vector<float> row(static_cast<size_t>(p.w_out));
  for (int64_t oy = 0; oy < p.h_out; ++oy) {
    std::fill(row.begin(), row.end(), 0.0f);
    for (int ky = 0; ky < p.kh; ++ky) {
      const int64_t iy = oy * p.stride_h - p.pad_t + ky * p.dil_h;
      if (iy < 0 || iy >= p.h_in) continue;
      const float* xr = x + iy * p.w_in;
      for (int kx = 0; kx < p.kw; ++kx) {
        // The outputs whose input column ox * stride - pad + kx * dil is inside [0, w_in).
        const int64_t off = int64_t{kx} * p.dil_w - p.pad_l;
        const int64_t lo = off >= 0 ? 0 : (-off + p.stride_w - 1) / p.stride_w;
        const int64_t hi = p.w_in - 1 - off < 0 ? 0 : std::min<int64_t>(p.w_out, (p.w_in - 1 - off) / p.stride_w + 1);
        const float wv = w[ky * p.kw + kx];
        float* acc = row.data();
        if (p.stride_w == 1) {
          for (int64_t ox = lo; ox < hi; ++ox) acc[ox] += xr[ox + off] * wv;
        } else {
          for (int64_t ox = lo; ox < hi; ++ox) acc[ox] += xr[ox * p.stride_w + off] * wv;
        }
      }
    }
    std::copy(row.begin(), row.end(), y + oy * p.w_out);
  }
}

// A convolution's epilogue on one output channel: bias, the residual before or after the
// activation, the activation; each step over the whole row (the same float operations, in
// the same order, for each element, as one pass doing all of them), so that they vectorize.
inline void Epilogue(const Conv2dParams& p, float b, const float* rc, float* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] = y[j] + b;
  if (rc && !p.residual_after_act)
    for (int64_t j = 0; j < n; ++j) y[j] += rc[j];
  switch (p.act.kind) {
    case Activation::kNone: break;
    case Activation::kRelu:
      for (int64_t j = 0; j < n; ++j) y[j] = y[j] > 0 ? y[j] : 0.0f;
      break;
    case Activation::kClip:
      for (int64_t j = 0; j < n; ++j) y[j] = std::min(std::max(y[j], p.act.lo), p.act.hi);
      break;
    default:
      for (int64_t j = 0; j < n; ++j) y[j] = Act(p.act, y[j]);
  }
  if (rc && p.residual_after_act)
    for (int64_t j = 0; j < n; ++j) y[j] += rc[j];
}

// Y[co, :] = sum_k W[co, k] * X[k, :] for co < rows (W rows of K, X and Y rows of cols), four
// output rows and kCols columns at a time, so that the accumulators stay in the L1 cache. Each
// output is summed in k's order, one product at a time, whatever the tiling: the same floats
// as the untiled loop it replaces, which kept four whole rows of accumulators (a 16k-column
// row is 256 KB) and ran 3x slower (SimPoseTracksTest: pose on the simulated device).
inline void GemmRows(const float* w, const float* x, int64_t rows, int64_t K, int64_t cols, float* y) {
  constexpr int64_t kCols = 256;
  const int64_t blocks = (rows + 3) / 4, tiles = (cols + kCols - 1) / kCols;
  tbb::parallel_for(int64_t{0}, blocks * tiles, [&](int64_t task) {
    const int64_t r0 = task / tiles * 4, rn = std::min<int64_t>(4, rows - r0);
    const int64_t j0 = task % tiles * kCols, jn = std::min(kCols, cols - j0);
    const float* wr[4];
    for (int64_t r = 0; r < 4; ++r) wr[r] = w + (r0 + std::min(r, rn - 1)) * K;
    alignas(64) float acc[4][kCols] = {};
    for (int64_t k = 0; k < K; ++k) {
      const float* c = x + k * cols + j0;
      const float w0 = wr[0][k], w1 = wr[1][k], w2 = wr[2][k], w3 = wr[3][k];
      for (int64_t j = 0; j < jn; ++j) {
        const float v = c[j];
        acc[0][j] += w0 * v;
        acc[1][j] += w1 * v;
        acc[2][j] += w2 * v;
        acc[3][j] += w3 * v;
      }
    }
    for (int64_t r = 0; r < rn; ++r) std::copy(acc[r], acc[r] + jn, y + (r0 + r) * cols + j0);
  });
}

}  // namespace framemill::engine::cpu_conv
