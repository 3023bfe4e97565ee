#include "engine/dnnl/own_loops.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/reference/resize_taps.h"

namespace framemill::engine::dnnl_detail {

bool Blockwise(const ConvTranspose2dParams& p) {
  return p.kh == p.stride_h && p.kw == p.stride_w && p.pad_t == 0 && p.pad_l == 0 && p.pad_b == 0 && p.pad_r == 0 &&
         p.dil_h == 1 && p.dil_w == 1 && p.groups == 1 && p.c_out < 16 && p.h_out == p.h_in * p.kh &&
         p.w_out == p.w_in * p.kw;
}

void DeconvBlocks(const ConvTranspose2dParams& p, const float* X, bool cl, const float* W, const float* B, float* Y) {
  const int64_t kk = int64_t{p.kh} * p.kw, taps = p.c_out * kk, cin = p.c_in, wi = p.w_in;
  // W is ONNX's [c_in][c_out][kh][kw].
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < p.n * p.h_in; ++row) {
    const int64_t n = row / p.h_in, iy = row % p.h_in;
    std::vector<float> xr(static_cast<size_t>(cin * wi)), acc(static_cast<size_t>(wi));
    for (int64_t ci = 0; ci < cin; ++ci)
      for (int64_t ix = 0; ix < wi; ++ix)
        xr[ci * wi + ix] = cl ? X[(row * wi + ix) * cin + ci] : X[((n * cin + ci) * p.h_in + iy) * wi + ix];
    for (int64_t t = 0; t < taps; ++t) {
      const int64_t co = t / kk, ky = t / p.kw % p.kh, kx = t % p.kw;
      std::fill(acc.begin(), acc.end(), B ? B[co] : 0.0f);
      for (int64_t ci = 0; ci < cin; ++ci) {
        const float wv = W[ci * taps + t];
        const float* xp = xr.data() + ci * wi;
        for (int64_t ix = 0; ix < wi; ++ix) acc[ix] += xp[ix] * wv;
      }
      float* out = Y + ((n * p.c_out + co) * p.h_out + iy * p.kh + ky) * p.w_out + kx;
      for (int64_t ix = 0; ix < wi; ++ix) out[ix * p.kw] = acc[ix];
    }
  }
}

bool FewOutputs(const Conv2dParams& p) { return p.c_out < 4 && p.groups == 1 && p.c_in >= 16; }

void ConvFewOutputs(const Conv2dParams& p, const float* X, const float* W, const float* B, float* Y) {
  const int64_t c = p.c_in, taps = int64_t{p.kh} * p.kw;
  // The weights as [c_out][ky][kx][c_in]: each tap's channels contiguous, as the input's.
  std::vector<float> w(static_cast<size_t>(p.c_out * taps * c));
  for (int64_t o = 0; o < p.c_out; ++o)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t t = 0; t < taps; ++t) w[(o * taps + t) * c + ci] = W[(o * c + ci) * taps + t];
  const float* wv = w.data();
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < p.n * p.h_out; ++row) {
    const int64_t n = row / p.h_out, oy = row % p.h_out;
    for (int64_t o = 0; o < p.c_out; ++o) {
      float* out = Y + ((n * p.c_out + o) * p.h_out + oy) * p.w_out;
      for (int64_t ox = 0; ox < p.w_out; ++ox) {
        float acc = B ? B[o] : 0.0f;
        for (int64_t ky = 0; ky < p.kh; ++ky) {
          const int64_t iy = oy * p.stride_h - p.pad_t + ky * p.dil_h;
          if (iy < 0 || iy >= p.h_in) continue;
          for (int64_t kx = 0; kx < p.kw; ++kx) {
            const int64_t ix = ox * p.stride_w - p.pad_l + kx * p.dil_w;
            if (ix < 0 || ix >= p.w_in) continue;
            const float* xp = X + ((n * p.h_in + iy) * p.w_in + ix) * c;
            const float* k = wv + (o * taps + ky * p.kw + kx) * c;
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int64_t ci = 0; ci < c; ++ci) dot += xp[ci] * k[ci];
            acc += dot;
          }
        }
        out[ox] = acc;
      }
    }
  }
}

namespace {

// One output pixel's channels: the reference's bilinear blend, channel by channel.
void BlendChannels(const float* __restrict p00, const float* __restrict p01, const float* __restrict p10,
                   const float* __restrict p11, float fx, float fy, float* __restrict out, int64_t c) {
#pragma omp simd
  for (int64_t k = 0; k < c; ++k) {
    const float top = p00[k] + (p01[k] - p00[k]) * fx;
    const float bot = p10[k] + (p11[k] - p10[k]) * fx;
    out[k] = top + (bot - top) * fy;
  }
}

void PReluPixel(const float* __restrict x, const float* __restrict k, float* __restrict y, int64_t c) {
  for (int64_t ch = 0; ch < c; ++ch) y[ch] = std::max(x[ch], 0.0f) + k[ch] * std::min(x[ch], 0.0f);
}

}  // namespace

void ResizeChannelsLast(const ResizeParams& p, int64_t n_, int64_t c, const float* x, float* y) {
  const auto ty = ResizeTaps(p, p.h_in, p.h_out, p.scale_h), tx = ResizeTaps(p, p.w_in, p.w_out, p.scale_w);
  const int64_t rows = n_ * p.h_out;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t n = row / p.h_out, oy = row % p.h_out;
    const ResizeTap& a = ty[oy];
    const float* r0 = x + (n * p.h_in + a.i0) * p.w_in * c;
    const float* r1 = x + (n * p.h_in + a.i1) * p.w_in * c;
    float* out = y + row * p.w_out * c;
    for (int64_t ox = 0; ox < p.w_out; ++ox, out += c) {
      const ResizeTap& b = tx[ox];
      BlendChannels(r0 + b.i0 * c, r0 + b.i1 * c, r1 + b.i0 * c, r1 + b.i1 * c, b.f, a.f, out, c);
    }
  }
}

void PReluChannelsLast(const float* x, const float* slopes, int64_t pixels, int64_t c, float* y) {
#pragma omp parallel for schedule(static)
  for (int64_t px = 0; px < pixels; ++px) PReluPixel(x + px * c, slopes, y + px * c, c);
}

void PadChannelsLast(const float* src, int64_t pixels, int64_t c, int64_t before, int64_t after, float v,
                     float* dst) {
  const int64_t c_out = c + before + after;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < pixels; ++k) {
    float* o = dst + k * c_out;
    std::fill(o, o + before, v);
    std::memcpy(o + before, src + k * c, static_cast<size_t>(c) * 4);
    std::fill(o + before + c, o + c_out, v);
  }
}

void ParallelCopy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kPart = size_t{1} << 20;  // below a MB a part, one thread does it
  const int64_t parts = static_cast<int64_t>((bytes + kPart - 1) / kPart);
  if (parts <= 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < parts; ++k) {
    const size_t at = static_cast<size_t>(k) * kPart;
    std::memcpy(static_cast<char*>(dst) + at, static_cast<const char*>(src) + at, std::min(kPart, bytes - at));
  }
}

}  // namespace framemill::engine::dnnl_detail
