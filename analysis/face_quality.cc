#include "analysis/face_quality.h"

#include <algorithm>

#include <opencv2/imgproc.hpp>

namespace framemill {

double FaceSharpness(const cv::Mat& face_bgr) {
  if (face_bgr.empty()) return 0;
  cv::Mat gray, small, lap;
  if (face_bgr.channels() == 3) {
    cv::cvtColor(face_bgr, gray, cv::COLOR_BGR2GRAY);
  } else {
    gray = face_bgr;
  }
  const int interp = std::min(gray.cols, gray.rows) >= 64 ? cv::INTER_AREA : cv::INTER_LINEAR;
  cv::resize(gray, small, cv::Size(64, 64), 0, 0, interp);
  small.convertTo(small, CV_32F);
  cv::Laplacian(small, lap, CV_32F, 1, 1.0, 0.0, cv::BORDER_REFLECT);
  cv::Scalar mean, sd, lap_mean, lap_sd;
  cv::meanStdDev(small, mean, sd);
  cv::meanStdDev(lap, lap_mean, lap_sd);
  const double var = sd[0] * sd[0];
  return var > 1e-6 ? lap_sd[0] * lap_sd[0] / var : 0.0;
}

FaceQuality ScoreFaceQuality(double size_px, double sharpness, double frontal, double presence,
                             const FaceQualityScales& scales) {
  auto unit = [](double v) { return std::clamp(v, 0.0, 1.0); };
  FaceQuality q;
  q.size_px = size_px;
  q.sharpness = sharpness;
  q.frontal = unit(frontal);
  q.presence = unit(presence);
  q.score = unit(size_px / scales.full_size_px) * unit(sharpness / scales.full_sharpness) * q.frontal *
            q.presence;
  return q;
}

}  // namespace framemill
