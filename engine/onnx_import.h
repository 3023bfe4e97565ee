// Reads an ONNX model file (a user's network, such as inpaint.model, or one of ONNX's own
// conformance cases with its test data: `framemill infer --inputs`) straight into the engine's
// Graph, with its ai.onnx opset, through ONNX's own protobuf classes (Debian's libonnx-dev): the same
// graph that tools/models/fmlib/fmg.py would dump, checked by the same ParseGraph, so
// one validation serves both forms. Initializers become the fmg dtypes (float32; int64,
// int32, int8, uint8, bool as integers; float64 and float16 as float32); weights held in
// external files, subgraph attributes and sparse tensors are refused with the reason.
// Thread-safety: a free function over its own values.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/graph.h"
#include "engine/tensor.h"

namespace framemill::engine {

// NotFound/IOError when the file cannot be read, Corruption when it is not an ONNX model,
// Unsupported naming what the engine does not take (an op, a dtype, external data).
Result<Graph> LoadOnnxGraph(const std::string& onnx_path);

// `path` ends in ".onnx" (any case): LoadOnnxGraph reads it; else LoadGraph (the fmg json).
bool IsOnnxPath(const std::string& path);

// One ONNX TensorProto file (a test data set's input_0.pb, output_0.pb): its name, its
// element type as numpy names it ("float32", "int64", "bool"), and its values (floats for
// the float types, float16 and float64 converted; integers and booleans as integers).
struct OnnxTensor {
  std::string name;
  std::string dtype;
  HostTensor value;
};
// NotFound/IOError when the file cannot be read, Corruption when it is no TensorProto,
// Unsupported for strings, complex numbers and external data.
Result<OnnxTensor> ReadOnnxTensor(const std::string& pb_path);

// Binds `inputs` (one per graph input, in the graph's order, as ONNX's test data sets lay
// them out) to `graph`: an integer or boolean one, and a float32 one that feeds only inputs
// the engine takes as constants (a convolution's weights, a resize's scales:
// TakesOnlyConstant), becomes a constant of the graph (its shape and values fix what depends
// on them); any other float32 one fixes its input's declared shape. Returns those by input
// name, for Engine::Run.
// InvalidArgument when the count, a type or a shape does not fit the graph; Unsupported
// for an input of a type the engine does not compute (float16, float64).
Result<std::map<std::string, Tensor>> BindInputs(Graph* graph, const std::vector<OnnxTensor>& inputs);

}  // namespace framemill::engine
