#include "models/letterbox.h"

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>

namespace framemill::models {

LetterboxGeometry LetterboxOf(cv::Size image, cv::Size input) {
  LetterboxGeometry g;
  if (image.width <= 0 || image.height <= 0) return g;
  g.scale = std::min(static_cast<double>(input.width) / image.width,
                     static_cast<double>(input.height) / image.height);
  g.width = std::clamp(static_cast<int>(std::lround(image.width * g.scale)), 1, input.width);
  g.height = std::clamp(static_cast<int>(std::lround(image.height * g.scale)), 1, input.height);
  // Ultralytics: top = round(dh - 0.1) with dh half the spare rows: an odd spare row goes below.
  g.left = static_cast<int>(std::lround((input.width - g.width) / 2.0 - 0.1));
  g.top = static_cast<int>(std::lround((input.height - g.height) / 2.0 - 0.1));
  return g;
}

cv::Mat Letterbox(const cv::Mat& bgr, cv::Size input, int pad) {
  const LetterboxGeometry g = LetterboxOf(bgr.size(), input);
  cv::Mat out(input, bgr.type(), cv::Scalar::all(pad));
  cv::Mat inner = out(cv::Rect(g.left, g.top, g.width, g.height));
  if (bgr.size() == inner.size())
    bgr.copyTo(inner);
  else
    cv::resize(bgr, inner, inner.size(), 0, 0, cv::INTER_LINEAR);
  return out;
}

std::vector<cv::Mat> ModelInputImages(const ModelManifest& m, const std::vector<cv::Mat>& bgr) {
  if (m.letterbox_pad < 0) return bgr;
  std::vector<cv::Mat> out;
  out.reserve(bgr.size());
  const cv::Size input(m.preprocess.width, m.preprocess.height);
  for (const cv::Mat& b : bgr) out.push_back(b.empty() ? b : Letterbox(b, input, m.letterbox_pad));
  return out;
}

}  // namespace framemill::models
