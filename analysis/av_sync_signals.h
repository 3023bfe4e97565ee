// The comparison side of audio-video sync (the audio_sync stage's algorithm, on what the stage
// read): the sound's and the picture's series made signals on one 10 ms grid, each pair that
// varies on both sides cross-correlated (analysis/av_sync.h), the most direct usable pair
// chosen, and the shots between cuts. Plain functions on values; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/av_sync.h"
#include "media/audio_reader.h"

namespace framemill {

constexpr double kSyncGridHz = 100;  // every signal is compared on a 10 ms grid

// What the picture gives per decoded frame.
struct VisualSeries {
  std::vector<double> times;
  std::vector<double> frame;       // mean |frame - previous| over the whole frame, 0..255
  std::vector<double> luma;        // mean luma of the frame, 0..255
  std::vector<double> lower_face;  // the same within the largest face's lower half; NaN: no face
  std::vector<double> mouth;       // inner-lip gap over mouth width (facemesh); NaN: no face
  std::vector<bool> cut;           // a new shot starts at this frame
  std::vector<int64_t> cuts;       // source frame indices of the cuts
  int64_t frames_with_face = 0;
  int64_t frames_with_mouth = 0;
};

// What the sound gives: the track and the speech probability per VAD window.
struct SoundSeries {
  const AudioTrack* audio = nullptr;
  const std::vector<float>* speech = nullptr;
  int window = 512;  // samples per VAD window
};

// Every signal on the 10 ms grid of the picture's clock.
struct Signals {
  SyncSignal vad, energy, onset, energy_smooth;  // the sound
  SyncSignal frame;                              // whole-frame visual onsets
  std::vector<SyncSignal> face;                  // lower_face, lower_face_onsets, mouth (when seen)
  std::optional<SyncSignal> mouth_smooth;
};

// The signals of the sound and the picture. A face seen in fewer than a quarter of the frames
// is not a speaker to follow: its signals are left out.
Signals MakeSignals(const SoundSeries& sound, const VisualSeries& visual);

// One pair of signals compared.
struct Candidate {
  const SyncSignal* audio;
  const SyncSignal* visual;
  SyncEstimate estimate;
};

// Each pair that varies on both sides, cross-correlated: the lower face's motion with speech,
// its rises with onsets, loudness with the mouth (both smoothed to about a frame), whole-frame
// onsets with onsets.
std::vector<Candidate> Compare(const Signals& s, const SyncOptions& so,
                               const std::vector<std::pair<double, double>>& shots);
// The estimate to report: from the most direct visual signal that gave a usable peak (one
// inside the search window), the clearest (highest confidence, then peak) of its pairs;
// when none is usable, the clearest found at all. Null when none was found.
const Candidate* Best(const std::vector<Candidate>& all);

// The shots as [start, end) on the picture's clock: split at the cuts.
std::vector<std::pair<double, double>> Shots(const VisualSeries& visual, double fps);
// An estimate per shot of at least min_shot_s, from one pair of signals.
struct ShotEstimate {
  double start_s = 0, end_s = 0;
  SyncEstimate estimate;
};
std::vector<ShotEstimate> ShotEstimates(const SyncSignal& a, const SyncSignal& v,
                                        const std::vector<std::pair<double, double>>& shots,
                                        const SyncOptions& so, double min_shot_s);

// The signals on one grid, a line per 10 ms: time, then each signal (empty where it has no
// value): the sound's, the whole frame's, the face's.
std::string SeriesCsv(const Signals& s);

}  // namespace framemill
