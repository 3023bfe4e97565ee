// Silero VAD as framemill runs it (cv::dnn encoder + C++ LSTM decoder) against the shipped
// ONNX file on onnxruntime-node (tools/models/reference.mjs wrote the probabilities and the
// exact samples it fed: opencv-doc's Megamind.avi, 16 kHz mono).
#include "models/voice_activity.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "gpu/batch_tuner.h"
#include "gpu/oom_ladder.h"
#include "models/model_cache.h"
#include "models/run_model.h"
#include "tests/support/model_test_support.h"

namespace framemill::models {
namespace {

namespace fs = std::filesystem;

using testing::ReadF32;

TEST(VoiceActivityTest, MatchesOnnxRuntimeOnTheShippedModel) {
  FM_LOAD_MODEL_OR_SKIP(man, "silero-vad");
  const fs::path ref = fs::path(testing::GoldenDir()) / "reference" / "silero-vad";
  if (!fs::exists(ref / "probabilities.json")) {
    if (testing::ModelsRequired()) FAIL() << "no reference in " << ref;
    GTEST_SKIP() << "no reference in " << ref << " (tools/models/make_reference.sh)";
  }
  nlohmann::json j = nlohmann::json::parse(std::ifstream(ref / "probabilities.json"));
  const auto want = j["probabilities"].get<std::vector<float>>();
  const std::vector<float> audio = ReadF32(ref / "audio.f32");
  ASSERT_EQ(audio.size(), j["samples"].get<size_t>());

  auto vad = VoiceActivity::Open(man);
  ASSERT_TRUE(vad.ok()) << vad.status().ToString();
  auto got = (*vad)->Run(audio);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), want.size());
  double worst = 0;
  int speech = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, double{std::fabs((*got)[i] - want[i])});
    speech += want[i] > 0.5f;
  }
  std::printf("[golden] silero-vad: %zu windows, %d speech, max |p - onnxruntime| = %.3g\n",
              want.size(), speech, worst);
  EXPECT_LT(worst, 1e-3);
  // Megamind is mostly speech, with pauses: the reference is not degenerate.
  EXPECT_GT(speech, static_cast<int>(want.size() / 3));
  EXPECT_LT(speech, static_cast<int>(want.size()));
}

TEST(VoiceActivityTest, SilenceAndAToneAreNotSpeech) {
  FM_LOAD_MODEL_OR_SKIP(man, "silero-vad");
  auto vad = VoiceActivity::Open(man);
  ASSERT_TRUE(vad.ok()) << vad.status().ToString();
  std::vector<float> audio(16000 * 2, 0.0f);
  for (size_t i = 16000; i < audio.size(); ++i)
    audio[i] = 0.3f * static_cast<float>(std::sin(2 * std::numbers::pi * 1000.0 * i / 16000.0));
  auto p = (*vad)->Run(audio);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->size(), audio.size() / 512);
  for (float v : *p) EXPECT_LT(v, 0.5f);
  // A partial last window is not scored; no samples, no windows.
  EXPECT_EQ((*vad)->Run(std::span<const float>(audio.data(), 511))->size(), 0u);
}

// The encoder on our engine (the simulated device: the engine's CPU reference kernels behind
// a VRAM budget), sliced by the out-of-memory ladder, the decoder on the CPU: the same
// probabilities as cv::dnn's encoder. (Stepping down to the CPU is RunModel's, shared with
// images and tested there; the encoder's 0.7 MB of weights fit in any budget the simulated
// device takes.)
TEST(VoiceActivityTest, OnADeviceTheEncoderRunsOnTheEngine) {
  FM_LOAD_MODEL_OR_SKIP(man, "silero-vad");
  const fs::path ref = fs::path(testing::GoldenDir()) / "reference" / "silero-vad" / "audio.f32";
  std::vector<float> audio;
  if (fs::exists(ref)) {
    audio = ReadF32(ref);
  } else {  // a chirp in bursts: something for the encoder to see
    for (int i = 0; i < 16000 * 6; ++i)
      audio.push_back(((i / 4000) % 2 ? 0.3f : 0.0f) * std::sin(0.0002f * i * i / 16000.0f * 3000.0f));
  }
  auto cpu_vad = VoiceActivity::Open(man);
  ASSERT_TRUE(cpu_vad.ok()) << cpu_vad.status().ToString();
  auto want = (*cpu_vad)->Run(audio);
  ASSERT_TRUE(want.ok());
  auto device = gpu::MakeSimBackend(256);
  auto cpu = gpu::MakeCpuBackend();
  gpu::BatchTuner tuner(gpu::TunerOptions{}, nullptr);
  gpu::OomLadder ladder(device.get(), cpu.get(), &tuner, SystemClock(), gpu::LadderOptions{});
  ModelCache cache(testing::ModelsDir());
  auto encoder = cache.Borrow("silero-vad");
  ASSERT_TRUE(encoder.ok()) << encoder.status().ToString();
  auto vad = VoiceActivity::Open(man, /*with_encoder=*/false);
  ASSERT_TRUE(vad.ok());
  std::string where;
  auto got = (*vad)->Run(audio, [&](const gpu::Tensor& windows) {
    return RunModelOnTensor(cache, **encoder, windows, &ladder, &where, "AUDIO_SYNC");
  });
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(where, "sim:0");
  ASSERT_EQ(got->size(), want->size());
  double worst = 0;
  for (size_t i = 0; i < want->size(); ++i) worst = std::max(worst, double{std::fabs((*got)[i] - (*want)[i])});
  std::printf("[vad] encoder on %s: max |p - cv::dnn| = %.3g over %zu windows\n", where.c_str(), worst,
              want->size());
  EXPECT_LT(worst, 1e-3);
  // Opened without its encoder, the plain Run says so instead of crashing.
  auto bare = VoiceActivity::Open(man, /*with_encoder=*/false);
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE((*bare)->Run(audio).ok());
}

TEST(VoiceActivityTest, AModelWithoutADecoderIsCorruption) {
  FM_LOAD_MODEL_OR_SKIP(man, "selfie");
  auto vad = VoiceActivity::Open(man);
  ASSERT_FALSE(vad.ok());
  EXPECT_TRUE(vad.status().IsCorruption()) << vad.status().ToString();
}

}  // namespace
}  // namespace framemill::models
