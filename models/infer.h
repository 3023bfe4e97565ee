// `framemill infer`: runs one installed model on images and prints its raw outputs
// (and the host decode) per docs/CONTRACT.md. Called by scheduler/cli.cc; stateless,
// thread-compatible (each call opens its own model).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "configs/config.h"

namespace framemill::models {

struct InferOptions {
  std::string model;
  std::string device = "cpu";  // "cpu" | "gpu"
  bool json = false;
  std::vector<std::string> images;
  int batch = 8;               // images per forward on batchable models
};

// Exit codes: 0 all images done; 2 usage/configuration (unknown or not installed model,
// bad device); 3 some images could not be read or run (the others are still printed).
int RunInfer(const InferOptions& opts, const Config& cfg, std::ostream& out, std::ostream& err);

}  // namespace framemill::models
