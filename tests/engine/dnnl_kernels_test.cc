// The oneDNN CPU kernels (engine/dnnl/dnnl_kernels.h) against the reference kernels
// (engine/reference/cpu_kernels.h), op by op on seeded random shapes (odd channel counts, groups,
// strides, padding, batches above 1), then chains that keep tensors channels-last between
// oneDNN's ops (conv -> pool -> slice -> concat -> conv, a Reshape-like reread, a download
// mid-chain), then whole models through the Engine.
// Error: |dnnl - ref| / max(|ref|, mean |ref|) <= 1e-4 in fp32 (only the order of the sums
// differs); in bf16 (where the CPU has it) <= 3e-2 per element (8 bits of mantissa on
// every product's inputs).
// The seed is printed; FRAMEMILL_TEST_SEED replays it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/reference/cpu_kernels.h"
#include "engine/dnnl/dnnl_kernels.h"
#include "engine/engine.h"
#include "engine/kernels.h"
#include "tests/engine/model_outputs.h"

namespace framemill::engine {
namespace {

using Floats = std::vector<float>;

uint32_t SeedFor(const char* test) {
  uint32_t seed = std::random_device{}();
  if (const char* s = std::getenv("FRAMEMILL_TEST_SEED")) seed = static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
  std::printf("[seed] DnnlKernelsTest.%s: FRAMEMILL_TEST_SEED=%u\n", test, seed);
  std::fflush(stdout);
  return seed;
}

Floats Random(std::mt19937& rng, size_t n, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  Floats v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// A kernels object's buffers, freed with it.
class Mem {
 public:
  explicit Mem(Kernels& k) : k_(k) {}
  ~Mem() {
    for (void* p : live_) k_.Free(p);
  }
  void* Put(const Floats& v) {
    void* p = New(v.size());
    EXPECT_TRUE(k_.Upload(p, v.data(), v.size() * 4).ok());
    return p;
  }
  void* New(size_t elements) {
    void* p = nullptr;
    EXPECT_TRUE(k_.Alloc(std::max<size_t>(elements, 1) * 4, &p).ok());
    live_.push_back(p);
    return p;
  }
  Floats Get(const void* p, size_t elements) {
    Floats v(elements);
    EXPECT_TRUE(k_.Download(v.data(), p, elements * 4).ok());
    return v;
  }

 private:
  Kernels& k_;
  std::vector<void*> live_;
};

double WorstError(const Floats& got, const Floats& want) {
  double mean = 0;
  for (float w : want) mean += std::fabs(w);
  mean = want.empty() ? 0 : mean / want.size();
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = std::fabs(double{got[i]} - want[i]) / std::max({std::fabs(double{want[i]}), mean, 1e-30});
    worst = std::max(worst, std::isnan(e) ? INFINITY : e);
  }
  return worst;
}

// One program of kernel calls, run on both implementations from the same inputs.
using Program = std::function<Floats(Kernels& k, Mem& m, const std::vector<void*>& in)>;

class DnnlKernelsTest : public ::testing::Test {
 public:
  // Compare, for the helpers outside the fixture.
  void CompareFor(const std::string& what, const std::vector<Floats>& inputs, const Program& prog, double tol = 1e-4,
                  bool bf16 = false) {
    Compare(what, inputs, prog, tol, bf16);
  }

 protected:
  void Compare(const std::string& what, const std::vector<Floats>& inputs, const Program& prog, double tol = 1e-4,
               bool bf16 = false) {
    auto ref = MakeCpuKernels();
    auto dnnl = MakeDnnlKernels({.bf16 = bf16});
    ASSERT_TRUE(ref->Prepare(StorageType::kFloat32).ok());
    ASSERT_TRUE(dnnl->Prepare(StorageType::kFloat32).ok());
    Floats want, got;
    {
      Mem m(*ref);
      std::vector<void*> in;
      for (const Floats& v : inputs) in.push_back(v.empty() ? nullptr : m.Put(v));
      want = prog(*ref, m, in);
    }
    {
      Mem m(*dnnl);
      std::vector<void*> in;
      for (const Floats& v : inputs) in.push_back(v.empty() ? nullptr : m.Put(v));
      got = prog(*dnnl, m, in);
    }
    ASSERT_EQ(got.size(), want.size()) << what;
    const double e = WorstError(got, want);
    EXPECT_LE(e, tol) << what;
    std::printf("  %-70s worst scaled error %.2e\n", what.c_str(), e);
  }
};

Conv2dParams RandomConv(std::mt19937& rng, std::string* what) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Conv2dParams p;
  const int kind = pick(0, 3);  // 0 dense, 1 depthwise, 2 grouped, 3 pointwise
  p.n = pick(1, 3);
  p.groups = kind == 1 ? pick(3, 21) : kind == 2 ? pick(2, 3) : 1;
  p.c_in = kind == 1 ? p.groups : p.groups * pick(1, 13);
  p.c_out = kind == 1 ? p.groups * pick(1, 2) : p.groups * pick(1, 19);
  p.kh = p.kw = kind == 3 ? 1 : std::array<int, 3>{3, 5, 2}[pick(0, 2)];
  p.stride_h = p.stride_w = pick(1, 2);
  p.dil_h = p.dil_w = kind == 0 && pick(0, 3) == 0 ? 2 : 1;
  p.pad_t = pick(0, p.kh / 2 + 1);
  p.pad_l = pick(0, p.kw / 2);
  p.pad_b = pick(0, p.kh / 2);
  p.pad_r = pick(0, p.kw / 2 + 1);
  p.h_in = pick(p.kh * p.dil_h, 23);
  p.w_in = pick(p.kw * p.dil_w, 27);
  p.h_out = (p.h_in + p.pad_t + p.pad_b - (p.kh - 1) * p.dil_h - 1) / p.stride_h + 1;
  p.w_out = (p.w_in + p.pad_l + p.pad_r - (p.kw - 1) * p.dil_w - 1) / p.stride_w + 1;
  p.act.kind = static_cast<Activation>(pick(0, 6));
  p.act.alpha = 0.1f;
  p.act.lo = -0.25f;
  p.act.hi = 0.5f;
  p.residual_after_act = pick(0, 1);
  char buf[200];
  std::snprintf(buf, sizeof buf, "Conv2d n%lld %lldx%lldx%lld -> %lld k%d s%d d%d g%d pad %d%d%d%d act%d",
                (long long)p.n, (long long)p.c_in, (long long)p.h_in, (long long)p.w_in, (long long)p.c_out,
                p.kh, p.stride_h, p.dil_h, p.groups, p.pad_t, p.pad_l, p.pad_b, p.pad_r, static_cast<int>(p.act.kind));
  *what = buf;
  return p;
}

int64_t InElems(const Conv2dParams& p) { return p.n * p.c_in * p.h_in * p.w_in; }
int64_t OutElems(const Conv2dParams& p) { return p.n * p.c_out * p.h_out * p.w_out; }
int64_t WeightElems(const Conv2dParams& p) { return p.c_out * (p.c_in / p.groups) * p.kh * p.kw; }

TEST_F(DnnlKernelsTest, Conv2dOnRandomShapes) {
  std::mt19937 rng(SeedFor("Conv2dOnRandomShapes"));
  for (int t = 0; t < 40; ++t) {
    std::string what;
    const Conv2dParams p = RandomConv(rng, &what);
    const int with = std::uniform_int_distribution<int>(0, 3)(rng);  // bit 0 bias, bit 1 residual
    std::vector<Floats> in = {Random(rng, InElems(p)), Random(rng, WeightElems(p), -0.5f, 0.5f),
                              with & 1 ? Random(rng, p.c_out) : Floats{}, with & 2 ? Random(rng, OutElems(p)) : Floats{}};
    what += (with & 1 ? " bias" : "") + std::string(with & 2 ? (p.residual_after_act ? " +res after" : " +res") : "");
    std::printf("  case %s\n", what.c_str());
    std::fflush(stdout);
    Compare(what, in, [&](Kernels& k, Mem& m, const std::vector<void*>& v) {
      void* y = m.New(OutElems(p));
      EXPECT_TRUE(k.Conv2d(p, v[0], v[1], v[2], v[3], y, nullptr).ok());
      return m.Get(y, OutElems(p));
    });
  }
}

TEST_F(DnnlKernelsTest, Conv2dInBf16WhereTheCpuHasIt) {
  if (!CpuHasBf16()) GTEST_SKIP() << "this CPU has neither AVX512-BF16 nor AMX";
  std::mt19937 rng(SeedFor("Conv2dInBf16WhereTheCpuHasIt"));
  for (int t = 0; t < 10; ++t) {
    std::string what;
    Conv2dParams p = RandomConv(rng, &what);
    p.act.kind = Activation::kNone;
    std::vector<Floats> in = {Random(rng, InElems(p)), Random(rng, WeightElems(p), -0.5f, 0.5f), Random(rng, p.c_out)};
    Compare(what + " bf16", in, [&](Kernels& k, Mem& m, const std::vector<void*>& v) {
      void* y = m.New(OutElems(p));
      EXPECT_TRUE(k.Conv2d(p, v[0], v[1], v[2], nullptr, y, nullptr).ok());
      return m.Get(y, OutElems(p));
    }, 3e-2, true);
  }
}

TEST_F(DnnlKernelsTest, PoolOnChannelsLastAndPlainInput) {
  std::mt19937 rng(SeedFor("PoolOnChannelsLastAndPlainInput"));
  for (int t = 0; t < 16; ++t) {
    Pool2dParams p;
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    p.kind = pick(0, 1) ? PoolKind::kMax : PoolKind::kAvg;
    p.count_include_pad = pick(0, 1);
    p.n = pick(1, 2);
    p.c = pick(1, 37);
    p.kh = p.kw = pick(2, 5);
    p.stride_h = p.stride_w = pick(1, 2);
    p.pad_t = p.pad_l = p.pad_b = p.pad_r = pick(0, p.kh / 2);
    p.h_in = pick(p.kh, 19);
    p.w_in = pick(p.kw, 17);
    const bool ceil = pick(0, 1);
    for (int d = 0; d < 2; ++d) {
      const int64_t in = d ? p.w_in : p.h_in, span = in + 2 * p.pad_t - p.kh;
      int64_t out = (ceil ? (span + p.stride_h - 1) / p.stride_h : span / p.stride_h) + 1;
      if (ceil && (out - 1) * p.stride_h >= in + p.pad_t) --out;
      (d ? p.w_out : p.h_out) = out;
    }
    const bool after_conv = pick(0, 1);  // channels-last input from a 1x1 convolution
    char buf[160];
    std::snprintf(buf, sizeof buf, "Pool2d %s%s n%lld c%lld %lldx%lld k%d s%d p%d ceil%d after-conv%d",
                  p.kind == PoolKind::kMax ? "max" : "avg", p.count_include_pad ? "+pad" : "", (long long)p.n,
                  (long long)p.c, (long long)p.h_in, (long long)p.w_in, p.kh, p.stride_h, p.pad_t, ceil, after_conv);
    Conv2dParams c;
    c.n = p.n; c.c_in = p.c; c.c_out = p.c; c.h_in = c.h_out = p.h_in; c.w_in = c.w_out = p.w_in;
    const int64_t in_n = p.n * p.c * p.h_in * p.w_in, out_n = p.n * p.c * p.h_out * p.w_out;
    Compare(buf, {Random(rng, in_n), Random(rng, p.c * p.c)}, [&](Kernels& k, Mem& m, const std::vector<void*>& v) {
      const void* x = v[0];
      if (after_conv) {
        void* t = m.New(in_n);
        EXPECT_TRUE(k.Conv2d(c, v[0], v[1], nullptr, nullptr, t, nullptr).ok());
        x = t;
      }
      void* y = m.New(out_n);
      EXPECT_TRUE(k.Pool2d(p, x, y).ok());
      return m.Get(y, out_n);
    });
  }
}

// A 1x1 convolution of `c` channels to `c` (to make a channels-last tensor in the dnnl kernels).
Conv2dParams Pointwise(int64_t n, int64_t c_in, int64_t c_out, int64_t h, int64_t w) {
  Conv2dParams p;
  p.n = n; p.c_in = c_in; p.c_out = c_out; p.h_in = p.h_out = h; p.w_in = p.w_out = w;
  return p;
}

// A convolution into 1 to 3 channels of a channels-last input (our own loop: oneDNN pads the
// output channels to 16): after a first convolution leaves its output channels-last, on
// seeded shapes with strides, pads, dilations, a bias and an activation.
TEST_F(DnnlKernelsTest, ConvIntoFewChannelsOfAChannelsLastInput) {
  std::mt19937 rng(SeedFor("ConvIntoFewChannelsOfAChannelsLastInput"));
  for (int t = 0; t < 12; ++t) {
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const int64_t n = pick(1, 2), c = pick(16, 70), h = pick(5, 19), w = pick(5, 23);
    const Conv2dParams first = Pointwise(n, 3, c, h, w);
    Conv2dParams p = Pointwise(n, c, pick(1, 3), h, w);
    p.kh = p.kw = std::array<int, 3>{1, 3, 5}[pick(0, 2)];
    p.stride_h = p.stride_w = pick(1, 2);
    p.dil_h = p.dil_w = p.kh > 1 && pick(0, 2) == 0 ? 2 : 1;
    p.pad_t = pick(0, p.kh / 2); p.pad_l = pick(0, p.kw / 2); p.pad_b = pick(0, p.kh / 2); p.pad_r = pick(0, p.kw / 2);
    p.h_out = (h + p.pad_t + p.pad_b - (p.kh - 1) * p.dil_h - 1) / p.stride_h + 1;
    p.w_out = (w + p.pad_l + p.pad_r - (p.kw - 1) * p.dil_w - 1) / p.stride_w + 1;
    if (p.h_out <= 0 || p.w_out <= 0) continue;
    p.act.kind = pick(0, 1) ? Activation::kSigmoid : Activation::kNone;
    const bool bias = pick(0, 1);
    const int64_t out = n * p.c_out * p.h_out * p.w_out;
    char buf[160];
    std::snprintf(buf, sizeof buf, "n%lld %lld ch %lldx%lld -> %lld ch k%d s%d d%d pads %d%d%d%d%s%s", (long long)n,
                  (long long)c, (long long)h, (long long)w, (long long)p.c_out, p.kh, p.stride_h, p.dil_h, p.pad_t,
                  p.pad_l, p.pad_b, p.pad_r, bias ? " bias" : "", p.act.kind == Activation::kSigmoid ? " sigmoid" : "");
    Compare(buf, {Random(rng, n * 3 * h * w), Random(rng, c * 3), Random(rng, p.c_out * c * p.kh * p.kw, -0.3f, 0.3f),
                  bias ? Random(rng, p.c_out) : Floats{}},
            [&](Kernels& k, Mem& m, const std::vector<void*>& v) {
              void* a = m.New(n * c * h * w);
              EXPECT_TRUE(k.Conv2d(first, v[0], v[1], nullptr, nullptr, a, nullptr).ok());
              void* y = m.New(out);
              EXPECT_TRUE(k.Conv2d(p, a, v[2], v[3], nullptr, y, nullptr).ok());
              return m.Get(y, out);
            });
  }
}

TEST_F(DnnlKernelsTest, BinaryWithBroadcastsAndLayouts) {
  std::mt19937 rng(SeedFor("BinaryWithBroadcastsAndLayouts"));
  const int64_t n = 2, c = 13, h = 7, w = 9;
  const Conv2dParams conv = Pointwise(n, c, c, h, w);
  struct Case { const char* what; int64_t bd[4]; bool a_conv, b_conv; BinaryOp op; Activation act; };
  const Case cases[] = {
      {"same shape, both channels-last", {n, c, h, w}, true, true, BinaryOp::kAdd, Activation::kNone},
      {"same shape, mixed layouts", {n, c, h, w}, true, false, BinaryOp::kMul, Activation::kRelu},
      {"per-channel scale", {1, c, 1, 1}, true, false, BinaryOp::kMul, Activation::kNone},
      {"per-channel on plain", {1, c, 1, 1}, false, false, BinaryOp::kSub, Activation::kSigmoid},
      {"scalar divide", {1, 1, 1, 1}, true, false, BinaryOp::kDiv, Activation::kNone},
      {"row broadcast", {n, 1, h, w}, true, false, BinaryOp::kMax, Activation::kSwish},
      {"pow (reference)", {1, c, 1, 1}, false, false, BinaryOp::kPow, Activation::kNone},
  };
  for (const Case& k : cases) {
    BinaryParams p;
    p.op = k.op;
    p.act.kind = k.act;
    p.rank = 4;
    const int64_t full[4] = {n, c, h, w};
    int64_t as = 1, bs = 1;
    for (int d = 3; d >= 0; --d) {
      p.dims[d] = full[d];
      p.a_strides[d] = as; as *= full[d];
      p.b_strides[d] = k.bd[d] == 1 && full[d] != 1 ? 0 : bs; bs *= k.bd[d];
    }
    const int64_t count = n * c * h * w;
    Floats a = Random(rng, count, k.op == BinaryOp::kPow ? 0.1f : -1.f, 1.f);
    Floats b = Random(rng, bs, 0.5f, 1.5f);
    Compare(std::string("Binary ") + k.what, {a, b, Random(rng, c * c)}, [&](Kernels& kk, Mem& m, const std::vector<void*>& v) {
      const void* x = v[0];
      const void* y = v[1];
      if (k.a_conv) { void* t = m.New(count); EXPECT_TRUE(kk.Conv2d(conv, v[0], v[2], nullptr, nullptr, t, nullptr).ok()); x = t; }
      if (k.b_conv) { void* t = m.New(count); EXPECT_TRUE(kk.Conv2d(conv, v[0], v[2], nullptr, nullptr, t, nullptr).ok()); y = t; }
      void* out = m.New(count);
      EXPECT_TRUE(kk.Binary(p, x, y, out).ok());
      return m.Get(out, count);
    });
  }
}

TEST_F(DnnlKernelsTest, UnaryKeepsTheLayout) {
  std::mt19937 rng(SeedFor("UnaryKeepsTheLayout"));
  const int64_t n = 1, c = 11, h = 6, w = 5, count = n * c * h * w;
  for (UnaryOp op : {UnaryOp::kRelu, UnaryOp::kSigmoid, UnaryOp::kNeg, UnaryOp::kExp, UnaryOp::kAffine,
                     UnaryOp::kHardSwish, UnaryOp::kErf, UnaryOp::kClip}) {
    UnaryParams u;
    u.op = op;
    u.count = count;
    u.alpha = 0.5f;
    u.beta = 0.25f;
    u.lo = -0.3f;
    u.hi = 0.4f;
    Compare("Unary op " + std::to_string(static_cast<int>(op)) + " after a conv, then a conv",
            {Random(rng, count), Random(rng, c * c, -0.5f, 0.5f)}, [&](Kernels& k, Mem& m, const std::vector<void*>& v) {
              const Conv2dParams conv = Pointwise(n, c, c, h, w);
              void* t = m.New(count);
              EXPECT_TRUE(k.Conv2d(conv, v[0], v[1], nullptr, nullptr, t, nullptr).ok());
              EXPECT_TRUE(k.Unary(u, t, t).ok());  // in place
              void* y = m.New(count);
              EXPECT_TRUE(k.Conv2d(conv, t, v[1], nullptr, nullptr, y, nullptr).ok());
              return m.Get(y, count);
            });
  }
}

// YOLOv8's C2f block: conv, split in two along channels, a conv on the second half, concat of
// all three, conv; then a reread of the result as another shape (a Reshape) by a softmax.
TEST_F(DnnlKernelsTest, ChannelsLastChainsAgreeWithTheReference) {
  std::mt19937 rng(SeedFor("ChannelsLastChainsAgreeWithTheReference"));
  for (int t = 0; t < 6; ++t) {
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const int64_t n = pick(1, 2), c = 2 * pick(3, 12), h = pick(4, 13), w = pick(4, 11), half = c / 2;
    const Conv2dParams c1 = Pointwise(n, 3, c, h, w);
    Conv2dParams c2 = Pointwise(n, half, half, h, w);
    c2.kh = c2.kw = 3; c2.pad_t = c2.pad_l = c2.pad_b = c2.pad_r = 1; c2.act.kind = Activation::kSwish;
    const Conv2dParams c3 = Pointwise(n, c + half, 5, h, w);
    SliceParams s;
    s.rank = 4;
    const int64_t in_d[4] = {n, c, h, w};
    for (int d = 0; d < 4; ++d) { s.in_dims[d] = s.out_dims[d] = in_d[d]; s.steps[d] = 1; }
    s.out_dims[1] = half;
    SliceParams s0 = s, s1 = s;
    s1.starts[1] = half;
    const int64_t sizes[3] = {half, half, half};
    ConcatParams cat;
    cat.count = 3; cat.outer = n; cat.inner = h * w; cat.axis_sizes = sizes;
    SoftmaxParams sm;
    sm.outer = n * 5; sm.axis = h * w; sm.inner = 1;
    const int64_t out_n = n * 5 * h * w;
    char buf[120];
    std::snprintf(buf, sizeof buf, "C2f chain n%lld c%lld %lldx%lld, then softmax over h*w", (long long)n,
                  (long long)c, (long long)h, (long long)w);
    Compare(buf, {Random(rng, n * 3 * h * w), Random(rng, c * 3), Random(rng, half * half * 9, -0.3f, 0.3f),
                  Random(rng, 5 * (c + half), -0.3f, 0.3f), Random(rng, c)},
            [&](Kernels& k, Mem& m, const std::vector<void*>& v) {
              void* a = m.New(n * c * h * w);
              EXPECT_TRUE(k.Conv2d(c1, v[0], v[1], v[4], nullptr, a, nullptr).ok());
              void* lo = m.New(n * half * h * w);
              void* hi = m.New(n * half * h * w);
              EXPECT_TRUE(k.Slice(s0, a, lo).ok());
              EXPECT_TRUE(k.Slice(s1, a, hi).ok());
              void* b = m.New(n * half * h * w);
              EXPECT_TRUE(k.Conv2d(c2, hi, v[2], nullptr, nullptr, b, nullptr).ok());
              void* cc = m.New(n * (c + half) * h * w);
              const void* parts[3] = {lo, hi, b};
              EXPECT_TRUE(k.Concat(cat, parts, cc).ok());
              void* d = m.New(out_n);
              EXPECT_TRUE(k.Conv2d(c3, cc, v[3], nullptr, nullptr, d, nullptr).ok());
              void* e = m.New(out_n);
              EXPECT_TRUE(k.Softmax(sm, d, e).ok());
              Floats mid = m.Get(d, out_n);  // a download mid-chain reads the plain tensor too
              Floats out = m.Get(e, out_n);
              out.insert(out.end(), mid.begin(), mid.end());
              return out;
            });
  }
}

// Each op given its input both plain and channels-last (a 1x1 convolution's output on the
// oneDNN kernels): x (n x c x h x w) -> [conv] -> op -> the op's output.
void PlainAndChannelsLast(DnnlKernelsTest& t, std::mt19937& rng, const std::string& what, int64_t n, int64_t c,
                          int64_t h, int64_t w, int64_t out_elems,
                          const std::function<Status(Kernels&, const void*, void*, const void*, const void*)>& op,
                          const Floats& weights = {}, const Floats& bias = {}, double tol = 1e-4, bool bf16 = false);

TEST_F(DnnlKernelsTest, ConvTransposeOnRandomShapes) {
  std::mt19937 rng(SeedFor("ConvTransposeOnRandomShapes"));
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int t = 0; t < 16; ++t) {
    ConvTranspose2dParams p;
    const int kind = t % 4;  // 0 kernel = stride into few channels (blockwise), 1 general, 2 grouped, 3 output padding
    p.n = pick(1, 2);
    p.groups = kind == 2 ? pick(2, 3) : 1;
    p.c_in = p.groups * pick(1, 9);
    p.c_out = p.groups * (kind == 0 ? pick(1, 5) : pick(1, 11));
    p.kh = p.kw = kind == 0 ? pick(2, 3) : std::array<int, 3>{2, 3, 4}[pick(0, 2)];
    p.stride_h = p.stride_w = kind == 0 ? p.kh : pick(1, 2);
    if (kind != 0) { p.pad_t = p.pad_b = pick(0, p.kh / 2); p.pad_l = p.pad_r = pick(0, p.kw / 2); }
    const int out_pad = kind == 3 && p.stride_h > 1 ? 1 : 0;
    p.h_in = pick(2, 11); p.w_in = pick(2, 13);
    p.h_out = (p.h_in - 1) * p.stride_h + p.kh - p.pad_t - p.pad_b + out_pad;
    p.w_out = (p.w_in - 1) * p.stride_w + p.kw - p.pad_l - p.pad_r + out_pad;
    p.act.kind = static_cast<Activation>(pick(0, 6));
    p.act.alpha = 0.1f; p.act.lo = -0.25f; p.act.hi = 0.5f;
    char buf[160];
    std::snprintf(buf, sizeof buf, "ConvTranspose n%lld %lldx%lldx%lld -> %lld k%d s%d g%d pad %d%d outpad %d act%d",
                  (long long)p.n, (long long)p.c_in, (long long)p.h_in, (long long)p.w_in, (long long)p.c_out, p.kh,
                  p.stride_h, p.groups, p.pad_t, p.pad_l, out_pad, static_cast<int>(p.act.kind));
    const int64_t out = p.n * p.c_out * p.h_out * p.w_out;
    const Floats wts = Random(rng, p.c_in * (p.c_out / p.groups) * p.kh * p.kw, -0.5f, 0.5f), b = Random(rng, p.c_out);
    PlainAndChannelsLast(*this, rng, buf, p.n, p.c_in, p.h_in, p.w_in, out,
                         [&](Kernels& k, const void* x, void* y, const void* wv, const void* bv) {
                           return k.ConvTranspose2d(p, x, wv, bv, y, nullptr);
                         }, wts, b);
  }
}

TEST_F(DnnlKernelsTest, ResizeEveryModeOnBothLayouts) {
  std::mt19937 rng(SeedFor("ResizeEveryModeOnBothLayouts"));
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const ResizeCoord coords[] = {ResizeCoord::kHalfPixel, ResizeCoord::kPytorchHalfPixel, ResizeCoord::kAlignCorners,
                                ResizeCoord::kAsymmetric, ResizeCoord::kTfHalfPixelForNn};
  for (int t = 0; t < 20; ++t) {
    ResizeParams p;
    p.mode = t % 2 ? ResizeMode::kLinear : ResizeMode::kNearest;
    p.coord = coords[(t / 2) % 5];
    p.nearest = static_cast<ResizeNearest>(pick(0, 3));
    const int64_t n = pick(1, 2), c = pick(1, 19);
    p.h_in = pick(2, 9); p.w_in = pick(2, 9);
    const bool whole = pick(0, 1);  // a whole factor, or any size
    p.h_out = whole ? p.h_in * pick(1, 3) : pick(1, 17);
    p.w_out = whole ? p.w_in * pick(1, 3) : pick(1, 17);
    p.planes = n * c;
    p.scale_h = float(p.h_out) / p.h_in; p.scale_w = float(p.w_out) / p.w_in;
    char buf[160];
    std::snprintf(buf, sizeof buf, "Resize %s coord%d nearest%d n%lld c%lld %lldx%lld -> %lldx%lld",
                  p.mode == ResizeMode::kLinear ? "linear" : "nearest", static_cast<int>(p.coord),
                  static_cast<int>(p.nearest), (long long)n, (long long)c, (long long)p.h_in, (long long)p.w_in,
                  (long long)p.h_out, (long long)p.w_out);
    PlainAndChannelsLast(*this, rng, buf, n, c, p.h_in, p.w_in, p.planes * p.h_out * p.w_out,
                         [&](Kernels& k, const void* x, void* y, const void*, const void*) { return k.Resize(p, x, y); });
  }
}

TEST_F(DnnlKernelsTest, PReluPerChannelAndScalarOnBothLayouts) {
  std::mt19937 rng(SeedFor("PReluPerChannelAndScalarOnBothLayouts"));
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int t = 0; t < 6; ++t) {
    const int64_t n = pick(1, 2), c = pick(1, 37), h = pick(1, 9), w = pick(1, 9);
    const bool scalar = t % 3 == 2;
    BinaryParams p;
    p.op = BinaryOp::kPRelu;
    p.rank = 4;
    const int64_t dims[4] = {n, c, h, w}, strides[4] = {c * h * w, h * w, w, 1};
    for (int d = 0; d < 4; ++d) { p.dims[d] = dims[d]; p.a_strides[d] = strides[d]; p.b_strides[d] = 0; }
    if (!scalar) p.b_strides[1] = 1;
    const Floats slope = Random(rng, scalar ? 1 : c, -0.5f, 0.5f);
    PlainAndChannelsLast(*this, rng, std::string("PRelu ") + (scalar ? "one slope" : "a slope per channel") + " c" +
                                         std::to_string(c),
                         n, c, h, w, n * c * h * w,
                         [&](Kernels& k, const void* x, void* y, const void* s, const void*) { return k.Binary(p, x, s, y); },
                         slope);
  }
}

// In bf16 a convolution's output is channels-last bf16: oneDNN's resampling takes YOLOv8's
// nearest 2x (asymmetric, floor) and a linear half-pixel one.
TEST_F(DnnlKernelsTest, ResizeOfBf16ChannelsLast) {
  if (!CpuHasBf16()) GTEST_SKIP() << "this CPU has neither AVX512-BF16 nor AMX";
  std::mt19937 rng(SeedFor("ResizeOfBf16ChannelsLast"));
  for (ResizeMode mode : {ResizeMode::kNearest, ResizeMode::kLinear}) {
    ResizeParams p;
    p.mode = mode;
    p.coord = mode == ResizeMode::kNearest ? ResizeCoord::kAsymmetric : ResizeCoord::kHalfPixel;
    p.nearest = ResizeNearest::kFloor;
    const int64_t n = 2, c = 19;
    p.h_in = 5; p.w_in = 7; p.h_out = 10; p.w_out = 14; p.planes = n * c; p.scale_h = p.scale_w = 2;
    PlainAndChannelsLast(*this, rng, mode == ResizeMode::kNearest ? "Resize nearest 2x bf16" : "Resize linear 2x bf16",
                         n, c, p.h_in, p.w_in, p.planes * p.h_out * p.w_out,
                         [&](Kernels& k, const void* x, void* y, const void*, const void*) { return k.Resize(p, x, y); },
                         {}, {}, 3e-2, true);
  }
}

TEST_F(DnnlKernelsTest, PadTransposeAndGlobalReduceOnBothLayouts) {
  std::mt19937 rng(SeedFor("PadTransposeAndGlobalReduceOnBothLayouts"));
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int t = 0; t < 6; ++t) {
    const int64_t n = pick(1, 2), c = pick(1, 21), h = pick(1, 9), w = pick(1, 9);
    PadParams pad;  // the channels alone (BlazeFace's), or the channels and the width
    pad.rank = 4;
    const int64_t dims[4] = {n, c, h, w};
    std::copy(dims, dims + 4, pad.in_dims);
    pad.before[1] = pick(0, 3); pad.after[1] = pick(1, 9);
    if (t % 3 == 2) pad.after[3] = 1;
    pad.value = t % 2 ? 0.0f : 0.5f;
    const int64_t pad_out = n * (c + pad.before[1] + pad.after[1]) * h * (w + pad.after[3]);
    PlainAndChannelsLast(*this, rng, "Pad channels " + std::to_string(pad.before[1]) + "+" + std::to_string(pad.after[1]) +
                                         (pad.after[3] ? " and width" : "") + " of " + std::to_string(c),
                         n, c, h, w, pad_out,
                         [&](Kernels& k, const void* x, void* y, const void*, const void*) { return k.Pad(pad, x, y); });
    for (const std::array<int32_t, 4>& perm : {std::array<int32_t, 4>{0, 2, 3, 1}, std::array<int32_t, 4>{0, 3, 1, 2},
                                               std::array<int32_t, 4>{0, 1, 3, 2}}) {
      TransposeParams tp;
      tp.rank = 4;
      std::copy(dims, dims + 4, tp.in_dims);
      std::copy(perm.begin(), perm.end(), tp.perm);
      // The output read again by a 1x1 convolution where it is 4-D NCHW-like, as the next op would.
      PlainAndChannelsLast(*this, rng, "Transpose " + std::to_string(perm[1]) + std::to_string(perm[2]) + std::to_string(perm[3]),
                           n, c, h, w, n * c * h * w,
                           [&](Kernels& k, const void* x, void* y, const void*, const void*) { return k.Transpose(tp, x, y); });
    }
    for (ReduceOp op : {ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kSum}) {
      ReduceParams r;
      r.op = op; r.outer = n * c; r.reduce = h * w; r.inner = 1;
      PlainAndChannelsLast(*this, rng, "Reduce over h*w op" + std::to_string(static_cast<int>(op)), n, c, h, w, n * c,
                           [&](Kernels& k, const void* x, void* y, const void*, const void*) { return k.Reduce(r, x, y); });
    }
  }
}

void PlainAndChannelsLast(DnnlKernelsTest& t, std::mt19937& rng, const std::string& what, int64_t n, int64_t c,
                          int64_t h, int64_t w, int64_t out_elems,
                          const std::function<Status(Kernels&, const void*, void*, const void*, const void*)>& op,
                          const Floats& weights, const Floats& bias, double tol, bool bf16) {
  const Conv2dParams conv = Pointwise(n, c, c, h, w);
  const Floats x = Random(rng, n * c * h * w), cw = Random(rng, c * c, -0.5f, 0.5f);
  for (bool channels_last : {false, true}) {
    t.CompareFor(what + (channels_last ? " (channels-last in)" : " (plain in)"), {x, cw, weights, bias},
                 [&](Kernels& k, Mem& m, const std::vector<void*>& v) {
                   const void* in = v[0];
                   if (channels_last) {
                     void* a = m.New(n * c * h * w);
                     EXPECT_TRUE(k.Conv2d(conv, v[0], v[1], nullptr, nullptr, a, nullptr).ok());
                     in = a;
                   }
                   void* y = m.New(out_elems);
                   const Status st = op(k, in, y, v[2], v[3]);
                   EXPECT_TRUE(st.ok()) << st.ToString();
                   return m.Get(y, out_elems);
                 }, tol, bf16);
  }
}

TEST_F(DnnlKernelsTest, MatMulShapes) {
  std::mt19937 rng(SeedFor("MatMulShapes"));
  struct Case { int64_t batch, m, n, k; bool ta, tb, bcast_b; int bias; float alpha; };
  const Case cases[] = {{1, 1, 17, 33, false, true, false, 1, 1.f}, {3, 5, 7, 9, false, false, false, 0, 1.f},
                        {2, 6, 5, 4, true, false, true, 2, 1.f},    {1, 8, 3, 10, false, true, false, 3, 1.f},
                        {2, 4, 4, 4, false, false, false, 1, 0.5f}};
  for (const Case& c : cases) {
    MatMulParams p;
    p.batch = c.batch; p.m = c.m; p.n = c.n; p.k = c.k; p.trans_a = c.ta; p.trans_b = c.tb;
    p.a_batch_stride = c.m * c.k;
    p.b_batch_stride = c.bcast_b ? 0 : c.k * c.n;
    p.alpha = c.alpha;
    p.c_stride_m = c.bias == 2 ? 1 : c.bias == 3 ? c.n : 0;
    p.c_stride_n = c.bias == 1 || c.bias == 3 ? 1 : 0;
    const int64_t c_elems = c.bias == 0 ? 0 : c.bias == 1 ? c.n : c.bias == 2 ? c.m : c.m * c.n;
    const int64_t out = c.batch * c.m * c.n;
    Compare("MatMul b" + std::to_string(c.batch) + " " + std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
                std::to_string(c.n) + " bias" + std::to_string(c.bias),
            {Random(rng, c.batch * c.m * c.k), Random(rng, (c.bcast_b ? 1 : c.batch) * c.k * c.n),
             c_elems ? Random(rng, c_elems) : Floats{}},
            [&](Kernels& k, Mem& m, const std::vector<void*>& v) {
              void* y = m.New(out);
              EXPECT_TRUE(k.MatMul(p, v[0], v[1], v[2], y, nullptr).ok());
              return m.Get(y, out);
            });
  }
}

// A 64-channel 3x3 convolution on two threads (an OpenMP parallel region); true when it ran.
bool RunAConv() {
  auto k = MakeDnnlKernels();
  if (!k->Prepare(StorageType::kFloat32).ok()) return false;
  Conv2dParams p = Pointwise(1, 64, 64, 32, 32);
  p.kh = p.kw = 3;
  p.h_out = p.w_out = 30;
  std::mt19937 rng(7);
  Mem m(*k);
  void* x = m.Put(Random(rng, 64 * 32 * 32));
  void* w = m.Put(Random(rng, 64 * 64 * 9));
  void* y = m.New(64 * 30 * 30);
  return k->Conv2d(p, x, w, nullptr, nullptr, y, nullptr).ok() && k->Sync().ok();
}

// The child's exit status, or -1 when it did not end within `seconds` (it is killed then).
int WaitFor(pid_t child, int seconds) {
  for (int i = 0; i < seconds * 20; ++i) {
    int status = 0;
    if (waitpid(child, &status, WNOHANG) == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    usleep(50 * 1000);
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return -1;
}

// What the supervisor does: fork before this process's first primitive; the worker then runs
// inference on its share of the cores.
TEST_F(DnnlKernelsTest, AWorkerForkedBeforeAnyInferenceDoesNotHang) {
  if (InferenceStarted()) GTEST_SKIP() << "this process ran a primitive before the test (ctest runs each test alone)";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SetCpuInferenceThreads(2);
    _exit(RunAConv() && RunAConv() ? 0 : 1);
  }
  EXPECT_EQ(WaitFor(child, 60), 0) << "the forked worker hung or failed in its first parallel region";
  EXPECT_TRUE(RunAConv());  // and the parent, after it
}

// The supervisor's safety net: a parent whose OpenMP pool runs forks a child that runs on one
// thread (inline, no pool), which ends.
TEST_F(DnnlKernelsTest, AChildOfAParentThatRanInferenceRunsOnOneThread) {
  SetCpuInferenceThreads(2);
  ASSERT_TRUE(RunAConv());
  ASSERT_TRUE(InferenceStarted());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SetCpuInferenceThreads(1);
    _exit(RunAConv() ? 0 : 1);
  }
  EXPECT_EQ(WaitFor(child, 60), 0) << "the child hung on its parent's OpenMP pool";
}

TEST_F(DnnlKernelsTest, RefusesHalfStorage) {
  auto k = MakeDnnlKernels();
  EXPECT_EQ(k->Prepare(StorageType::kFloat16).code(), Status::Code::kUnsupported);
}

TEST_F(DnnlKernelsTest, MemoryLimitIsOutOfMemory) {
  auto k = MakeDnnlKernels({.memory_limit = 1 << 20});
  void* p = nullptr;
  EXPECT_TRUE(k->Alloc(2 << 20, &p).IsOutOfMemory());
}

// Every converted model (FRAMEMILL_MODELS): the Engine on the oneDNN kernels against the
// Engine on the reference kernels, on one seeded input, at the models' usual tolerance
// (tests/engine/model_outputs.h).
TEST_F(DnnlKernelsTest, WholeModelsAgreeWithTheReference) {
  const char* dir = std::getenv("FRAMEMILL_MODELS");
  if (!dir || !std::filesystem::is_directory(dir)) GTEST_SKIP() << "FRAMEMILL_MODELS names no directory";
  std::mt19937 rng(SeedFor("WholeModelsAgreeWithTheReference"));
  int ran = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string graph = (e.path() / "model.fmg.json").string();
    if (!std::filesystem::exists(graph)) continue;
    auto ref = Engine::Load(graph, MakeCpuKernels());
    auto dnnl = Engine::Load(graph, MakeDnnlKernels());
    ASSERT_TRUE(ref.ok()) << graph << ": " << ref.status().ToString();
    ASSERT_TRUE(dnnl.ok()) << graph << ": " << dnnl.status().ToString();
    auto plan = (*ref)->PlanFor(1);
    ASSERT_TRUE(plan.ok());
    // Large inputs (isnet's 1024x1024) make the reference slow: the small models only.
    int64_t elems = 1;
    for (int64_t d : (*plan)->inputs[0].shape) elems *= d;
    if (elems > 3 * 640 * 640) continue;
    const Tensor in = model_check::RandomInput((*plan)->inputs[0].shape, rng);
    auto want = (*ref)->Run(in);
    auto got = (*dnnl)->Run(in);
    ASSERT_TRUE(want.ok()) << graph << ": " << want.status().ToString();
    ASSERT_TRUE(got.ok()) << graph << ": " << got.status().ToString();
    for (const model_check::OutputError& err : model_check::CompareOutputs(e.path().filename(), *want, *got)) {
      EXPECT_LE(err.worst_of_range, err.limit) << e.path().filename() << " output " << err.output;
      std::printf("  %-20s %-28s worst error %.2e of the range\n", e.path().filename().c_str(), err.output.c_str(),
                  err.worst_of_range);
    }
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no converted model in " << dir;
}

}  // namespace
}  // namespace framemill::engine
