// Where a neural stage's model runs: on the worker's device through the inference engine
// (gpu/engine), batched by the batch tuner from the engine's memory plan and stepped
// down by the out-of-memory ladder exactly like the lighting stage's operations; or on
// the CPU through cv::dnn (the ModelRunner). The policy's <OPERATION>_GPU switches pick,
// by the operation named in the model's manifest (POSE, SEGMENTATION, ...).
// Thread-safety: call from the worker thread that owns ctx.ladder. Loaded engines are
// cached per thread and device, so each worker thread keeps its own weights on the card.
#pragma once

#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "models/dnn_model.h"
#include "stages/model_pool.h"
#include "stages/stage.h"
#include "storage/status.h"

namespace framemill {

// result[b][i] = manifest.outputs[i] of image b, as ModelRunner::Run gives them, wherever
// they ran. *device: the device of every image, or "cpu" when any fell back to the CPU
// (a result records one device; the ladder's statistics count the fallbacks).
Result<std::vector<std::vector<models::OutputTensor>>> RunModel(ModelRunner& cpu_runner,
                                                                const std::vector<cv::Mat>& bgr,
                                                                const StageContext& ctx,
                                                                std::string* device);

}  // namespace framemill
