#include "gpu/ops.h"

#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <opencv2/imgproc.hpp>

namespace framemill::gpu {
namespace {

const std::array<float, 256>& SrgbToLinear() {
  static const std::array<float, 256> lut = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) {
      double c = i / 255.0;
      t[i] = static_cast<float>(c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4));
    }
    return t;
  }();
  return lut;
}

}  // namespace

LumaStats LumaStatsCpu(const cv::Mat& bgr) {
  if (bgr.empty() || bgr.type() != CV_8UC3) throw std::invalid_argument("LumaStatsCpu: need CV_8UC3");
  const auto& lin = SrgbToLinear();
  LumaStats s;
  s.histogram.assign(LumaStats::kBins, 0);
  s.pixels = static_cast<int64_t>(bgr.total());
  // Row sums in double keep the totals exact enough for megapixel images.
  for (int y = 0; y < bgr.rows; ++y) {
    const uint8_t* p = bgr.ptr<uint8_t>(y);
    double sl = 0, sl2 = 0, slog = 0, sr = 0, sg = 0, sb = 0;
    for (int x = 0; x < bgr.cols; ++x, p += 3) {
      const uint8_t b8 = p[0], g8 = p[1], r8 = p[2];
      const float b = lin[b8], g = lin[g8], r = lin[r8];
      const float l = 0.2126f * r + 0.7152f * g + 0.0722f * b;
      int bin = static_cast<int>(std::sqrt(l) * LumaStats::kBins);
      s.histogram[bin < LumaStats::kBins ? bin : LumaStats::kBins - 1]++;
      sl += l;
      sl2 += static_cast<double>(l) * l;
      slog += std::log(1e-4f + l);
      sr += r;
      sg += g;
      sb += b;
      s.clipped_shadows += (std::max({r8, g8, b8}) <= 2);
      s.clipped_highlights += (std::min({r8, g8, b8}) >= 253);
    }
    s.sum_l += sl;
    s.sum_l2 += sl2;
    s.sum_log_l += slog;
    s.sum_r += sr;
    s.sum_g += sg;
    s.sum_b += sb;
  }
  return s;
}


Tensor PreprocessCpu(const std::vector<cv::Mat>& images, const PreprocessSpec& spec) {
  Tensor t;
  t.type = spec.type;
  t.shape = {static_cast<int64_t>(images.size()), 3, spec.height, spec.width};
  const size_t plane = static_cast<size_t>(spec.width) * spec.height;
  t.data.resize(images.size() * 3 * plane * t.ElementBytes());
  for (size_t n = 0; n < images.size(); ++n) {
    if (images[n].empty() || images[n].type() != CV_8UC3)
      throw std::invalid_argument("PreprocessCpu: need CV_8UC3");
    // Resize in float, so the reference is plain bilinear arithmetic (OpenCV's 8-bit
    // path uses 11-bit fixed-point weights, which a GPU kernel would not reproduce).
    cv::Mat f, r;
    images[n].convertTo(f, CV_32FC3);
    cv::resize(f, r, cv::Size(spec.width, spec.height), 0, 0, cv::INTER_LINEAR);
    for (int y = 0; y < spec.height; ++y) {
      const float* p = r.ptr<float>(y);
      for (int x = 0; x < spec.width; ++x) {
        for (int c = 0; c < 3; ++c) {
          int src_c = spec.to_rgb ? 2 - c : c;
          float v = (p[x * 3 + src_c] * spec.scale - spec.mean[c]) / spec.std[c];
          size_t idx = (n * 3 + c) * plane + static_cast<size_t>(y) * spec.width + x;
          if (spec.type == TensorType::kFloat32) {
            std::memcpy(t.data.data() + idx * 4, &v, 4);
          } else {
            uint16_t h = FloatToHalf(v);
            std::memcpy(t.data.data() + idx * 2, &h, 2);
          }
        }
      }
    }
  }
  return t;
}

int64_t LumaStatsBytesPerItem(const cv::Mat& image) {
  return static_cast<int64_t>(image.total()) * 3 + LumaStats::kBins * 4 + 64;
}

int64_t PreprocessBytesPerItem(const cv::Mat& image, const PreprocessSpec& spec) {
  int64_t out = 3LL * spec.width * spec.height * (spec.type == TensorType::kFloat32 ? 4 : 2);
  return static_cast<int64_t>(image.total()) * 3 + out;
}

}  // namespace framemill::gpu
