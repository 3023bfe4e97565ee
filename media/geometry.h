// Geometry of boxes in image pixels, written once for every folder that compares boxes:
// non-maximum suppression and the weighted merge of tiled faces (models/), face tracks
// (cluster/identities.cc), pose tracks (analysis/pose_tracks.cc). Pure functions;
// thread-safe.
#pragma once

#include <opencv2/core.hpp>

namespace framemill {

// Intersection over union of two axis-aligned boxes, in float; 0 when they do not overlap
// or their union is empty.
float IoU(const cv::Rect2f& a, const cv::Rect2f& b);
// The same for boxes given by their corners {x1, y1, x2, y2}, as results store them. The
// areas are taken from the corners as given (no round trip through a width), so a
// comparison with a threshold is decided on exactly these numbers.
float IoU(const float (&a)[4], const float (&b)[4]);

}  // namespace framemill
