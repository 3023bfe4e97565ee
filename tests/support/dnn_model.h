// One converted model (model.onnx) run through OpenCV's DNN module: not a path of the
// product any more (the engine runs every model, engine/), but a second implementation the
// tests compare the engine with and models_bench's `dnn` column (the runner framemill used
// until f34cd8b). Owns its cv::dnn::Net and is NOT thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/dnn.hpp>

#include "base/status.h"
#include "gpu/ops.h"
#include "models/manifest.h"
#include "models/output_tensor.h"

namespace framemill::models {

class DnnModel {
 public:
  // Loads manifest.onnx_file; Corruption naming the file and OpenCV's message on failure.
  static Result<std::unique_ptr<DnnModel>> Open(const ModelManifest& manifest);

  // Outputs per image (result[b][i] = manifest.outputs[i] of image b). One forward for
  // the whole batch when the model is batchable and OpenCV keeps the batch dimension,
  // otherwise one forward per image. Images are 8-bit BGR; an empty or non-CV_8UC3 Mat
  // is InvalidArgument (naming its index).
  Result<std::vector<std::vector<OutputTensor>>> Run(const std::vector<cv::Mat>& bgr);

  // The same on an already prepared NCHW fp32 tensor (its memory is only read).
  Result<std::vector<std::vector<OutputTensor>>> RunTensor(const gpu::Tensor& nchw);

  // Runs an already preprocessed NCHW float32 blob (N x C x H x W, C as the manifest's
  // input): a reference input in tests, or a model whose input is not an image.
  Result<std::vector<std::vector<OutputTensor>>> RunBlob(const cv::Mat& nchw);

  const ModelManifest& manifest() const { return manifest_; }
  // False once a batched forward was seen to lose the batch dimension (a batch-1
  // reshape in the graph); later runs then go image by image.
  bool batched() const { return batched_; }

 private:
  explicit DnnModel(ModelManifest m) : manifest_(std::move(m)) {}
  Result<std::vector<std::vector<OutputTensor>>> Forward(const cv::Mat& nchw, int n);

  ModelManifest manifest_;
  cv::dnn::Net net_;
  std::vector<std::string> output_names_;
  bool batched_ = true;
};

}  // namespace framemill::models
