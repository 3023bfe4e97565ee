// The device operations of the contract, each with its <OPERATION>_GPU variable. Named
// here, in base/, because configs/ (which reads those variables) and gpu/ (whose policy
// decides each one's device) both need the list, and neither may include the other.
// Header-only; the list is immutable.
#pragma once

#include <string>
#include <vector>

namespace framemill {

inline const std::vector<std::string>& DeviceOperations() {
  static const std::vector<std::string> ops = {
      "LIGHTING", "PREPROCESS", "CATEGORIZE", "FACE_DETECTION", "FACE_EMBEDDING",
      "FACE_CLUSTERING", "SEGMENTATION", "INPAINTING", "POSE", "MOTION", "AUDIO_SYNC"};
  return ops;
}

}  // namespace framemill
