// The CUDA backend against the CPU reference (gpu/ops.cc), on synthetic but
// realistic images: smooth gradients with noise, saturated areas, pure black and
// white patches, near-black and near-white areas (the clip counts), odd sizes and
// batches mixing sizes. Tolerances:
//   LumaStats: histogram identical except that at most 0.1% of an image's pixels may
//              move to an adjacent bin (float rounding at bin edges; the kernel is
//              written to be bit-exact, so 0 is expected); sums within 1e-5 relative;
//              pixel and clip counts exact.
//   Preprocess fp32: max |gpu - cpu| <= 1e-4 (ImageNet normalisation, values ~[-2.2, 2.7]).
//   Preprocess fp16: at most 1 ulp of half at the value's magnitude.
// Every test here needs a device and skips, saying why, without one (the binary is
// built to travel: scripts/bundle-gpu.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "gpu/compute_backend.h"
#include "gpu/ops.h"

namespace framemill::gpu {
namespace {

// A photo-like image: per-channel gradients and a low-frequency wave, Gaussian noise,
// an exposure factor (seed-dependent: some images dark, some bright), then a blown-out
// sky band (255 in some channels), pure black and white patches, near-black (0..2) and
// near-white (253..255) patches.
cv::Mat Synthetic(int cols, int rows, uint64_t seed) {
  cv::RNG rng(seed);
  cv::Mat img(rows, cols, CV_8UC3);
  const double exposure = 0.35 + 1.1 * rng.uniform(0.0, 1.0);
  double base[3], gx[3], gy[3], amp[3], fx[3], fy[3];
  for (int c = 0; c < 3; ++c) {
    base[c] = rng.uniform(20.0, 120.0);
    gx[c] = rng.uniform(-60.0, 120.0);
    gy[c] = rng.uniform(-60.0, 120.0);
    amp[c] = rng.uniform(5.0, 40.0);
    fx[c] = rng.uniform(1.0, 6.0) * CV_PI / std::max(cols, 1);
    fy[c] = rng.uniform(1.0, 6.0) * CV_PI / std::max(rows, 1);
  }
  std::vector<double> col_term(static_cast<size_t>(cols) * 3), row_term(static_cast<size_t>(rows) * 3);
  for (int x = 0; x < cols; ++x)
    for (int c = 0; c < 3; ++c)
      col_term[x * 3 + c] = gx[c] * x / std::max(cols - 1, 1) + amp[c] * std::sin(fx[c] * x);
  for (int y = 0; y < rows; ++y)
    for (int c = 0; c < 3; ++c)
      row_term[y * 3 + c] = gy[c] * y / std::max(rows - 1, 1) + amp[c] * std::cos(fy[c] * y);
  cv::Mat noise(rows, cols, CV_32FC3);
  rng.fill(noise, cv::RNG::NORMAL, 0.0, 6.0);
  for (int y = 0; y < rows; ++y) {
    auto* p = img.ptr<uint8_t>(y);
    const auto* nz = noise.ptr<float>(y);
    for (int x = 0; x < cols; ++x)
      for (int c = 0; c < 3; ++c) {
        const double v = (base[c] + col_term[x * 3 + c] + row_term[y * 3 + c]) * exposure + nz[x * 3 + c];
        p[x * 3 + c] = cv::saturate_cast<uint8_t>(v);
      }
  }
  if (cols >= 8 && rows >= 8) {
    auto rect = [&](double x0, double y0, double w, double h) {
      return cv::Rect(static_cast<int>(x0 * cols), static_cast<int>(y0 * rows),
                      std::max(1, static_cast<int>(w * cols)), std::max(1, static_cast<int>(h * rows)));
    };
    img(rect(0.0, 0.0, 1.0, 0.08)).setTo(cv::Scalar(255, 250, 240));  // blown-out sky
    img(rect(0.1, 0.3, 0.12, 0.15)).setTo(cv::Scalar(0, 0, 0));
    img(rect(0.3, 0.3, 0.12, 0.15)).setTo(cv::Scalar(255, 255, 255));
    cv::Mat dark = img(rect(0.5, 0.3, 0.12, 0.15));
    rng.fill(dark, cv::RNG::UNIFORM, 0, 3);
    cv::Mat bright = img(rect(0.7, 0.3, 0.12, 0.15));
    rng.fill(bright, cv::RNG::UNIFORM, 253, 256);
    cv::circle(img, cv::Point(cols * 3 / 4, rows * 3 / 4), std::max(1, rows / 10), cv::Scalar(40, 60, 255), -1);
  }
  return img;
}

class CudaOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (CudaDevices(&why).empty()) GTEST_SKIP() << "no CUDA device: " << why;
    auto b = MakeCudaBackend(0);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    gpu_ = std::move(b).value();
  }
  std::unique_ptr<ComputeBackend> gpu_;
};

// Pixels that changed bin, counted as the net flow across each bin boundary: a pixel
// moved by one bin counts 1, by k bins counts k.
int64_t BinMoves(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  int64_t flow = 0, moves = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    flow += static_cast<int64_t>(a[i]) - static_cast<int64_t>(b[i]);
    moves += std::llabs(flow);
  }
  return moves;
}

void ExpectNear(double got, double want, double rel, const std::string& what) {
  EXPECT_LE(std::fabs(got - want), rel * std::fabs(want) + 1e-9)
      << what << ": gpu " << got << " cpu " << want;
}

void ExpectLumaMatches(const LumaStats& got, const LumaStats& want, const std::string& what) {
  ASSERT_EQ(got.histogram.size(), static_cast<size_t>(LumaStats::kBins)) << what;
  EXPECT_EQ(got.pixels, want.pixels) << what;
  int64_t total = 0;
  for (uint32_t c : got.histogram) total += c;
  EXPECT_EQ(total, want.pixels) << what << ": histogram total";
  const int64_t moves = BinMoves(got.histogram, want.histogram);
  EXPECT_LE(static_cast<double>(moves), 0.001 * static_cast<double>(want.pixels))
      << what << ": " << moves << " pixel-bins moved";
  if (moves != 0) std::printf("  note: %s: %lld pixels in an adjacent bin\n", what.c_str(), static_cast<long long>(moves));
  ExpectNear(got.sum_l, want.sum_l, 1e-5, what + " sum_l");
  ExpectNear(got.sum_l2, want.sum_l2, 1e-5, what + " sum_l2");
  ExpectNear(got.sum_log_l, want.sum_log_l, 1e-5, what + " sum_log_l");
  ExpectNear(got.sum_r, want.sum_r, 1e-5, what + " sum_r");
  ExpectNear(got.sum_g, want.sum_g, 1e-5, what + " sum_g");
  ExpectNear(got.sum_b, want.sum_b, 1e-5, what + " sum_b");
  EXPECT_EQ(got.clipped_shadows, want.clipped_shadows) << what;
  EXPECT_EQ(got.clipped_highlights, want.clipped_highlights) << what;
}

std::string Name(const cv::Mat& m) { return std::to_string(m.cols) + "x" + std::to_string(m.rows); }

TEST_F(CudaOpsTest, DescribesItself) {
  EXPECT_EQ(gpu_->device(), "cuda:0");
  EXPECT_TRUE(gpu_->is_gpu());
  auto info = gpu_->Info();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_FALSE(info->name.empty());
  EXPECT_GT(info->total_bytes, 0);
  EXPECT_GT(info->free_bytes, 0);
  EXPECT_LE(info->free_bytes, info->total_bytes);
  EXPECT_GE(info->cc_major, 8);
  EXPECT_GT(info->multiprocessors, 0);
  std::printf("  device: %s, cc %d.%d, %d SMs, %.1f GiB (%.1f GiB free)\n", info->name.c_str(),
              info->cc_major, info->cc_minor, info->multiprocessors,
              static_cast<double>(info->total_bytes) / (1 << 30), static_cast<double>(info->free_bytes) / (1 << 30));
}

TEST_F(CudaOpsTest, LumaStatsMatchesCpuOneImageAtATime) {
  const cv::Size sizes[] = {{1, 1}, {7, 3}, {33, 17}, {224, 224}, {641, 479}, {1920, 1080}, {4000, 3000}};
  uint64_t seed = 1;
  for (const cv::Size& s : sizes) {
    cv::Mat img = Synthetic(s.width, s.height, seed++);
    auto got = gpu_->LumaStatsBatch({img});
    ASSERT_TRUE(got.ok()) << Name(img) << ": " << got.status().ToString();
    ASSERT_EQ(got->size(), 1u);
    ExpectLumaMatches((*got)[0], LumaStatsCpu(img), Name(img));
  }
}

TEST_F(CudaOpsTest, LumaStatsMatchesCpuOnAMixedBatch) {
  std::vector<cv::Mat> batch;
  const cv::Size sizes[] = {{1920, 1080}, {641, 479}, {5, 5}, {1280, 720}, {479, 641}, {2, 1}, {800, 600}, {1920, 1080}};
  uint64_t seed = 100;
  for (const cv::Size& s : sizes) batch.push_back(Synthetic(s.width, s.height, seed++));
  // A view into a larger image: rows are not contiguous.
  cv::Mat big = Synthetic(1000, 700, seed++);
  batch.push_back(big(cv::Rect(13, 7, 611, 503)));
  ASSERT_FALSE(batch.back().isContinuous());
  // Uniform images: every pixel in one bin (the worst case for histogram atomics).
  batch.push_back(cv::Mat(480, 640, CV_8UC3, cv::Scalar(0, 0, 0)));
  batch.push_back(cv::Mat(480, 640, CV_8UC3, cv::Scalar(255, 255, 255)));
  batch.push_back(cv::Mat(321, 123, CV_8UC3, cv::Scalar(17, 130, 250)));

  auto got = gpu_->LumaStatsBatch(batch);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i)
    ExpectLumaMatches((*got)[i], LumaStatsCpu(batch[i]), "item " + std::to_string(i) + " " + Name(batch[i]));
  EXPECT_GT(gpu_->LastBatchBytes(), 0);

  // Cached buffers reused by the next batch: same answers (histograms and counts are
  // exact; sums may differ in the last bits because blocks add in any order).
  auto again = gpu_->LumaStatsBatch(batch);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ((*again)[i].histogram, (*got)[i].histogram) << i;
    ExpectNear((*again)[i].sum_l, (*got)[i].sum_l, 1e-12, "repeat sum_l");
  }
}

TEST_F(CudaOpsTest, LumaStatsOnAManySliceBatch) {
  // ~100 MB of pixels: many upload slots and slices, then a smaller batch reusing the pool.
  std::vector<cv::Mat> batch;
  for (int i = 0; i < 16; ++i) batch.push_back(Synthetic(1920, 1080, 500 + i));
  auto got = gpu_->LumaStatsBatch(batch);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (size_t i = 0; i < batch.size(); ++i) ExpectLumaMatches((*got)[i], LumaStatsCpu(batch[i]), "frame " + std::to_string(i));
  std::vector<cv::Mat> small(batch.begin() + 3, batch.begin() + 5);
  auto got2 = gpu_->LumaStatsBatch(small);
  ASSERT_TRUE(got2.ok()) << got2.status().ToString();
  for (size_t i = 0; i < small.size(); ++i) ExpectLumaMatches((*got2)[i], LumaStatsCpu(small[i]), "small " + std::to_string(i));
}

PreprocessSpec ImageNet(int w, int h, TensorType type, bool to_rgb = true) {
  PreprocessSpec s;
  s.width = w;
  s.height = h;
  s.type = type;
  s.to_rgb = to_rgb;
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdv[3] = {0.229f, 0.224f, 0.225f};
  for (int c = 0; c < 3; ++c) {
    s.mean[c] = mean[c];
    s.std[c] = stdv[c];
  }
  return s;
}

// One ulp of half at |v|'s magnitude (subnormal spacing below 2^-14).
double HalfUlp(double v) {
  const double a = std::fabs(v);
  if (a < 6.103515625e-05) return 5.960464477539063e-08;
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(a))) - 10);
}

void ExpectTensorMatches(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape, want.shape) << what;
  ASSERT_EQ(got.type, want.type) << what;
  ASSERT_EQ(got.data.size(), want.data.size()) << what;
  const size_t n = want.data.size() / want.ElementBytes();
  double worst = 0;
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const double g = got.At(i), w = want.At(i);
    const double d = std::fabs(g - w);
    const double tol = want.type == TensorType::kFloat32 ? 1e-4 : HalfUlp(w) * 1.0000001;
    if (!(d <= tol)) {
      if (bad++ == 0) first_bad = i;
    }
    worst = std::max(worst, d);
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << n << " values out of tolerance, first at " << first_bad
                     << " (gpu " << got.At(first_bad) << " cpu " << want.At(first_bad) << ")";
  std::printf("  %s: max |gpu-cpu| = %.3g\n", what.c_str(), worst);
}

TEST_F(CudaOpsTest, PreprocessMatchesCpu) {
  std::vector<cv::Mat> batch;
  const cv::Size sizes[] = {{1920, 1080}, {641, 479}, {224, 224}, {448, 448}, {100, 50}, {1, 1}, {3, 2}, {479, 641}};
  uint64_t seed = 200;
  for (const cv::Size& s : sizes) batch.push_back(Synthetic(s.width, s.height, seed++));
  cv::Mat big = Synthetic(900, 700, seed++);
  batch.push_back(big(cv::Rect(31, 5, 333, 257)));  // not contiguous
  struct Case {
    int w, h;
    bool rgb;
  };
  const Case cases[] = {{224, 224, true}, {256, 192, false}, {1000, 900, true}, {7, 5, true}};
  for (const Case& c : cases) {
    for (TensorType type : {TensorType::kFloat32, TensorType::kFloat16}) {
      const PreprocessSpec spec = ImageNet(c.w, c.h, type, c.rgb);
      const std::string what = std::to_string(c.w) + "x" + std::to_string(c.h) +
                               (type == TensorType::kFloat32 ? " fp32" : " fp16") + (c.rgb ? " rgb" : " bgr");
      auto got = gpu_->PreprocessBatch(batch, spec);
      ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
      ExpectTensorMatches(*got, PreprocessCpu(batch, spec), what);
    }
  }
}

TEST_F(CudaOpsTest, PreprocessPlainScaleAndLargeOutputs) {
  // No mean/std (x/255 in [0,1]), outputs large enough to need several download pieces
  // and inputs spanning several upload slices.
  std::vector<cv::Mat> batch;
  for (int i = 0; i < 12; ++i) batch.push_back(Synthetic(i % 2 ? 1920 : 1280, i % 2 ? 1080 : 720, 300 + i));
  for (TensorType type : {TensorType::kFloat32, TensorType::kFloat16}) {
    PreprocessSpec spec;
    spec.width = 640;
    spec.height = 480;
    spec.type = type;
    auto got = gpu_->PreprocessBatch(batch, spec);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectTensorMatches(*got, PreprocessCpu(batch, spec), type == TensorType::kFloat32 ? "640x480 fp32 /255" : "640x480 fp16 /255");
  }
}

TEST_F(CudaOpsTest, EmptyBatchesAndBadInputs) {
  auto l = gpu_->LumaStatsBatch({});
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->empty());
  auto t = gpu_->PreprocessBatch({}, PreprocessSpec{});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->shape, (std::vector<int64_t>{0, 3, 224, 224}));
  cv::Mat gray(10, 10, CV_8UC1, cv::Scalar(3));
  EXPECT_TRUE(gpu_->LumaStatsBatch({gray}).status().IsInvalidArgument());
  EXPECT_TRUE(gpu_->PreprocessBatch({gray}, PreprocessSpec{}).status().IsInvalidArgument());
  EXPECT_TRUE(gpu_->LumaStatsBatch({cv::Mat()}).status().IsInvalidArgument());
}

TEST_F(CudaOpsTest, MemoryLimitRefusesBigBatchesWithOutOfMemory) {
  std::vector<cv::Mat> frames;
  for (int i = 0; i < 8; ++i) frames.push_back(Synthetic(1920, 1080, 400 + i));  // ~6.2 MB each
  gpu_->SetMemoryLimit(int64_t{32} << 20);
  auto info = gpu_->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_LE(info->total_bytes, int64_t{32} << 20);
  EXPECT_LE(info->free_bytes, int64_t{32} << 20);

  auto too_big = gpu_->LumaStatsBatch(frames);  // ~50 MB
  ASSERT_FALSE(too_big.ok());
  EXPECT_TRUE(too_big.status().IsOutOfMemory()) << too_big.status().ToString();
  EXPECT_TRUE(gpu_->PreprocessBatch(frames, ImageNet(224, 224, TensorType::kFloat32)).status().IsOutOfMemory());

  std::vector<cv::Mat> half(frames.begin(), frames.begin() + 4);  // ~25 MB: fits
  auto ok = gpu_->LumaStatsBatch(half);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_GT(gpu_->LastBatchBytes(), 4 * 1920 * 1080 * 3);
  EXPECT_LE(gpu_->LastBatchBytes(), int64_t{32} << 20);
  for (size_t i = 0; i < half.size(); ++i) ExpectLumaMatches((*ok)[i], LumaStatsCpu(half[i]), "under limit " + std::to_string(i));

  gpu_->SetMemoryLimit(0);  // lifted: the whole batch runs
  auto all = gpu_->LumaStatsBatch(frames);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->size(), frames.size());
}

// These run everywhere: without a device they check that the reason is given.
TEST(CudaAvailabilityTest, SaysWhyThereIsNoDevice) {
  std::string why;
  std::vector<DeviceInfo> devices = CudaDevices(&why);
  if (devices.empty()) {
    EXPECT_FALSE(why.empty());
    std::printf("  no CUDA device (compiled in: %s): %s\n", CudaCompiledIn() ? "yes" : "no", why.c_str());
    auto b = MakeCudaBackend(0);
    EXPECT_FALSE(b.ok());
  } else {
    for (const DeviceInfo& d : devices) {
      EXPECT_FALSE(d.name.empty());
      EXPECT_GT(d.total_bytes, 0);
    }
    auto b = MakeCudaBackend(static_cast<int>(devices.size()));  // one past the last
    ASSERT_FALSE(b.ok());
    EXPECT_TRUE(b.status().IsNotFound()) << b.status().ToString();
  }
}

}  // namespace
}  // namespace framemill::gpu

// ---- TopKSimilar: the device's similarity tiles against the CPU twin ----
namespace framemill::gpu {
namespace {

std::vector<float> UnitRows(int64_t n, int dim, uint64_t seed) {
  cv::RNG rng(seed);
  std::vector<float> v(static_cast<size_t>(n) * dim);
  for (int64_t i = 0; i < n; ++i) {
    double ss = 0;
    for (int d = 0; d < dim; ++d) {
      v[i * dim + d] = static_cast<float>(rng.gaussian(1.0));
      ss += double(v[i * dim + d]) * v[i * dim + d];
    }
    for (int d = 0; d < dim; ++d) v[i * dim + d] = static_cast<float>(v[i * dim + d] / std::sqrt(ss));
  }
  return v;
}

// Sums in another order differ by ~1e-6: an id may differ from the CPU's only where
// the two similarities it swaps with are that close.
void ExpectSameTopK(const TopK& got, const TopK& want) {
  ASSERT_EQ(got.ids.size(), want.ids.size());
  int swapped = 0;
  for (size_t i = 0; i < got.ids.size(); ++i) {
    EXPECT_NEAR(got.sims[i], want.sims[i], 2e-5) << "entry " << i;
    if (got.ids[i] != want.ids[i]) ++swapped;
  }
  EXPECT_LE(swapped, static_cast<int>(got.ids.size() / 1000 + 2));
}

TEST(CudaTopKSimilarTest, MatchesTheCpuTwinAcrossTiles) {
  std::string why;
  if (CudaDevices(&why).empty()) GTEST_SKIP() << "no CUDA device: " << why;
  auto gpu = MakeCudaBackend(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  // More rows than one tile in both directions, a dimension that is not a multiple of
  // the 16-wide k step, and queries that are part of the base (self skipped).
  const int dim = 1000;
  const int64_t n = kSimilarityBaseRows + 1500;
  auto base = UnitRows(n, dim, 11);
  std::vector<int64_t> self(static_cast<size_t>(kSimilarityQueryRows + 100));
  for (size_t i = 0; i < self.size(); ++i) self[i] = static_cast<int64_t>(i) + 3000;
  SimilarityQuery q{base.data() + 3000 * dim, static_cast<int64_t>(self.size()), base.data(), n,
                    dim, 16, self.data()};
  auto got = (*gpu)->TopKSimilar(q);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameTopK(*got, TopKSimilarCpu(q));
  // The whole set against itself, uploaded once.
  SimilarityQuery all{base.data(), 2000, base.data(), 2000, dim, 8, nullptr};
  auto same = (*gpu)->TopKSimilar(all);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  ExpectSameTopK(*same, TopKSimilarCpu(all));
}

TEST(CudaTopKSimilarTest, AMemoryLimitGivesOutOfMemoryAndAnEmptyQueryNothing) {
  std::string why;
  if (CudaDevices(&why).empty()) GTEST_SKIP() << "no CUDA device: " << why;
  auto gpu = MakeCudaBackend(0);
  ASSERT_TRUE(gpu.ok());
  auto base = UnitRows(20000, 512, 5);
  (*gpu)->SetMemoryLimit(16 << 20);
  SimilarityQuery q{base.data(), 20000, base.data(), 20000, 512, 8, nullptr};
  EXPECT_EQ((*gpu)->TopKSimilar(q).status().code(), Status::Code::kOutOfMemory);
  SimilarityQuery none{base.data(), 0, base.data(), 20000, 512, 8, nullptr};
  auto r = (*gpu)->TopKSimilar(none);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ids.empty());
}

}  // namespace
}  // namespace framemill::gpu
