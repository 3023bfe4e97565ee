// A converted model run by our own inference engine (engine/) on a backend's device:
// the backend's fused preprocessing kernel, then the model's fmg graph with fp16 or fp32
// storage as the backend prefers. The CPU runs it too (models/model_cache.h OpenRunner).
// Holds the weights on the device for its lifetime. Not thread-safe: one per thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "base/status.h"
#include "gpu/compute_backend.h"
#include "engine/engine.h"
#include "models/catalog.h"
#include "models/manifest.h"
#include "models/output_tensor.h"

namespace framemill::models {

class EngineModel {
 public:
  // `backend` is borrowed and must outlive the model. An OutOfMemory (the weights do not
  // fit) comes back as the backend's kernels reported it.
  static Result<std::unique_ptr<EngineModel>> Open(const ModelManifest& manifest,
                                                   gpu::ComputeBackend& backend);

  // result[b][i] = manifest.outputs[i] of image b. One engine run for the whole batch
  // when batched(), else image by image. Tells the backend the batch's
  // device bytes (SetLastBatchBytes), for the batch tuner.
  Result<std::vector<std::vector<OutputTensor>>> Run(const std::vector<cv::Mat>& bgr);

  // An already prepared NCHW fp32 input whose first dimension is the batch (a model whose
  // input is not an image: the VAD's audio windows): outputs per batch row, as Run gives
  // them. The engine converts it to its storage type.
  Result<std::vector<std::vector<OutputTensor>>> RunTensor(const gpu::Tensor& nchw);

  // Device bytes of one image's batch (activations + scratch, weights excluded).
  int64_t BatchBytesPerImage();
  std::string device() const { return backend_.device(); }
  // Whether one run takes a whole batch: on a device, a batchable graph or a fixed-batch one
  // that the engine batches (models/catalog.h ModelSpec::engine_batches). On the CPU image by
  // image: one plan, one arena and one set of oneDNN primitives per model, where every batch
  // size would make its own; and a batch is no faster there (models_bench engine, batch 8
  // against 1, 2026-12-02: blazeface 8.2 against 7.6 ms an image, faceres 8.9 against 7.9,
  // selfie 5.5 against 6.0; nsfw 22.7 against 28.9, but a CPU worker runs a claim item by item).
  bool batched() const {
    return backend_.is_gpu() && (manifest_.batchable || EngineBatches(manifest_.name));
  }
  const ModelManifest& manifest() const { return manifest_; }
  engine::Engine& engine() { return *engine_; }

 private:
  EngineModel(ModelManifest m, gpu::ComputeBackend& backend,
              std::unique_ptr<engine::Engine> engine)
      : manifest_(std::move(m)), backend_(backend), engine_(std::move(engine)) {}
  Status RunBatch(const std::vector<cv::Mat>& images,
                  std::vector<std::vector<OutputTensor>>* out);
  // Runs the engine on a prepared input of batch n and splits its outputs per row.
  Status RunInput(const gpu::Tensor& input, size_t n, std::vector<std::vector<OutputTensor>>* out);
  // Logs the engine's new step notes (Engine::Notes): once per model and plan.
  void LogNotes();

  ModelManifest manifest_;
  gpu::ComputeBackend& backend_;
  std::unique_ptr<engine::Engine> engine_;
  size_t notes_logged_ = 0;
};

}  // namespace framemill::models
