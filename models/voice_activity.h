// Silero VAD v5 (the `silero-vad` model, docs/MODELS.md): the probability of speech in each
// 32 ms window of 16 kHz mono audio. The converter split the shipped graph: the stateless
// encoder (STFT magnitude + four convolutions) runs on a batch of windows at once, in our
// engine on the CPU or wherever the caller's Encoder runs it (a device); the recurrent decoder
// (an LSTM cell carried from window to window, then a 1x1 convolution and a sigmoid) runs
// here from decoder.bin, in order.
// A VoiceActivity owns its network and is NOT thread-safe: one per worker thread.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "gpu/ops.h"
#include "models/model_cache.h"
#include "models/manifest.h"
#include "models/output_tensor.h"

namespace framemill::models {

class VoiceActivity {
 public:
  // Runs the encoder on windows (an N x 1 x 1 x 640 fp32 tensor): result[b][0] holds window
  // b's features. Lets a caller encode on a device (models::RunModelOnTensor).
  using Encoder = std::function<Result<std::vector<std::vector<OutputTensor>>>(const gpu::Tensor&)>;

  // Loads decoder.bin, and the encoder's graph into our engine on the CPU unless `with_encoder` is false (the
  // caller then always passes its own Encoder); Corruption naming the file when either is
  // unusable.
  static Result<std::unique_ptr<VoiceActivity>> Open(const ModelManifest& manifest,
                                                     bool with_encoder = true);

  int sample_rate() const { return sample_rate_; }
  int window() const { return window_; }  // samples per probability (512 = 32 ms)

  // One probability per whole window of `samples` (16 kHz mono, about [-1, 1]), from a
  // fresh state, as vad-web computes them: window k sees samples [k*512, k*512+512) and the
  // 64 before them (zeros before the start). A tail shorter than a window is not scored.
  Result<std::vector<float>> Run(std::span<const float> samples);
  // The same with the encoder run by `encode`.
  Result<std::vector<float>> Run(std::span<const float> samples, const Encoder& encode);
  // The encoder's input for windows [first, first + count): context, window, reflect pad.
  gpu::Tensor Windows(std::span<const float> samples, size_t first, size_t count) const;

 private:
  VoiceActivity() = default;
  // The manifest's audio section and shapes: the window, its context and padding.
  Status ReadShapes(const ModelManifest& manifest, const nlohmann::json& man);
  // The decoder's LSTM and output weights (decoder.bin, as its table in the manifest says).
  Status ReadDecoderWeights(const ModelManifest& manifest, const nlohmann::json& man);

  std::unique_ptr<ModelRunner> encoder_;  // the CPU's (OpenRunner)
  int sample_rate_ = 16000, window_ = 512, context_ = 64, padded_ = 640, hidden_ = 128;
  int features_ = 128;
  // PyTorch LSTMCell layout: rows [i; f; g; o] x hidden.
  std::vector<float> w_ih_, w_hh_, b_;  // b_ = bias_ih + bias_hh
  std::vector<float> w_out_;
  float b_out_ = 0;
};

}  // namespace framemill::models
