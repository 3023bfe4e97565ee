// Silero VAD v5 (the `silero-vad` model, docs/MODELS.md): the probability of speech in each
// 32 ms window of 16 kHz mono audio. The converter split the shipped graph: the stateless
// encoder (STFT magnitude + four convolutions) runs in cv::dnn on every window at once; the
// recurrent decoder (an LSTM cell carried from window to window, then a 1x1 convolution and
// a sigmoid) runs here from decoder.bin, in order.
// A VoiceActivity owns its network and is NOT thread-safe: one per worker thread.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "models/dnn_model.h"
#include "models/manifest.h"

namespace framemill::models {

class VoiceActivity {
 public:
  // Loads model.onnx and decoder.bin; Corruption naming the file when either is unusable.
  static Result<std::unique_ptr<VoiceActivity>> Open(const ModelManifest& manifest);

  int sample_rate() const { return sample_rate_; }
  int window() const { return window_; }  // samples per probability (512 = 32 ms)

  // One probability per whole window of `samples` (16 kHz mono, about [-1, 1]), from a
  // fresh state, as vad-web computes them: window k sees samples [k*512, k*512+512) and the
  // 64 before them (zeros before the start). A tail shorter than a window is not scored.
  Result<std::vector<float>> Run(std::span<const float> samples);

 private:
  VoiceActivity() = default;
  Result<cv::Mat> Encode(std::span<const float> samples, size_t first, size_t count);

  std::unique_ptr<DnnModel> encoder_;
  int sample_rate_ = 16000, window_ = 512, context_ = 64, padded_ = 640, hidden_ = 128;
  int features_ = 128;
  // PyTorch LSTMCell layout: rows [i; f; g; o] x hidden.
  std::vector<float> w_ih_, w_hh_, b_;  // b_ = bias_ih + bias_hh
  std::vector<float> w_out_;
  float b_out_ = 0;
};

}  // namespace framemill::models
