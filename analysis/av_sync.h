// The signal side of audio-video sync: per-frame and per-window measurements turned into
// evenly sampled signals on one clock (the picture's: seconds from the first frame), and
// the offset between an audio and a visual signal found by normalised cross-correlation.
// Plain functions on values; thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace framemill {

// Values sampled every 1/rate seconds from t0 (seconds on the picture's clock).
struct SyncSignal {
  std::string name;  // "vad", "onset", "mouth", "lower_face", "frame"
  double t0 = 0;
  double rate = 100;
  std::vector<double> v;
  double end() const { return t0 + v.size() / rate; }
};

// Irregular samples (times ascending) linearly interpolated onto a grid of `rate` Hz from
// the first time to the last; empty for fewer than two samples.
SyncSignal Regrid(const std::string& name, const std::vector<double>& times,
                  const std::vector<double>& values, double rate);

// The audio's loudness: log10 of the mean energy in hops of 1/rate seconds ("energy"),
// hops quieter than `floor_db` (dBFS) held at the floor. `t0`: when samples[0] plays on the
// picture's clock.
SyncSignal EnergyEnvelope(const std::vector<float>& samples, int sample_rate, double t0, double rate,
                          double floor_db = -50);

// The audio's onset envelope: the energy's rise from one hop to the next (falls count
// zero), so a beep, a plosive or a hand clap peaks where it starts ("onset").
SyncSignal OnsetEnvelope(const SyncSignal& energy);

// Visual onsets per frame: the rise of the frame-to-frame change (motion energy), where the
// picture does not darken (a light going off ends an event; it does not start one) and not
// at a cut (a cut is not an event in the sound).
std::vector<double> VisualOnsets(const std::vector<double>& change, const std::vector<double>& luma,
                                 const std::vector<bool>& cut);

// The rise of a per-frame signal (falls count zero): a visual onset. `skip` marks values to
// ignore (shot cuts: a cut is not an event in the sound), which rise by zero.
std::vector<double> Rises(const std::vector<double>& values, const std::vector<bool>& skip = {});

// A centred moving average over `seconds` (what changes faster than the picture can show
// is noise to the comparison). NaN-aware: a value missing from the input stays missing.
SyncSignal Smooth(const SyncSignal& s, double seconds = 0.04);

// Whether a signal varies at all (its standard deviation is above `eps` times its mean
// magnitude): a constant signal cannot be correlated.
bool Varies(const SyncSignal& s, double eps = 1e-3);

struct SyncEstimate {
  bool found = false;      // false: too little overlap or a flat signal
  double offset_s = 0;     // positive: the audio lags the picture
  double peak = 0;         // the correlation at the offset (Pearson r, -1..1)
  double runner_up = 0;    // the best other local maximum of the correlation
  // (peak - runner_up) / peak, clamped to [0, 1], times min(1, peak / 0.3): a clear peak of
  // a weak correlation (r < 0.3 explains under a tenth of the variance) is trusted less.
  // 0 when peak <= 0 or at the edge of the search window.
  double confidence = 0;
  std::string signal;      // "<audio>+<visual>"
  std::string reason;      // why not found
};

struct SyncOptions {
  double max_lag_s = 1.0;        // offsets searched: [-max_lag_s, +max_lag_s]
  double min_overlap_s = 2.0;    // a lag needs this much of both signals together, in all
  double min_segment_s = 1.0;    // a segment counts at a lag where it overlaps this much
  double exclusion_s = 0.12;     // the runner-up is at least this far from the peak

  bool operator==(const SyncOptions&) const = default;
};

// The offset at which `audio` (shifted later by the offset) best matches `visual`: at every
// lag on the grid, Pearson's r over the overlap of the two, computed per segment of the
// visual signal (shots: each has its own face and scale) and pooled weighted by sample
// pairs; the peak refined below the grid step by a parabola through its neighbours.
// Signals must share a rate. `segments`: [from_s, to_s) parts of the visual signal;
// empty: all of it as one.
SyncEstimate EstimateOffset(const SyncSignal& audio, const SyncSignal& visual,
                            const SyncOptions& options,
                            const std::vector<std::pair<double, double>>& segments = {});

}  // namespace framemill
