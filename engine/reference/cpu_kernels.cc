#include "engine/reference/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "engine/tensor.h"
#include "engine/reference/cpu_conv_loops.h"
#include "engine/reference/resize_taps.h"

namespace framemill::engine {

namespace {

using cpu_conv::Act;
using cpu_conv::DepthwisePlane;
using cpu_conv::Epilogue;
using cpu_conv::GemmRows;

// A read-only fp32 view of a stored tensor (converted from half when needed).
class In {
 public:
  In(const void* p, int64_t n, StorageType st) {
    if (!p) return;
    if (st == StorageType::kFloat32) {
      p_ = static_cast<const float*>(p);
    } else {
      tmp_.resize(static_cast<size_t>(n));
      const auto* h = static_cast<const uint16_t*>(p);
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1 << 14), [&](const auto& r) {
        HalvesToFloats(h + r.begin(), tmp_.data() + r.begin(), static_cast<size_t>(r.end() - r.begin()));
      });
      p_ = tmp_.data();
    }
  }
  const float* get() const { return p_; }
  float operator[](int64_t k) const { return p_[k]; }

 private:
  std::vector<float> tmp_;
  const float* p_ = nullptr;
};

// A writable fp32 view of a stored tensor; Commit() rounds through half when needed.
class Out {
 public:
  Out(void* p, int64_t n, StorageType st) : dst_(p), n_(n), st_(st) {
    if (st == StorageType::kFloat32) {
      p_ = static_cast<float*>(p);
    } else {
      tmp_.resize(static_cast<size_t>(n));
      p_ = tmp_.data();
    }
  }
  float* get() { return p_; }
  float& operator[](int64_t k) { return p_[k]; }
  void Commit() {
    if (st_ == StorageType::kFloat32) return;
    auto* h = static_cast<uint16_t*>(dst_);
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n_, 1 << 14), [&](const auto& r) {
      FloatsToHalves(tmp_.data() + r.begin(), h + r.begin(), static_cast<size_t>(r.end() - r.begin()));
    });
  }

 private:
  void* dst_;
  int64_t n_;
  StorageType st_;
  std::vector<float> tmp_;
  float* p_ = nullptr;
};

class CpuKernels final : public Kernels {
 public:
  explicit CpuKernels(int64_t limit) : limit_(limit) {}
  ~CpuKernels() override {
    for (auto& [p, n] : live_) std::free(p);
  }
  std::string name() const override { return "cpu"; }
  Status Prepare(StorageType storage) override {
    st_ = storage;
    return Status::OK();
  }

  Status Alloc(size_t bytes, void** out) override {
    size_t size = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
    if (limit_ > 0 && used_ + static_cast<int64_t>(size) > limit_)
      return Status::OutOfMemory("cpu kernels: " + std::to_string(size) + " bytes over the limit of " +
                                 std::to_string(limit_) + " (" + std::to_string(used_) + " in use)");
    void* p = std::aligned_alloc(256, size);
    if (!p) return Status::OutOfMemory("cpu kernels: host allocation of " + std::to_string(size) + " bytes failed");
    live_[p] = static_cast<int64_t>(size);
    used_ += static_cast<int64_t>(size);
    *out = p;
    return Status::OK();
  }
  void Free(void* p) override {
    if (!p) return;
    auto it = live_.find(p);
    if (it != live_.end()) {
      used_ -= it->second;
      live_.erase(it);
    }
    std::free(p);
  }
  Status Upload(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::OK();
  }
  Status Download(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::OK();
  }
  Status Sync() override { return Status::OK(); }

  Status Conv2d(const Conv2dParams& p, const void* x, const void* w, const void* bias,
                const void* residual, void* y, void* /*scratch*/) override {
    const int64_t cin_g = p.c_in / p.groups, cout_g = p.c_out / p.groups;
    const int64_t hw_in = p.h_in * p.w_in, hw = p.h_out * p.w_out;
    const int64_t kk = int64_t{p.kh} * p.kw, K = cin_g * kk;
    In X(x, p.n * p.c_in * hw_in, st_), W(w, p.c_out * K, st_), B(bias, p.c_out, st_);
    In R(residual, p.n * p.c_out * hw, st_);
    Out Y(y, p.n * p.c_out * hw, st_);
    const float* xp = X.get();
    const float* wp = W.get();
    float* yp = Y.get();
    if (cin_g == 1 && cout_g == 1) {  // depthwise: direct
      tbb::parallel_for(int64_t{0}, p.n * p.c_out, [&](int64_t nc) {
        const int64_t c = nc % p.c_out;
        DepthwisePlane(p, xp + nc * hw_in, wp + c * kk, yp + nc * hw);
      });
    } else {
      const bool direct = p.kh == 1 && p.kw == 1 && p.stride_h == 1 && p.stride_w == 1 &&
                          p.pad_t == 0 && p.pad_l == 0 && p.pad_b == 0 && p.pad_r == 0;
      std::vector<float> col(direct ? 0 : static_cast<size_t>(K * hw));
      for (int64_t n = 0; n < p.n; ++n)
        for (int64_t g = 0; g < p.groups; ++g) {
          const float* xg = xp + (n * p.c_in + g * cin_g) * hw_in;
          const float* cp = xg;
          if (!direct) {
            tbb::parallel_for(int64_t{0}, K, [&](int64_t k) {
              int64_t ci = k / kk, ky = (k % kk) / p.kw, kx = k % p.kw;
              float* row = col.data() + k * hw;
              const float* xc = xg + ci * hw_in;
              for (int64_t oy = 0; oy < p.h_out; ++oy) {
                int64_t iy = oy * p.stride_h - p.pad_t + ky * p.dil_h;
                float* r = row + oy * p.w_out;
                if (iy < 0 || iy >= p.h_in) {
                  std::fill(r, r + p.w_out, 0.0f);
                  continue;
                }
                for (int64_t ox = 0; ox < p.w_out; ++ox) {
                  int64_t ix = ox * p.stride_w - p.pad_l + kx * p.dil_w;
                  r[ox] = (ix < 0 || ix >= p.w_in) ? 0.0f : xc[iy * p.w_in + ix];
                }
              }
            });
            cp = col.data();
          }
          GemmRows(wp + g * cout_g * K, cp, cout_g, K, hw, yp + (n * p.c_out + g * cout_g) * hw);
        }
    }
    // Epilogue: bias, residual, activation.
    tbb::parallel_for(int64_t{0}, p.n * p.c_out, [&](int64_t nc) {
      const int64_t c = nc % p.c_out;
      Epilogue(p, bias ? B[c] : 0.0f, residual ? R.get() + nc * hw : nullptr, yp + nc * hw, hw);
    });
    Y.Commit();
    return Status::OK();
  }

  Status ConvTranspose2d(const ConvTranspose2dParams& p, const void* x, const void* w,
                         const void* bias, void* y, void* /*scratch*/) override {
    const int64_t cin_g = p.c_in / p.groups, cout_g = p.c_out / p.groups;
    const int64_t hw_in = p.h_in * p.w_in, hw = p.h_out * p.w_out;
    In X(x, p.n * p.c_in * hw_in, st_), W(w, p.c_in * cout_g * p.kh * p.kw, st_), B(bias, p.c_out, st_);
    Out Y(y, p.n * p.c_out * hw, st_);
    float* yp = Y.get();
    // Gather form: each output pixel sums the input taps that scatter onto it.
    tbb::parallel_for(int64_t{0}, p.n * p.c_out, [&](int64_t nc) {
      int64_t n = nc / p.c_out, co = nc % p.c_out, g = co / cout_g, col = co % cout_g;
      float* yc = yp + nc * hw;
      float b = bias ? B[co] : 0.0f;
      for (int64_t oy = 0; oy < p.h_out; ++oy)
        for (int64_t ox = 0; ox < p.w_out; ++ox) {
          float acc = b;
          for (int ky = 0; ky < p.kh; ++ky) {
            int64_t ty = oy + p.pad_t - ky * p.dil_h;
            if (ty < 0 || ty % p.stride_h) continue;
            int64_t iy = ty / p.stride_h;
            if (iy >= p.h_in) continue;
            for (int kx = 0; kx < p.kw; ++kx) {
              int64_t tx = ox + p.pad_l - kx * p.dil_w;
              if (tx < 0 || tx % p.stride_w) continue;
              int64_t ix = tx / p.stride_w;
              if (ix >= p.w_in) continue;
              for (int64_t ci = 0; ci < cin_g; ++ci) {
                int64_t cig = g * cin_g + ci;
                acc += X[(n * p.c_in + cig) * hw_in + iy * p.w_in + ix] *
                       W[((cig * cout_g + col) * p.kh + ky) * p.kw + kx];
              }
            }
          }
          yc[oy * p.w_out + ox] = Act(p.act, acc);
        }
    });
    Y.Commit();
    return Status::OK();
  }

  Status Pool2d(const Pool2dParams& p, const void* x, void* y) override {
    const int64_t hw_in = p.h_in * p.w_in, hw = p.h_out * p.w_out;
    In X(x, p.n * p.c * hw_in, st_);
    Out Y(y, p.n * p.c * hw, st_);
    tbb::parallel_for(int64_t{0}, p.n * p.c, [&](int64_t nc) {
      const float* xc = X.get() + nc * hw_in;
      float* yc = Y.get() + nc * hw;
      for (int64_t oy = 0; oy < p.h_out; ++oy)
        for (int64_t ox = 0; ox < p.w_out; ++ox) {
          float m = -INFINITY, s = 0;
          int64_t cnt = 0;
          for (int ky = 0; ky < p.kh; ++ky) {
            int64_t iy = oy * p.stride_h - p.pad_t + ky * p.dil_h;
            if (iy < 0 || iy >= p.h_in) continue;
            for (int kx = 0; kx < p.kw; ++kx) {
              int64_t ix = ox * p.stride_w - p.pad_l + kx * p.dil_w;
              if (ix < 0 || ix >= p.w_in) continue;
              float v = xc[iy * p.w_in + ix];
              m = std::max(m, v);
              s += v;
              ++cnt;
            }
          }
          float out;
          if (p.kind == PoolKind::kMax) {
            out = m;
          } else if (p.count_include_pad) {
            // ONNX counts pad taps but not taps past the padded border (ceil_mode).
            int64_t y0 = oy * p.stride_h - p.pad_t, x0 = ox * p.stride_w - p.pad_l;
            int64_t y1 = std::min<int64_t>(y0 + (p.kh - 1) * int64_t{p.dil_h} + 1, p.h_in + p.pad_b);
            int64_t x1 = std::min<int64_t>(x0 + (p.kw - 1) * int64_t{p.dil_w} + 1, p.w_in + p.pad_r);
            int64_t ny = (y1 - y0 + p.dil_h - 1) / p.dil_h, nx = (x1 - x0 + p.dil_w - 1) / p.dil_w;
            out = s / static_cast<float>(std::max<int64_t>(1, ny * nx));
          } else {
            out = cnt ? s / static_cast<float>(cnt) : 0.0f;
          }
          yc[oy * p.w_out + ox] = out;
        }
    });
    Y.Commit();
    return Status::OK();
  }

  Status Binary(const BinaryParams& p, const void* a, const void* b, void* out) override {
    int64_t total = 1;
    for (int d = 0; d < p.rank; ++d) total *= p.dims[d];
    int64_t na = 1, nb = 1;  // extents read: the last element index + 1
    for (int d = 0; d < p.rank; ++d) {
      na += (p.dims[d] - 1) * p.a_strides[d];
      nb += (p.dims[d] - 1) * p.b_strides[d];
    }
    In A(a, na, st_), Bv(b, nb, st_);
    Out Y(out, total, st_);
    const int r = p.rank;
    const int64_t inner = p.dims[r - 1], sa = p.a_strides[r - 1], sb = p.b_strides[r - 1];
    const int64_t rows = total / std::max<int64_t>(inner, 1);
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, 64), [&](const auto& range) {
      for (int64_t row = range.begin(); row < range.end(); ++row) {
        int64_t rem = row, oa = 0, ob = 0;
        for (int d = r - 2; d >= 0; --d) {
          int64_t i = rem % p.dims[d];
          rem /= p.dims[d];
          oa += i * p.a_strides[d];
          ob += i * p.b_strides[d];
        }
        float* yr = Y.get() + row * inner;
        const float* ap = A.get() + oa;
        const float* bp = Bv.get() + ob;
        for (int64_t j = 0; j < inner; ++j) {
          float u = ap[j * sa], v = bp[j * sb], z;
          switch (p.op) {
            case BinaryOp::kAdd: z = u + v; break;
            case BinaryOp::kSub: z = u - v; break;
            case BinaryOp::kMul: z = u * v; break;
            case BinaryOp::kDiv: z = u / v; break;
            case BinaryOp::kMax: z = std::max(u, v); break;
            case BinaryOp::kMin: z = std::min(u, v); break;
            case BinaryOp::kPow: z = std::pow(u, v); break;
            case BinaryOp::kPRelu: z = std::max(u, 0.0f) + v * std::min(u, 0.0f); break;
            default: z = 0;
          }
          yr[j] = Act(p.act, z);
        }
      }
    });
    Y.Commit();
    return Status::OK();
  }

  Status Unary(const UnaryParams& p, const void* x, void* y) override {
    In X(x, p.count, st_);
    Out Y(y, p.count, st_);
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, p.count, 4096), [&](const auto& r) {
      for (int64_t k = r.begin(); k < r.end(); ++k) {
        float v = X[k], z;
        switch (p.op) {
          case UnaryOp::kIdentity: z = v; break;
          case UnaryOp::kRelu: z = v > 0 ? v : 0.0f; break;
          case UnaryOp::kClip: z = std::min(std::max(v, p.lo), p.hi); break;
          case UnaryOp::kSigmoid: z = 1.0f / (1.0f + std::exp(-v)); break;
          case UnaryOp::kLeakyRelu: z = v >= 0 ? v : p.alpha * v; break;
          case UnaryOp::kTanh: z = std::tanh(v); break;
          case UnaryOp::kAbs: z = std::fabs(v); break;
          case UnaryOp::kNeg: z = -v; break;
          case UnaryOp::kSqrt: z = std::sqrt(v); break;
          case UnaryOp::kRsqrt: z = 1.0f / std::sqrt(v); break;
          case UnaryOp::kExp: z = std::exp(v); break;
          case UnaryOp::kLog: z = std::log(v); break;
          case UnaryOp::kSquare: z = v * v; break;
          case UnaryOp::kReciprocal: z = 1.0f / v; break;
          case UnaryOp::kFloor: z = std::floor(v); break;
          case UnaryOp::kCeil: z = std::ceil(v); break;
          case UnaryOp::kPowScalar: z = std::pow(v, p.alpha); break;
          case UnaryOp::kAffine: z = v * p.alpha + p.beta; break;
          case UnaryOp::kHardSigmoid: z = std::max(0.0f, std::min(1.0f, p.alpha * v + p.beta)); break;
          case UnaryOp::kHardSwish: z = v * std::max(0.0f, std::min(1.0f, v / 6.0f + 0.5f)); break;
          case UnaryOp::kErf: z = std::erf(v); break;
          default: z = v;
        }
        Y[k] = z;
      }
    });
    Y.Commit();
    return Status::OK();
  }

  Status Resize(const ResizeParams& p, const void* x, void* y) override {
    const int64_t hw_in = p.h_in * p.w_in, hw = p.h_out * p.w_out;
    In X(x, p.planes * hw_in, st_);
    Out Y(y, p.planes * hw, st_);
    // Per-axis taps, shared by every plane.
    const auto ty = ResizeTaps(p, p.h_in, p.h_out, p.scale_h), tx = ResizeTaps(p, p.w_in, p.w_out, p.scale_w);
    tbb::parallel_for(int64_t{0}, p.planes, [&](int64_t pl) {
      const float* xc = X.get() + pl * hw_in;
      float* yc = Y.get() + pl * hw;
      for (int64_t oy = 0; oy < p.h_out; ++oy) {
        const ResizeTap& a = ty[oy];
        const float* r0 = xc + a.i0 * p.w_in;
        const float* r1 = xc + a.i1 * p.w_in;
        for (int64_t ox = 0; ox < p.w_out; ++ox) {
          const ResizeTap& b = tx[ox];
          float top = r0[b.i0] + (r0[b.i1] - r0[b.i0]) * b.f;
          float bot = r1[b.i0] + (r1[b.i1] - r1[b.i0]) * b.f;
          yc[oy * p.w_out + ox] = top + (bot - top) * a.f;
        }
      }
    });
    Y.Commit();
    return Status::OK();
  }

  // Data movement works on stored elements directly (no rounding involved).
  size_t Es() const { return StorageBytes(st_); }

  Status Pad(const PadParams& p, const void* x, void* y) override {
    const int r = p.rank;
    int64_t od[kMaxRank], is[kMaxRank], total = 1;
    for (int d = r - 1, s = 1; d >= 0; --d) {
      od[d] = p.in_dims[d] + p.before[d] + p.after[d];
      is[d] = s;
      s *= static_cast<int>(p.in_dims[d]);
    }
    for (int d = 0; d < r; ++d) total *= od[d];
    const size_t es = Es();
    uint16_t hv = FloatToHalf(p.value);
    const auto* xs = static_cast<const uint8_t*>(x);
    auto* ys = static_cast<uint8_t*>(y);
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, total, 4096), [&](const auto& range) {
      for (int64_t k = range.begin(); k < range.end(); ++k) {
        int64_t rem = k, src = 0;
        bool inside = true;
        for (int d = r - 1; d >= 0; --d) {
          int64_t i = rem % od[d] - p.before[d];
          rem /= od[d];
          int64_t n = p.in_dims[d];
          if (i < 0 || i >= n) {
            if (p.mode == PadMode::kConstant) { inside = false; break; }
            if (p.mode == PadMode::kEdge) i = std::clamp<int64_t>(i, 0, n - 1);
            else {
              if (n == 1) i = 0;
              else {
                int64_t period = 2 * (n - 1);
                i = ((i % period) + period) % period;
                if (i >= n) i = period - i;
              }
            }
          }
          src += i * is[d];
        }
        if (inside) std::memcpy(ys + k * es, xs + src * es, es);
        else if (es == 4) std::memcpy(ys + k * 4, &p.value, 4);
        else std::memcpy(ys + k * 2, &hv, 2);
      }
    });
    return Status::OK();
  }

  Status Concat(const ConcatParams& p, const void* const* inputs, void* y) override {
    const size_t es = Es();
    int64_t total_axis = 0;
    for (int k = 0; k < p.count; ++k) total_axis += p.axis_sizes[k];
    auto* ys = static_cast<uint8_t*>(y);
    tbb::parallel_for(int64_t{0}, p.outer, [&](int64_t o) {
      int64_t off = 0;
      for (int k = 0; k < p.count; ++k) {
        int64_t chunk = p.axis_sizes[k] * p.inner;
        std::memcpy(ys + (o * total_axis * p.inner + off) * es,
                    static_cast<const uint8_t*>(inputs[k]) + o * chunk * es, chunk * es);
        off += chunk;
      }
    });
    return Status::OK();
  }

  Status Transpose(const TransposeParams& p, const void* x, void* y) override {
    const int r = p.rank;
    int64_t is[kMaxRank], od[kMaxRank], total = 1;
    for (int d = r - 1, s = 1; d >= 0; --d) { is[d] = s; s *= static_cast<int>(p.in_dims[d]); }
    for (int d = 0; d < r; ++d) { od[d] = p.in_dims[p.perm[d]]; total *= od[d]; }
    const size_t es = Es();
    const auto* xs = static_cast<const uint8_t*>(x);
    auto* ys = static_cast<uint8_t*>(y);
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, total, 4096), [&](const auto& range) {
      for (int64_t k = range.begin(); k < range.end(); ++k) {
        int64_t rem = k, src = 0;
        for (int d = r - 1; d >= 0; --d) {
          src += (rem % od[d]) * is[p.perm[d]];
          rem /= od[d];
        }
        std::memcpy(ys + k * es, xs + src * es, es);
      }
    });
    return Status::OK();
  }

  Status Slice(const SliceParams& p, const void* x, void* y) override {
    const int r = p.rank;
    int64_t is[kMaxRank], total = 1;
    for (int d = r - 1, s = 1; d >= 0; --d) { is[d] = s; s *= static_cast<int>(p.in_dims[d]); }
    for (int d = 0; d < r; ++d) total *= p.out_dims[d];
    const size_t es = Es();
    const auto* xs = static_cast<const uint8_t*>(x);
    auto* ys = static_cast<uint8_t*>(y);
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, total, 4096), [&](const auto& range) {
      for (int64_t k = range.begin(); k < range.end(); ++k) {
        int64_t rem = k, src = 0;
        for (int d = r - 1; d >= 0; --d) {
          src += (p.starts[d] + (rem % p.out_dims[d]) * p.steps[d]) * is[d];
          rem /= p.out_dims[d];
        }
        std::memcpy(ys + k * es, xs + src * es, es);
      }
    });
    return Status::OK();
  }

  Status Reduce(const ReduceParams& p, const void* x, void* y) override {
    In X(x, p.outer * p.reduce * p.inner, st_);
    Out Y(y, p.outer * p.inner, st_);
    tbb::parallel_for(int64_t{0}, p.outer, [&](int64_t o) {
      for (int64_t i = 0; i < p.inner; ++i) {
        const float* base = X.get() + o * p.reduce * p.inner + i;
        double acc = (p.op == ReduceOp::kMax) ? -INFINITY : (p.op == ReduceOp::kMin) ? INFINITY : 0.0;
        for (int64_t k = 0; k < p.reduce; ++k) {
          float v = base[k * p.inner];
          switch (p.op) {
            case ReduceOp::kMax: acc = std::max<double>(acc, v); break;
            case ReduceOp::kMin: acc = std::min<double>(acc, v); break;
            case ReduceOp::kSumSquare: case ReduceOp::kL2: acc += double{v} * v; break;
            default: acc += v;
          }
        }
        if (p.op == ReduceOp::kMean) acc /= static_cast<double>(p.reduce);
        if (p.op == ReduceOp::kL2) acc = std::sqrt(acc);
        Y[o * p.inner + i] = static_cast<float>(acc);
      }
    });
    Y.Commit();
    return Status::OK();
  }

  Status Softmax(const SoftmaxParams& p, const void* x, void* y) override {
    In X(x, p.outer * p.axis * p.inner, st_);
    Out Y(y, p.outer * p.axis * p.inner, st_);
    tbb::parallel_for(int64_t{0}, p.outer, [&](int64_t o) {
      for (int64_t i = 0; i < p.inner; ++i) {
        const float* xb = X.get() + o * p.axis * p.inner + i;
        float* yb = Y.get() + o * p.axis * p.inner + i;
        float m = -INFINITY;
        for (int64_t k = 0; k < p.axis; ++k) m = std::max(m, xb[k * p.inner]);
        float s = 0;
        for (int64_t k = 0; k < p.axis; ++k) s += std::exp(xb[k * p.inner] - m);
        for (int64_t k = 0; k < p.axis; ++k) {
          float v = xb[k * p.inner] - m;
          yb[k * p.inner] = p.log ? v - std::log(s) : std::exp(v) / s;
        }
      }
    });
    Y.Commit();
    return Status::OK();
  }

  Status MatMul(const MatMulParams& p, const void* a, const void* b, const void* c, void* y,
                void* /*scratch*/) override {
    int64_t na = (p.batch - 1) * p.a_batch_stride + p.m * p.k;
    int64_t nb = (p.batch - 1) * p.b_batch_stride + p.k * p.n;
    int64_t nc = c ? (p.m - 1) * p.c_stride_m + (p.n - 1) * p.c_stride_n + 1 : 0;
    In A(a, na, st_), Bm(b, nb, st_), C(c, nc, st_);
    Out Y(y, p.batch * p.m * p.n, st_);
    tbb::parallel_for(int64_t{0}, p.batch * p.m, [&](int64_t bm) {
      int64_t bi = bm / p.m, m = bm % p.m;
      const float* ab = A.get() + bi * p.a_batch_stride;
      const float* bb = Bm.get() + bi * p.b_batch_stride;
      std::vector<float> acc(static_cast<size_t>(p.n), 0.0f);
      for (int64_t k = 0; k < p.k; ++k) {
        float av = p.trans_a ? ab[k * p.m + m] : ab[m * p.k + k];
        if (av == 0) continue;
        if (p.trans_b) {
          for (int64_t j = 0; j < p.n; ++j) acc[j] += av * bb[j * p.k + k];
        } else {
          const float* br = bb + k * p.n;
          for (int64_t j = 0; j < p.n; ++j) acc[j] += av * br[j];
        }
      }
      float* yr = Y.get() + bm * p.n;
      for (int64_t j = 0; j < p.n; ++j) {
        float v = p.alpha * acc[j];
        if (c) v += p.beta * C[m * p.c_stride_m + j * p.c_stride_n];
        yr[j] = Act(p.act, v);
      }
    });
    Y.Commit();
    return Status::OK();
  }

  Status ArgMax(const ArgMaxParams& p, const void* x, void* y) override {
    In X(x, p.outer * p.axis * p.inner, st_);
    Out Y(y, p.outer * p.inner, st_);
    for (int64_t o = 0; o < p.outer; ++o)
      for (int64_t i = 0; i < p.inner; ++i) {
        const float* xb = X.get() + o * p.axis * p.inner + i;
        int64_t best = 0;
        for (int64_t k = 1; k < p.axis; ++k)
          if (xb[k * p.inner] > xb[best * p.inner]) best = k;
        Y[o * p.inner + i] = static_cast<float>(best);
      }
    Y.Commit();
    return Status::OK();
  }

  Status Copy(const void* src, void* dst, int64_t elements) override {
    std::memmove(dst, src, static_cast<size_t>(elements) * Es());
    return Status::OK();
  }

 private:
  StorageType st_ = StorageType::kFloat32;
  int64_t limit_ = 0, used_ = 0;
  std::map<void*, int64_t> live_;
};

}  // namespace

std::unique_ptr<Kernels> MakeCpuKernels(int64_t memory_limit) {
  return std::make_unique<CpuKernels>(memory_limit);
}

}  // namespace framemill::engine
