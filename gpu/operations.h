// The operations whose device can be chosen with <OPERATION>_GPU (the contract's
// list). Header-only so configs/ can name them without linking gpu/.
#pragma once

#include <string>
#include <vector>

namespace framemill::gpu {

inline const std::vector<std::string>& Operations() {
  static const std::vector<std::string> ops = {
      "LIGHTING", "PREPROCESS", "CATEGORIZE", "FACE_DETECTION", "FACE_EMBEDDING",
      "FACE_CLUSTERING", "SEGMENTATION", "INPAINTING", "POSE", "MOTION", "AUDIO_SYNC"};
  return ops;
}

}  // namespace framemill::gpu
