// The 1927 Solvay conference photo in visp-images-data and ViSP's 30 face boxes for it, shared
// by the faces tests and models_bench's precision workload. Header-only.
#pragma once

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

namespace framemill::testing {

inline constexpr char kSolvay[] =
    "/usr/share/visp-images-data/ViSP-images/faces/1280px-Solvay_conference_1927.png";
inline constexpr char kSolvayTruth[] =
    "/usr/share/visp-images-data/ViSP-images/faces/ground_truth_detection.txt";

// ViSP's ground truth: "detection_<n>" then four corners as "row col". One box (detection_0)
// is on the wall; ViSP draws its boxes about a quarter larger than BlazeFace does, so match at
// IoU 0.3.
inline std::vector<cv::Rect2f> SolvayTruth() {
  std::ifstream in(kSolvayTruth);
  std::vector<cv::Rect2f> boxes;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("detection_", 0) != 0) continue;
    float x1 = 1e9f, y1 = 1e9f, x2 = -1e9f, y2 = -1e9f;
    for (int k = 0; k < 4 && std::getline(in, line); ++k) {
      std::istringstream p(line);
      float row = 0, col = 0;
      p >> row >> col;
      x1 = std::min(x1, col); x2 = std::max(x2, col);
      y1 = std::min(y1, row); y2 = std::max(y2, row);
    }
    boxes.emplace_back(x1, y1, x2 - x1, y2 - y1);
  }
  return boxes;
}

}  // namespace framemill::testing
