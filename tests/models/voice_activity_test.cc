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

#include "tests/support/model_test_support.h"

namespace framemill::models {
namespace {

namespace fs = std::filesystem;

std::vector<float> ReadF32(const fs::path& p) {
  std::ifstream in(p, std::ios::binary | std::ios::ate);
  std::vector<float> v(static_cast<size_t>(in.tellg()) / 4);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), v.size() * 4);
  return v;
}

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

TEST(VoiceActivityTest, AModelWithoutADecoderIsCorruption) {
  FM_LOAD_MODEL_OR_SKIP(man, "selfie");
  auto vad = VoiceActivity::Open(man);
  ASSERT_FALSE(vad.ok());
  EXPECT_TRUE(vad.status().IsCorruption()) << vad.status().ToString();
}

}  // namespace
}  // namespace framemill::models
