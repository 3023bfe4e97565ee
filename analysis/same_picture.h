// Whether two pictures show the same thing, from their pixels: ORB features matched both
// ways (Lowe's ratio test) and a similarity transform (shift, rotation, scale) fitted by
// RANSAC; enough inliers mean one is a resized, cropped, turned, re-compressed or re-lit
// copy of the other. Textures and scenes of one kind, which an embedding puts as close as
// copies, have no such transform. Pure; safe to call from any thread.
#pragma once

#include <opencv2/core.hpp>

namespace framemill {

struct SamePictureOptions {
  int max_side = 512;   // both pictures are matched at this size at most
  int features = 1000;  // ORB keypoints per picture
  int min_inliers = 20;  // the transform must explain at least this many matches...
  double min_inlier_share = 0.3;  // ...and this share of them (bench/README "Near-duplicates")

  bool operator==(const SamePictureOptions&) const = default;
};

struct SamePictureResult {
  bool same = false;
  int matches = 0, inliers = 0;
};

SamePictureResult SamePicture(const cv::Mat& a_bgr, const cv::Mat& b_bgr, const SamePictureOptions& options = {});

}  // namespace framemill
