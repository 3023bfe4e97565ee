// Where a model's batch runs: on the worker's device through our inference engine,
// batched by the batch tuner from the engine's memory plan and stepped down by the
// out-of-memory ladder like every device operation; or on the CPU, through the same engine on
// its oneDNN kernels (engine/dnnl/dnnl_kernels.h). The
// policy's <OPERATION>_GPU switches pick, by the operation the model's manifest names
// (POSE, SEGMENTATION, ...). Thread-safety: call from the thread that owns `ladder`.
#pragma once

#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "base/status.h"
#include "gpu/oom_ladder.h"
#include "models/model_cache.h"

namespace framemill::models {

using BatchOutputs = std::vector<std::vector<OutputTensor>>;

// result[b][i] = manifest.outputs[i] of image b, as ModelRunner::Run gives them, wherever
// they ran. Device runners are borrowed from `cache`; `cpu` is the model's CPU runner.
// `ladder` null: everything on `cpu`. *device: the device of every image, or "cpu" when
// any fell back to the CPU (an outcome records one device; the ladder counts fallbacks).
// `operation`: the switch that decides the device; "": the model's own (its manifest's).
// A stage that borrows another's model (audio_sync's face detector) names its own.
Result<BatchOutputs> RunModel(ModelCache& cache, ModelRunner& cpu, const std::vector<cv::Mat>& bgr,
                              gpu::OomLadder* ladder, std::string* device,
                              const std::string& operation = "");

// The same for an already prepared NCHW fp32 input (a model whose input is not an image),
// sliced by rows of its batch: result[b] = the outputs of row b.
Result<BatchOutputs> RunModelOnTensor(ModelCache& cache, ModelRunner& cpu, const gpu::Tensor& nchw,
                                      gpu::OomLadder* ladder, std::string* device,
                                      const std::string& operation = "");

}  // namespace framemill::models
