#include "analysis/same_picture.h"

#include <algorithm>
#include <vector>

#include <opencv2/calib3d.hpp>
#include <opencv2/features2d.hpp>
#include <opencv2/imgproc.hpp>

namespace framemill {
namespace {

cv::Mat Gray(const cv::Mat& bgr, int max_side, double* scale) {
  cv::Mat gray;
  if (bgr.channels() == 3) cv::cvtColor(bgr, gray, cv::COLOR_BGR2GRAY);
  else if (bgr.channels() == 4) cv::cvtColor(bgr, gray, cv::COLOR_BGRA2GRAY);
  else gray = bgr;
  *scale = std::min(1.0, static_cast<double>(max_side) / std::max(gray.cols, gray.rows));
  if (*scale < 1) cv::resize(gray, gray, cv::Size(), *scale, *scale, cv::INTER_AREA);
  return gray;
}

}  // namespace

SamePictureResult SamePicture(const cv::Mat& a_bgr, const cv::Mat& b_bgr, const SamePictureOptions& o) {
  SamePictureResult r;
  if (a_bgr.empty() || b_bgr.empty()) return r;
  double sa = 1, sb = 1;
  const cv::Mat a = Gray(a_bgr, o.max_side, &sa), b = Gray(b_bgr, o.max_side, &sb);
  cv::Ptr<cv::ORB> orb = cv::ORB::create(o.features);
  std::vector<cv::KeyPoint> ka, kb;
  cv::Mat da, db;
  orb->detectAndCompute(a, cv::noArray(), ka, da);
  orb->detectAndCompute(b, cv::noArray(), kb, db);
  if (da.rows < 2 || db.rows < 2) return r;
  cv::BFMatcher matcher(cv::NORM_HAMMING);
  std::vector<std::vector<cv::DMatch>> knn;
  matcher.knnMatch(da, db, knn, 2);
  std::vector<cv::Point2f> pa, pb;
  for (const auto& m : knn) {
    if (m.size() < 2 || m[0].distance >= 0.75f * m[1].distance) continue;
    pa.push_back(ka[m[0].queryIdx].pt);
    pb.push_back(kb[m[0].trainIdx].pt);
  }
  r.matches = static_cast<int>(pa.size());
  if (r.matches < o.min_inliers) return r;
  std::vector<uchar> mask;
  cv::Mat t = cv::estimateAffinePartial2D(pa, pb, mask, cv::RANSAC, 3.0, 2000, 0.99, 10);
  if (t.empty()) return r;
  r.inliers = static_cast<int>(std::count(mask.begin(), mask.end(), uchar{1}));
  r.same = r.inliers >= o.min_inliers &&
           static_cast<double>(r.inliers) >= o.min_inlier_share * static_cast<double>(r.matches);
  return r;
}

}  // namespace framemill
