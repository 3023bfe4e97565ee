// The signal side of audio-video sync on constructed signals, where the true offset is
// known exactly: events at irregular times seen by "picture" and "sound" with a lag.
#include "analysis/av_sync.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace framemill {
namespace {

// Irregular events (times in seconds) as bumps of `width_s` on a grid of `rate` Hz from t0.
SyncSignal Events(const std::string& name, const std::vector<double>& times, double lag_s,
                  double t0 = 0, double seconds = 12, double rate = 100, double width_s = 0.03) {
  SyncSignal s{name, t0, rate, std::vector<double>(static_cast<size_t>(seconds * rate), 0.0)};
  for (size_t i = 0; i < s.v.size(); ++i) {
    const double t = t0 + i / rate;
    for (double e : times) s.v[i] += std::exp(-0.5 * std::pow((t - e - lag_s) / width_s, 2));
  }
  return s;
}

const std::vector<double> kEvents = {0.9, 1.7, 2.45, 3.9, 4.3, 5.8, 6.2, 7.75, 8.3, 9.6, 10.4};

TEST(AvSyncTest, AKnownLagIsFoundBelowTheGridStep) {
  for (double lag : {0.0, 0.2345, -0.4712, 0.999 - 0.02}) {
    const SyncSignal audio = Events("onset", kEvents, lag);
    const SyncSignal visual = Events("frame", kEvents, 0);
    const SyncEstimate e = EstimateOffset(audio, visual, SyncOptions{});
    ASSERT_TRUE(e.found) << e.reason;
    EXPECT_NEAR(e.offset_s, lag, 0.003) << "lag " << lag;
    EXPECT_GT(e.peak, 0.95);
    EXPECT_GT(e.confidence, 0.6);  // eleven events: chance alignments of a few stay below
    EXPECT_EQ(e.signal, "onset+frame");
  }
}

TEST(AvSyncTest, ClocksThatStartApartAreAlignedByTheirStartTimes) {
  // The sound's grid starts 0.137 s after the picture's; the events are simultaneous.
  const SyncSignal audio = Events("onset", kEvents, 0, 0.137, 11);
  const SyncSignal visual = Events("frame", kEvents, 0, 0, 12);
  const SyncEstimate e = EstimateOffset(audio, visual, SyncOptions{});
  ASSERT_TRUE(e.found);
  EXPECT_NEAR(e.offset_s, 0, 0.003);
}

TEST(AvSyncTest, APeriodicSignalIsAmbiguousAndSaysSo) {
  std::vector<double> beat;
  for (double t = 0.5; t < 11.5; t += 0.4) beat.push_back(t);
  const SyncEstimate e = EstimateOffset(Events("onset", beat, 0.1), Events("frame", beat, 0), SyncOptions{});
  ASSERT_TRUE(e.found);
  EXPECT_LT(e.confidence, 0.1) << "every 0.4 s matches as well";
}

TEST(AvSyncTest, AFlatOrTooShortSignalIsNotAnEstimate) {
  SyncSignal flat{"frame", 0, 100, std::vector<double>(1200, 3.0)};
  EXPECT_FALSE(Varies(flat));
  const SyncEstimate e = EstimateOffset(Events("onset", kEvents, 0), flat, SyncOptions{});
  EXPECT_FALSE(e.found);
  EXPECT_FALSE(e.reason.empty());
  const SyncEstimate short_one =
      EstimateOffset(Events("onset", kEvents, 0), Events("frame", {0.5}, 0, 0, 1.0), SyncOptions{});
  EXPECT_FALSE(short_one.found);
}

TEST(AvSyncTest, AMatchBeyondTheSearchWindowHasNoConfidence) {
  // One broad event (a sentence and a head nod, say) 1.2 s apart: the correlation climbs
  // to the window's edge and the true peak lies beyond it.
  const SyncEstimate e = EstimateOffset(Events("vad", {5.0}, 1.2, 0, 12, 100, 0.4),
                                        Events("lower_face", {5.0}, 0, 0, 12, 100, 0.4), SyncOptions{});
  EXPECT_EQ(e.confidence, 0);
  EXPECT_NE(e.reason.find("edge"), std::string::npos) << e.reason;
}

TEST(AvSyncTest, ShotsAreCorrelatedApartAndPooled) {
  // Two shots whose picture signals differ a hundredfold in scale and offset (different
  // faces): pooled per shot, the lag is found; the shot boundaries are honoured.
  SyncSignal visual = Events("mouth", kEvents, 0);
  for (size_t i = 600; i < visual.v.size(); ++i) visual.v[i] = 50 + 100 * visual.v[i];
  const SyncSignal audio = Events("energy", kEvents, 0.31);
  const SyncEstimate e = EstimateOffset(audio, visual, SyncOptions{}, {{0, 6}, {6, 12}});
  ASSERT_TRUE(e.found);
  EXPECT_NEAR(e.offset_s, 0.31, 0.003);
  const SyncEstimate second = EstimateOffset(audio, visual, SyncOptions{}, {{6, 12}});
  ASSERT_TRUE(second.found);
  EXPECT_NEAR(second.offset_s, 0.31, 0.003);
}

TEST(AvSyncTest, MissingValuesAreLeftOutNotTakenAsZero) {
  SyncSignal visual = Events("mouth", kEvents, 0);
  for (size_t i = 300; i < 500; ++i) visual.v[i] = std::nan("");  // no face for 2 s
  EXPECT_TRUE(Varies(visual));
  const SyncEstimate e = EstimateOffset(Events("vad", kEvents, -0.2), visual, SyncOptions{});
  ASSERT_TRUE(e.found);
  EXPECT_NEAR(e.offset_s, -0.2, 0.003);
}

TEST(AvSyncTest, OnsetsRiseWhereASoundStartsAndTheFloorHidesNoise) {
  const int rate = 16000;
  std::vector<float> samples(rate * 2, 0.0f);
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 1e-4f);  // -80 dBFS: under the floor
  for (auto& s : samples) s = noise(rng);
  for (int i = rate; i < rate + 800; ++i) samples[i] += 0.5f * std::sin(2 * M_PI * 1000 * i / rate);
  const SyncSignal energy = EnergyEnvelope(samples, rate, 0.25, 100);
  EXPECT_EQ(energy.name, "energy");
  EXPECT_DOUBLE_EQ(energy.rate, 100);
  EXPECT_DOUBLE_EQ(energy.v[10], -5.0);  // the -50 dBFS floor
  const SyncSignal onset = OnsetEnvelope(energy);
  size_t peak = 0;
  for (size_t i = 0; i < onset.v.size(); ++i)
    if (onset.v[i] > onset.v[peak]) peak = i;
  EXPECT_NEAR(onset.t0 + peak / onset.rate, 1.25, 1e-9);  // t0 + 1 s
  EXPECT_GT(onset.v[peak], 3.5);
  for (size_t i = 0; i < onset.v.size(); ++i)
    if (i != peak) {
      EXPECT_LT(onset.v[i], 0.5) << i;  // the beep's end is no onset
    }
}

TEST(AvSyncTest, VisualOnsetsSkipDarkeningAndCuts) {
  // A flash on at 2, off at 5; a cut at 8; motion starting at 11.
  const std::vector<double> change = {0, 0, 80, 0, 0, 80, 0, 0, 60, 0, 0, 9, 9};
  const std::vector<double> luma = {10, 10, 200, 200, 200, 10, 10, 10, 90, 90, 90, 90, 90};
  std::vector<bool> cut(change.size(), false);
  cut[8] = true;
  const std::vector<double> on = VisualOnsets(change, luma, cut);
  EXPECT_EQ(on[2], 80);
  EXPECT_EQ(on[5], 0);  // the light going off
  EXPECT_EQ(on[8], 0);  // the cut
  EXPECT_EQ(on[11], 9);
  EXPECT_EQ(on[12], 0);  // steady motion does not rise
}

TEST(AvSyncTest, RegridInterpolatesAndSmoothingKeepsGapsOpen) {
  const SyncSignal s = Regrid("mouth", {1.0, 1.04, 1.08}, {0.0, 0.4, std::nan("")}, 100);
  ASSERT_EQ(s.v.size(), 9u);
  EXPECT_DOUBLE_EQ(s.t0, 1.0);
  EXPECT_NEAR(s.v[2], 0.2, 1e-12);
  EXPECT_TRUE(std::isnan(s.v[6]));
  const SyncSignal m = Smooth(s, 0.03);
  EXPECT_NEAR(m.v[2], 0.2, 1e-12);
  EXPECT_TRUE(std::isnan(m.v[7]));
}

}  // namespace
}  // namespace framemill
