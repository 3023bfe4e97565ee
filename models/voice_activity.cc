#include "models/voice_activity.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

namespace framemill::models {

namespace {

// Windows encoded per forward: 8 s of audio, about 2.6 MB of input.
constexpr size_t kEncodeBatch = 256;

float GateSigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

struct DecoderFile {
  std::vector<float> data;
  std::map<std::string, std::pair<std::vector<int64_t>, int64_t>> tensors;  // shape, offset
};

Result<DecoderFile> ReadDecoder(const ModelManifest& m, const nlohmann::json& j) {
  const std::string path = m.dir + "/" + j.value("file", std::string("decoder.bin"));
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Status::Corruption("model " + m.name + ": cannot read '" + path + "'");
  DecoderFile d;
  d.data.resize(static_cast<size_t>(in.tellg()) / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(d.data.data()), d.data.size() * sizeof(float));
  for (const auto& t : j.at("tensors")) {
    auto shape = t.at("shape").get<std::vector<int64_t>>();
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    const int64_t at = t.at("offset").get<int64_t>();
    if (at < 0 || at + n > static_cast<int64_t>(d.data.size()))
      return Status::Corruption("model " + m.name + ": " + path + " is shorter than its table says");
    d.tensors[t.at("name").get<std::string>()] = {std::move(shape), at};
  }
  return d;
}

}  // namespace

Result<std::unique_ptr<VoiceActivity>> VoiceActivity::Open(const ModelManifest& manifest,
                                                          bool with_encoder) {
  nlohmann::json man;
  try {
    std::ifstream in(manifest.manifest_file);
    man = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    return Status::Corruption("model " + manifest.name + ": " + manifest.manifest_file + ": " + e.what());
  }
  if (!man.contains("decoder") || !man.contains("audio"))
    return Status::Corruption("model " + manifest.name + ": manifest has no decoder/audio section; "
                              "is it a voice-activity model?");
  std::unique_ptr<VoiceActivity> v(new VoiceActivity());
  FM_RETURN_IF_ERROR(v->ReadShapes(manifest, man));
  FM_RETURN_IF_ERROR(v->ReadDecoderWeights(manifest, man));
  if (with_encoder) {
    auto enc = OpenRunner(manifest, nullptr);
    if (!enc.ok()) return enc.status();
    v->encoder_ = std::move(enc).value();
  }
  return v;
}

Status VoiceActivity::ReadShapes(const ModelManifest& manifest, const nlohmann::json& man) {
  try {
    const auto& a = man["audio"];
    sample_rate_ = a.at("sample_rate").get<int>();
    window_ = a.at("window").get<int>();
    context_ = a.at("context").get<int>();
  } catch (const std::exception& e) {
    return Status::Corruption("model " + manifest.name + ": audio section: " + e.what());
  }
  if (manifest.input_shape.size() != 4 || manifest.outputs.empty() ||
      manifest.outputs[0].shape.size() != 4)
    return Status::Corruption("model " + manifest.name + ": unexpected input/output shapes");
  padded_ = static_cast<int>(manifest.input_shape[3]);
  features_ = static_cast<int>(manifest.outputs[0].shape[1] * manifest.outputs[0].shape[3]);
  if (padded_ < window_ + context_ || padded_ - window_ - context_ >= window_)
    return Status::Corruption("model " + manifest.name + ": window and padding do not agree");
  return Status::OK();
}

Status VoiceActivity::ReadDecoderWeights(const ModelManifest& manifest, const nlohmann::json& man) {
  Result<DecoderFile> d = Status::Internal("unread");
  try {
    d = ReadDecoder(manifest, man["decoder"]);
  } catch (const std::exception& e) {
    return Status::Corruption("model " + manifest.name + ": decoder table: " + e.what());
  }
  if (!d.ok()) return d.status();
  auto take = [&](const char* name, int64_t rows, int64_t cols, std::vector<float>* out) -> Status {
    auto it = d->tensors.find(name);
    int64_t n = 1;
    if (it != d->tensors.end())
      for (int64_t s : it->second.first) n *= s;
    if (it == d->tensors.end() || n != rows * cols)
      return Status::Corruption("model " + manifest.name + ": decoder.bin lacks " + name + " of " +
                                std::to_string(rows) + "x" + std::to_string(cols));
    const float* src = d->data.data() + it->second.second;
    out->assign(src, src + n);
    return Status::OK();
  };
  auto it = d->tensors.find("decoder.rnn.weight_hh");
  if (it == d->tensors.end() || it->second.first.size() != 2)
    return Status::Corruption("model " + manifest.name + ": decoder.bin lacks the LSTM weights");
  hidden_ = static_cast<int>(it->second.first[1]);
  const int64_t h4 = 4 * hidden_;
  std::vector<float> b_ih, b_hh, b_out;
  for (Status s : {take("decoder.rnn.weight_ih", h4, features_, &w_ih_),
                   take("decoder.rnn.weight_hh", h4, hidden_, &w_hh_),
                   take("decoder.rnn.bias_ih", h4, 1, &b_ih), take("decoder.rnn.bias_hh", h4, 1, &b_hh),
                   take("decoder.decoder.2.weight", 1, hidden_, &w_out_),
                   take("decoder.decoder.2.bias", 1, 1, &b_out)})
    if (!s.ok()) return s;
  b_out_ = b_out[0];
  b_.resize(h4);
  for (int64_t k = 0; k < h4; ++k) b_[k] = b_ih[k] + b_hh[k];
  return Status::OK();
}

gpu::Tensor VoiceActivity::Windows(std::span<const float> samples, size_t first, size_t count) const {
  gpu::Tensor t{{static_cast<int64_t>(count), 1, 1, padded_}, gpu::TensorType::kFloat32,
                std::vector<uint8_t>(count * padded_ * sizeof(float))};
  const int span = window_ + context_;
  for (size_t w = 0; w < count; ++w) {
    float* row = reinterpret_cast<float*>(t.data.data()) + w * padded_;
    const int64_t start = static_cast<int64_t>((first + w) * window_) - context_;
    for (int k = 0; k < span; ++k) row[k] = start + k < 0 ? 0.0f : samples[start + k];
    // Reflect (the edge sample not repeated), as the graph's Pad(mode=reflect).
    for (int k = span; k < padded_; ++k) row[k] = row[2 * (span - 1) - k];
  }
  return t;
}

Result<std::vector<float>> VoiceActivity::Run(std::span<const float> samples) {
  if (!encoder_) return Status::Internal("VoiceActivity opened without its encoder");
  return Run(samples, [this](const gpu::Tensor& t) { return encoder_->RunTensor(t); });
}

Result<std::vector<float>> VoiceActivity::Run(std::span<const float> samples, const Encoder& encode) {
  const size_t windows = samples.size() / window_;
  std::vector<float> probs;
  probs.reserve(windows);
  const int H = hidden_;
  std::vector<float> h(H, 0.0f), c(H, 0.0f), gates(4 * H);
  const cv::Mat w_ih(4 * H, features_, CV_32F, w_ih_.data());
  for (size_t first = 0; first < windows; first += kEncodeBatch) {
    const size_t count = std::min(kEncodeBatch, windows - first);
    auto out = encode(Windows(samples, first, count));
    if (!out.ok()) return out.status();
    if (out->size() != count) return Status::Internal("the VAD encoder gave " + std::to_string(out->size()) +
                                                      " results for " + std::to_string(count) + " windows");
    cv::Mat feats(static_cast<int>(count), features_, CV_32F);
    for (size_t w = 0; w < count; ++w) {
      const auto& t = (*out)[w].at(0);
      if (static_cast<int>(t.data.size()) != features_)
        return Status::Internal("the VAD encoder gave " + std::to_string(t.data.size()) + " features");
      std::copy(t.data.begin(), t.data.end(), feats.ptr<float>(static_cast<int>(w)));
    }
    cv::Mat from_input;  // count x 4H: every window's input term at once
    cv::gemm(feats, w_ih, 1.0, cv::noArray(), 0.0, from_input, cv::GEMM_2_T);
    for (size_t w = 0; w < count; ++w) {
      const float* xin = from_input.ptr<float>(static_cast<int>(w));
      for (int r = 0; r < 4 * H; ++r) {
        const float* wr = w_hh_.data() + static_cast<size_t>(r) * H;
        float acc = b_[r] + xin[r];
        for (int k = 0; k < H; ++k) acc += wr[k] * h[k];
        gates[r] = acc;
      }
      float logit = b_out_;
      for (int k = 0; k < H; ++k) {
        const float i = GateSigmoid(gates[k]), f = GateSigmoid(gates[H + k]);
        const float g = std::tanh(gates[2 * H + k]), o = GateSigmoid(gates[3 * H + k]);
        c[k] = f * c[k] + i * g;
        h[k] = o * std::tanh(c[k]);
        logit += w_out_[k] * std::max(h[k], 0.0f);
      }
      probs.push_back(GateSigmoid(logit));
    }
  }
  return probs;
}

}  // namespace framemill::models
