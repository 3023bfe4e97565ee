// How identifiable a detected face is: its size, its sharpness, how frontal it is and how
// sure the verifier is that it is a face, each scaled to [0, 1], and their product, the
// face's `quality`. Face clustering seeds identities only from faces of good quality
// (FaceClustersOptions::seed_quality) and attaches the rest afterwards or leaves them as
// noise. The scales are set so that the labelled set's faces are not limited by size or
// sharpness (smallest 64 px, sharpness p10 0.176) and Solvay's small soft faces are (32-42
// px, median 0.046); the seed cut was chosen from the table in bench/README ("Faces: quality
// and identities"). Pure functions.
#pragma once

#include <opencv2/core.hpp>

namespace framemill {

struct FaceQualityScales {
  // The box's shorter side at which size stops limiting quality: the embedders see 112
  // (mobilefacenet) or 224 px (faceres) crops, and below this a face is upscaled.
  double full_size_px = 48;
  // FaceSharpness at which sharpness stops limiting quality.
  double full_sharpness = 0.15;
};

struct FaceQuality {
  double size_px = 0;    // the box's shorter side, in source pixels
  double sharpness = 0;  // FaceSharpness of the box
  double frontal = 0;    // 1 facing the camera .. 0 in profile (FaceFrontalness of the mesh)
  double presence = 0;   // the verifier's face presence
  double score = 0;      // the product of the four, each scaled to [0, 1]
};

// High-frequency energy of the face's box: the variance of the Laplacian of its gray
// pixels at 64x64, over their variance (so contrast and lighting cancel). A face smaller
// than 64 px is upscaled first and scores low, as a blurred one does. 0 for a flat box.
double FaceSharpness(const cv::Mat& face_bgr);

// The parts and their product; size and sharpness are scaled by `scales` and clipped to 1.
FaceQuality ScoreFaceQuality(double size_px, double sharpness, double frontal, double presence,
                             const FaceQualityScales& scales = {});

}  // namespace framemill
