// A user's own network: an ONNX file they name (inpaint.model), read straight into our
// engine (engine/onnx_import.h) and run on the CPU's oneDNN kernels in fp32, its inputs
// given by name. Unlike a catalog model it has no manifest: its preprocessing is the
// caller's. Not thread-safe: one caller at a time.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "gpu/ops.h"

namespace framemill::models {

class UserNetwork {
 public:
  // Errors name the file and what the engine does not take (an op, a dtype, a shape).
  static Result<std::unique_ptr<UserNetwork>> Open(const std::string& onnx_path);

  // The inputs Run wants, in the graph's order.
  const std::vector<std::string>& input_names() const { return inputs_; }
  // One NCHW fp32 tensor per input name, all of one batch; every output by name.
  Result<std::map<std::string, gpu::Tensor>> Run(const std::map<std::string, gpu::Tensor>& inputs);

 private:
  explicit UserNetwork(std::unique_ptr<engine::Engine> e);
  std::unique_ptr<engine::Engine> engine_;
  std::vector<std::string> inputs_;
};

}  // namespace framemill::models
