// One output of a model for one image, as every runner gives it (our engine, on the CPU or
// on a device) and every decoder takes it. Header-only plain data; thread-safe to copy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace framemill::models {

// The shape has a leading 1 (the image's slice of the batch) and keeps the TF.js layout
// the converter kept (docs/MODELS.md).
struct OutputTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;

  int64_t Elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

}  // namespace framemill::models
