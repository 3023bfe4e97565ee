#include "analysis/av_sync_signals.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace framemill {
namespace {

// Faces in fewer frames than this share are not a speaker to follow: their signals are left out.
constexpr double kMinFaceFraction = 0.25;

// Speech probability per VAD window, placed at the window's centre on the picture's clock.
SyncSignal VadSignal(const std::vector<float>& probs, const AudioTrack& a, int window) {
  std::vector<double> t(probs.size()), v(probs.size());
  for (size_t k = 0; k < probs.size(); ++k) {
    t[k] = a.start_offset_s + (k * window + window / 2.0) / a.sample_rate;
    v[k] = probs[k];
  }
  return Regrid("vad", t, v, kSyncGridHz);
}

std::string CsvOf(const std::vector<const SyncSignal*>& signals) {
  double t0 = 1e18, t1 = -1e18;
  for (const SyncSignal* s : signals)
    if (!s->v.empty()) t0 = std::min(t0, s->t0), t1 = std::max(t1, s->end());
  std::string csv = "time_s";
  for (const SyncSignal* s : signals) csv += "," + s->name;
  csv += "\n";
  char buf[64];
  for (double t = t0; t < t1; t += 1 / kSyncGridHz) {
    std::snprintf(buf, sizeof buf, "%.3f", t);
    csv += buf;
    for (const SyncSignal* s : signals) {
      const double x = (t - s->t0) * s->rate;
      const long i = std::lround(x);
      csv += ",";
      if (i >= 0 && i < static_cast<long>(s->v.size()) && !std::isnan(s->v[i])) {
        std::snprintf(buf, sizeof buf, "%.5g", s->v[i]);
        csv += buf;
      }
    }
    csv += "\n";
  }
  return csv;
}

// How directly a pair shows speech: the mouth first, then the lower face's motion, then
// whole-frame onsets (the fallbacks where no mouth is seen).
// Loudness against lip aperture is the finest-grained pair; speech probability (32 ms
// windows, smoothed by the VAD's recurrence, saturated through continuous speech) backs it up.
int Tier(const SyncEstimate& e) {
  const std::string visual = e.signal.substr(e.signal.find('+') + 1);
  if (visual == "mouth") return e.signal == "energy+mouth" ? 0 : 1;
  return visual.rfind("lower_face", 0) == 0 ? 2 : 3;
}

}  // namespace

Signals MakeSignals(const SoundSeries& sound, const VisualSeries& visual) {
  const AudioTrack& a = *sound.audio;
  Signals s;
  s.vad = VadSignal(*sound.speech, a, sound.window);
  s.energy = EnergyEnvelope(a.samples, a.sample_rate, a.start_offset_s, kSyncGridHz);
  s.onset = OnsetEnvelope(s.energy);
  s.energy_smooth = Smooth(s.energy);
  s.frame = Regrid("frame", visual.times, VisualOnsets(visual.frame, visual.luma, visual.cut), kSyncGridHz);
  const double frames = static_cast<double>(visual.times.size());
  if (visual.frames_with_face >= kMinFaceFraction * frames) {
    s.face.push_back(Regrid("lower_face", visual.times, visual.lower_face, kSyncGridHz));
    s.face.push_back(Regrid("lower_face_onsets", visual.times, Rises(visual.lower_face, visual.cut), kSyncGridHz));
  }
  if (visual.frames_with_mouth >= kMinFaceFraction * frames) {
    s.face.push_back(Regrid("mouth", visual.times, visual.mouth, kSyncGridHz));
    s.mouth_smooth = Smooth(s.face.back());
  }
  return s;
}

std::vector<Candidate> Compare(const Signals& s, const SyncOptions& so,
                               const std::vector<std::pair<double, double>>& shots) {
  std::vector<std::pair<const SyncSignal*, const SyncSignal*>> pairs;
  for (const SyncSignal& f : s.face) pairs.push_back({f.name == "lower_face_onsets" ? &s.onset : &s.vad, &f});
  if (s.mouth_smooth) pairs.push_back({&s.energy_smooth, &*s.mouth_smooth});
  pairs.push_back({&s.onset, &s.frame});
  std::vector<Candidate> out;
  for (auto [a, v] : pairs)
    if (Varies(*a) && Varies(*v)) out.push_back({a, v, EstimateOffset(*a, *v, so, shots)});
  return out;
}

const Candidate* Best(const std::vector<Candidate>& all) {
  const Candidate* best = nullptr;
  auto better = [](const SyncEstimate& e, const Candidate* b) {
    return b == nullptr || e.confidence > b->estimate.confidence + 1e-9 ||
           (std::fabs(e.confidence - b->estimate.confidence) <= 1e-9 && e.peak > b->estimate.peak);
  };
  for (int tier = 0; tier < 4 && best == nullptr; ++tier)
    for (const Candidate& c : all)
      if (c.estimate.found && c.estimate.confidence > 0 && Tier(c.estimate) == tier &&
          better(c.estimate, best))
        best = &c;
  if (best != nullptr) return best;
  for (const Candidate& c : all)
    if (c.estimate.found && better(c.estimate, best)) best = &c;
  return best;
}

std::vector<std::pair<double, double>> Shots(const VisualSeries& visual, double fps) {
  std::vector<double> bounds = {visual.times.front()};
  for (size_t i = 0; i < visual.cut.size(); ++i)
    if (visual.cut[i]) bounds.push_back(visual.times[i]);
  bounds.push_back(visual.times.back() + 1 / std::max(fps, 1.0));
  std::vector<std::pair<double, double>> shots;
  for (size_t s = 0; s + 1 < bounds.size(); ++s) shots.push_back({bounds[s], bounds[s + 1]});
  return shots;
}

std::vector<ShotEstimate> ShotEstimates(const SyncSignal& a, const SyncSignal& v,
                                        const std::vector<std::pair<double, double>>& shots,
                                        const SyncOptions& so, double min_shot_s) {
  std::vector<ShotEstimate> out;
  for (auto [from, to] : shots) {
    if (to - from < min_shot_s) continue;
    SyncOptions shot = so;
    shot.min_overlap_s = std::min(so.min_overlap_s, 0.5 * (to - from));
    out.push_back({from, to, EstimateOffset(a, v, shot, {{from, to}})});
  }
  return out;
}

std::string SeriesCsv(const Signals& s) {
  std::vector<const SyncSignal*> series = {&s.vad, &s.energy, &s.onset, &s.frame};
  for (const SyncSignal& f : s.face) series.push_back(&f);
  return CsvOf(series);
}

}  // namespace framemill
