// Ultralytics' letterbox: a picture scaled to fit the model's square input whole, keeping its
// aspect ratio, centred, the rest padded with one grey. YOLOv8 was trained on such inputs;
// stretching a 16:9 frame to a square moves its boxes' shapes off what it learned.
// Pure functions; thread-safe.
#pragma once

#include <vector>

#include <opencv2/core.hpp>

#include "models/manifest.h"

namespace framemill::models {

// Where a picture of `image` size lands in an input of `input` size: scaled by `scale`
// (min(input.w / w, input.h / h)), to width x height pixels, at (left, top).
struct LetterboxGeometry {
  double scale = 1;
  int width = 0, height = 0, left = 0, top = 0;
};
LetterboxGeometry LetterboxOf(cv::Size image, cv::Size input);

// The picture letterboxed into `input` (bilinear resize, INTER_LINEAR on 8-bit, as
// Ultralytics'), padded with `pad` in every channel.
cv::Mat Letterbox(const cv::Mat& bgr, cv::Size input, int pad);

// The pictures as model `m` takes them: letterboxed to its input when its manifest asks
// (input.preprocess.letterbox), otherwise the same Mats (not copied).
std::vector<cv::Mat> ModelInputImages(const ModelManifest& m, const std::vector<cv::Mat>& bgr);

}  // namespace framemill::models
