#include "media/geometry.h"

#include <algorithm>

namespace framemill {
namespace {

// The length of [a1, a2] ∩ [b1, b2]; 0 when they do not meet.
float Overlap(float a1, float a2, float b1, float b2) {
  return std::max(0.f, std::min(a2, b2) - std::max(a1, b1));
}

float OverUnion(float intersection, float area_a, float area_b) {
  const float uni = area_a + area_b - intersection;
  return uni > 0 ? intersection / uni : 0.f;
}

}  // namespace

float IoU(const cv::Rect2f& a, const cv::Rect2f& b) {
  const float inter = Overlap(a.x, a.x + a.width, b.x, b.x + b.width) *
                      Overlap(a.y, a.y + a.height, b.y, b.y + b.height);
  return OverUnion(inter, a.area(), b.area());
}

float IoU(const float (&a)[4], const float (&b)[4]) {
  const float inter = Overlap(a[0], a[2], b[0], b[2]) * Overlap(a[1], a[3], b[1], b[3]);
  return OverUnion(inter, (a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]));
}

}  // namespace framemill
