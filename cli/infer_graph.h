// `framemill infer --model FILE.onnx --inputs DIR`: a user's ONNX graph through the engine on
// the TensorProto files of DIR (input_0.pb, input_1.pb, ..., one per graph input in order, as
// ONNX's test data sets lay them out): integer and boolean inputs are bound as constants of
// the graph (shapes, axes, indices), float32 ones run; every graph output is printed by name
// (`--json`: results[0].outputs.NAME.shape and .data, as the contract's infer --json). What the
// engine does not implement (an op, opset or attribute value) is refused with exit 2, naming
// the node, the op and what is missing (engine/opset.h); it is never computed wrongly.
#pragma once

#include <ostream>
#include <string>

namespace framemill {

struct GraphInferOptions {
  std::string model;       // FILE.onnx
  std::string inputs_dir;  // DIR
  std::string device = "cpu";
  int device_id = 0;       // GPU_DEVICE_ID, for --device gpu
  bool json = false;
};

// Exit codes: 0 the graph ran; 2 a usage or input problem, or what the engine refuses; 3 the
// run itself failed (a device out of memory).
int RunGraphInfer(const GraphInferOptions& opts, std::ostream& out, std::ostream& err);

}  // namespace framemill
