// Test images for the device tests: smoothed uniform noise summed over a few scales, so
// every patch has texture, like a real scene's. Deterministic in `seed`.
#pragma once

#include <initializer_list>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace framemill::gpu {

// 8-bit, `channels` channels (1 or 3), normalised to the full 0-255 range.
inline cv::Mat MultiScaleTexture(cv::Size size, int seed, int channels,
                                 std::initializer_list<int> scales) {
  const int type = CV_MAKETYPE(CV_32F, channels);
  cv::Mat acc(size, type, cv::Scalar::all(0));
  cv::RNG rng(seed);
  for (int scale : scales) {
    cv::Mat noise(size.height / scale + 2, size.width / scale + 2, type);
    rng.fill(noise, cv::RNG::UNIFORM, 0, 1);
    cv::Mat up;
    cv::resize(noise, up, size, 0, 0, cv::INTER_CUBIC);
    acc += up;
  }
  cv::Mat out;
  cv::normalize(acc, acc, 0, 255, cv::NORM_MINMAX);
  acc.convertTo(out, CV_MAKETYPE(CV_8U, channels));
  return out;
}

}  // namespace framemill::gpu
