// Reads an ONNX model file (a user's network, such as inpaint.model) straight into the
// engine's Graph, through ONNX's own protobuf classes (Debian's libonnx-dev): the same
// graph that tools/models/fmlib/fmg.py would dump, checked by the same ParseGraph, so
// one validation serves both forms. Initializers become the fmg dtypes (float32; int64,
// int32, int8, uint8, bool as integers; float64 and float16 as float32); weights held in
// external files, subgraph attributes and sparse tensors are refused with the reason.
// Thread-safety: a free function over its own values.
#pragma once

#include <string>

#include "base/status.h"
#include "engine/graph.h"

namespace framemill::engine {

// NotFound/IOError when the file cannot be read, Corruption when it is not an ONNX model,
// Unsupported naming what the engine does not take (an op, a dtype, external data).
Result<Graph> LoadOnnxGraph(const std::string& onnx_path);

// `path` ends in ".onnx" (any case): LoadOnnxGraph reads it; else LoadGraph (the fmg json).
bool IsOnnxPath(const std::string& path);

}  // namespace framemill::engine
