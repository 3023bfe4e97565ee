// Which ONNX opsets, attributes and inputs the engine implements. ONNX versions each op by
// opset: an attribute becomes an input (Squeeze's axes at 13, Pad's pads at 11, Slice's
// starts at 10, Clip's bounds at 11, ReduceSum's axes at 13, the other reductions' at 18,
// Split's sizes at 13), a semantic changes (Softmax's axis at 13, Resize's coordinates
// between 10 and 11), attributes are added (Resize's antialias at 18). A node is lowered
// (plan_*.cc) by the rules of the graph's opset; whatever the engine does not implement is
// refused before it is planned, naming the node, its op and what is missing, never computed
// wrongly. Adding an attribute or an opset to an op: its row in opset.cc, and its lowering.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "engine/graph.h"

namespace framemill::engine {

// The ai.onnx opsets the engine implements: 1 to 21. Before 7 the binary ops did not broadcast
// unless told to (an attribute the engine refuses): they take equal shapes there.
constexpr int64_t kMinOpset = 1;
constexpr int64_t kMaxOpset = 21;

// Unsupported naming the opset when the engine does not implement it.
Status CheckOpset(int64_t opset);

// Unsupported naming the node, its op and what is missing, for an attribute or input that
// node `n`'s op does not take at `opset` in the engine (an attribute ONNX does not define
// there, or one whose value the engine does not implement: Resize's antialias, a training
// BatchNormalization), or an output the engine does not compute (Dropout's mask,
// MaxPool's indices).
Status CheckNode(const Node& n, int64_t opset);

// Whether the engine takes input k of node `n` only as a value known when it plans (a
// convolution's weights, a reshape's target, a resize's scales, the axes of a reduction):
// `framemill infer --inputs` binds a given input feeding one as a constant of the graph.
bool TakesOnlyConstant(const Node& n, size_t k);

}  // namespace framemill::engine
