// The device operations framemill runs, with their CPU reference implementations.
// A backend (CPU, CUDA, sim) computes the same function; the CPU one here is the
// reference the GPU results are tested against. Plain data; functions are
// thread-safe. No CUDA headers: this file is seen by every backend's callers.
#pragma once

#include <cstdint>
#include <vector>

#include <opencv2/core.hpp>

namespace framemill::gpu {

// Per-image pixel statistics behind the lighting stage, on linear-light Rec.709
// luminance L of sRGB-decoded pixels. The histogram is over sqrt(L) so that the
// dark end, where percentiles of underexposed photos live, is resolved finely.
struct LumaStats {
  static constexpr int kBins = 4096;
  std::vector<uint32_t> histogram;  // kBins counts, bin = min(kBins-1, floor(sqrt(L)*kBins))
  int64_t pixels = 0;
  double sum_l = 0, sum_l2 = 0;
  double sum_log_l = 0;              // sum of log(1e-4 + L)
  double sum_r = 0, sum_g = 0, sum_b = 0;  // linear channels
  int64_t clipped_shadows = 0;       // max channel <= 2 (8-bit)
  int64_t clipped_highlights = 0;    // min channel >= 253
};

// Luminance at the centre of a histogram bin.
inline double LumaBinCenter(int bin) {
  double s = (bin + 0.5) / LumaStats::kBins;
  return s * s;
}

// Reference: statistics of one 8-bit BGR image (3 channels, continuous or not).
LumaStats LumaStatsCpu(const cv::Mat& bgr);

enum class TensorType { kFloat32, kFloat16 };

// What a neural model wants its input to look like.
struct PreprocessSpec {
  int width = 224, height = 224;  // output size (bilinear resize, half-pixel centres)
  bool to_rgb = true;             // BGR -> RGB channel order
  float scale = 1.0f / 255.0f;    // applied first: x * scale
  float mean[3] = {0, 0, 0};      // then (x - mean[c]) / std[c], c in output order
  float std[3] = {1, 1, 1};
  TensorType type = TensorType::kFloat32;
};

// A dense NCHW tensor in host memory. float16 values are stored as IEEE half bits.
struct Tensor {
  std::vector<int64_t> shape;  // {N, 3, H, W}
  TensorType type = TensorType::kFloat32;
  std::vector<uint8_t> data;
  size_t ElementBytes() const { return type == TensorType::kFloat32 ? 4 : 2; }
  // Element i as float (decoding half if needed).
  float At(size_t i) const;
};

// Reference: resize + colour order + normalise + HWC->NCHW (+ fp16) of a batch of
// 8-bit BGR images. Bilinear with half-pixel centres (cv::INTER_LINEAR).
Tensor PreprocessCpu(const std::vector<cv::Mat>& images, const PreprocessSpec& spec);

// IEEE 754 half <-> float, round to nearest even.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);

// Device bytes one image costs each operation (inputs, outputs, scratch), used by the
// batch tuner's first guess and by the simulated device's budget.
int64_t LumaStatsBytesPerItem(const cv::Mat& image);
int64_t PreprocessBytesPerItem(const cv::Mat& image, const PreprocessSpec& spec);

}  // namespace framemill::gpu
