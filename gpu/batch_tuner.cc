// Batch tuner: see batch_tuner.h for the contract.
//
// Per key the tuner walks a ladder of batch sizes. It starts at kStartBatch (or less
// when the budget forbids), and after every probe (an Observe() of the size it last
// proposed) compares the largest size measured, L, with the best throughput below L:
//   - nothing below L yet, or L improved on it by at least min_gain: grow. The step is
//     x4 while throughput still rises by >= kFastGain per doubling (overhead-bound, far
//     from saturation), x2 otherwise;
//   - otherwise growth has stopped: if the best size has an unmeasured neighbour on the
//     doubling ladder (a x4 step skipped it), measure that once; else settle.
// Growth also stops when the next size, clipped to max_batch, the memory budget and
// the OOM ceiling, is no larger than what was measured. After kMaxProbes probes the
// tuner settles regardless. Settling picks the size with the best observed throughput
// (the smaller on a tie) and saves it, with the bytes per item learned, to TunerMemory.
//
// Memory: bytes per item is the guess until Observe() reports bytes_used, then the
// largest bytes_used/batch seen (a fixed cost shows up in small batches, so this errs
// on the safe side). A proposal never exceeds budget*(1-headroom)/bytes_per_item
// (except that a batch is always at least 1).
//
// Out of memory at size B: sizes >= B are forbidden for the key from then on; a size
// that would reach B falls back to B/2 (what the ladder retries with); while probing,
// growth stops below B; a settled choice at or above B is re-settled at B/2 and saved.
//
// Observations of other sizes than the one proposed (the caller had fewer items at
// hand, a tail of a run) teach bytes per item but are not probes: they say nothing
// about larger sizes, and counting them would let small jobs settle on tiny batches.
#include "gpu/batch_tuner.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace framemill::gpu {
namespace {

constexpr int kStartBatch = 8;
// Throughput gain per doubling above which the tuner grows by x4 instead of x2.
constexpr double kFastGain = 1.5;
// Stand-in for a non-positive duration: "very fast".
constexpr double kMinSeconds = 1e-9;

int SaturatingInt(int64_t v) {
  if (v > std::numeric_limits<int>::max()) return std::numeric_limits<int>::max();
  if (v < std::numeric_limits<int>::min()) return std::numeric_limits<int>::min();
  return static_cast<int>(v);
}

}  // namespace

int SizeBucket(int64_t pixels_per_item) {
  constexpr int64_t kMegapixel = 1'000'000;
  int bucket = 0;
  int64_t limit = kMegapixel;
  while (limit < pixels_per_item && limit <= std::numeric_limits<int64_t>::max() / 2) {
    limit *= 2;
    ++bucket;
  }
  return bucket;
}

struct BatchTuner::State {
  bool settled = false;
  int settled_batch = 0;
  int64_t learned_bpi = 0;  // largest bytes_used/batch observed (or loaded); 0 = none
  int64_t last_guess = 0;   // the latest guess handed to Next()
  int ceiling = 0;          // sizes >= ceiling ran out of memory; 0 = none
  int proposed = 0;         // the size an Observe() must report to count as a probe
  int target = 0;           // the next size to try, before clipping
  int probe_count = 0;
  std::map<int, double> probes;  // batch -> best throughput (items/s) seen

  int64_t BytesPerItem() const { return learned_bpi > 0 ? learned_bpi : last_guess; }
  bool Forbidden(int batch) const { return ceiling > 0 && batch >= ceiling; }
  // The best measured size among those allowed, smaller on a tie; 0 when none.
  int Best() const {
    int best = 0;
    double best_t = -1;
    for (const auto& [b, t] : probes) {
      if (Forbidden(b)) continue;
      if (t > best_t) {
        best = b;
        best_t = t;
      }
    }
    return best;
  }
};

BatchTuner::BatchTuner(TunerOptions options, TunerMemory* memory)
    : options_(options), memory_(memory) {
  options_.min_batch = std::max(1, options_.min_batch);
  options_.max_batch = std::max(options_.min_batch, options_.max_batch);
  options_.headroom = std::clamp(options_.headroom, 0.0, 1.0);
  if (!(options_.min_gain >= 0)) options_.min_gain = 0;
}

BatchTuner::State& BatchTuner::Get(const TunerKey& key) const {
  auto it = states_.find(key);
  if (it != states_.end()) return *it->second;
  auto state = std::make_shared<State>();
  if (options_.fixed_batch <= 0 && memory_ != nullptr) {
    if (std::optional<TunedBatch> saved = memory_->Load(key); saved && saved->batch > 0) {
      state->settled = true;
      state->settled_batch = saved->batch;
      state->learned_bpi = std::max<int64_t>(0, saved->bytes_per_item);
    }
  }
  return *states_.emplace(key, std::move(state)).first->second;
}

int BatchTuner::Clip(const State& s, int batch, int64_t budget_bytes) const {
  int64_t b = std::clamp<int64_t>(batch, options_.min_batch, options_.max_batch);
  const int64_t bpi = s.BytesPerItem();
  if (budget_bytes > 0 && bpi > 0) {
    const auto usable =
        static_cast<int64_t>(std::floor(static_cast<double>(budget_bytes) * (1 - options_.headroom)));
    b = std::min(b, usable / bpi);
  }
  if (s.Forbidden(static_cast<int>(b))) b = std::min<int64_t>(b, s.ceiling / 2);
  return std::max(1, SaturatingInt(b));
}

int BatchTuner::Next(const TunerKey& key, int64_t budget_bytes, int64_t guess_bytes_per_item) {
  State& s = Get(key);
  if (guess_bytes_per_item > 0) s.last_guess = guess_bytes_per_item;
  if (options_.fixed_batch > 0) {
    // Tuning is off: the size is the user's, only an out-of-memory overrides it.
    int b = options_.fixed_batch;
    if (s.Forbidden(b)) b = s.ceiling / 2;
    return std::max(1, b);
  }
  if (!s.settled) {
    if (s.target == 0) s.target = std::max(kStartBatch, options_.min_batch);
    const int c = Clip(s, s.target, budget_bytes);
    const int largest = s.probes.empty() ? 0 : s.probes.rbegin()->first;
    const bool blocked = s.probes.count(c) > 0 || (c < s.target && c <= largest);
    if (!blocked) {
      s.proposed = c;
      return c;
    }
    // Max size, budget or OOM ceiling stop the growth: keep the best measured.
    Settle(key, s);
  }
  return Clip(s, s.settled_batch, budget_bytes);
}

void BatchTuner::Observe(const TunerKey& key, int batch, double seconds, int64_t bytes_used) {
  if (batch <= 0) return;
  State& s = Get(key);
  if (bytes_used > 0) {
    s.learned_bpi = std::max(s.learned_bpi, (bytes_used + batch - 1) / batch);
  }
  if (options_.fixed_batch > 0 || s.settled) return;
  if (batch != s.proposed || s.Forbidden(batch)) return;  // not a probe
  const double secs = seconds > 0 ? seconds : kMinSeconds;  // also catches NaN
  const double throughput = batch / secs;
  double& seen = s.probes[batch];
  seen = std::max(seen, throughput);
  ++s.probe_count;
  Decide(key, s);
}

void BatchTuner::ObserveOutOfMemory(const TunerKey& key, int batch) {
  if (batch <= 0) return;
  State& s = Get(key);
  s.ceiling = s.ceiling > 0 ? std::min(s.ceiling, batch) : batch;
  std::erase_if(s.probes, [&](const auto& p) { return s.Forbidden(p.first); });
  if (options_.fixed_batch > 0) return;
  const int half = std::max(1, batch / 2);
  if (s.settled) {
    // The settled size was the best measured, so throughput rose up to it: half of
    // the failed size beats anything measured below that.
    if (s.Forbidden(s.settled_batch)) SettleAt(key, s, half);
    return;
  }
  // The ladder retries the same items at half the size: that run is a probe too.
  s.proposed = half;
}

void BatchTuner::Decide(const TunerKey& key, State& s) {
  if (s.probes.empty()) return;
  if (s.probe_count >= TunerOptions::kMaxProbes) {
    Settle(key, s);
    return;
  }
  const auto [largest, t_largest] = *s.probes.rbegin();
  int below = 0;
  double t_below = -1;
  for (const auto& [b, t] : s.probes) {
    if (b < largest && t > t_below) {
      below = b;
      t_below = t;
    }
  }
  int factor = 0;
  if (below == 0) {
    factor = 2;
  } else if (t_largest >= t_below * (1 + options_.min_gain)) {
    const double doublings = std::log2(static_cast<double>(largest) / below);
    const double per_doubling = std::pow(t_largest / std::max(t_below, 1e-300), 1 / doublings);
    factor = per_doubling >= kFastGain ? 4 : 2;
  }
  if (factor == 0) {
    StopGrowing(key, s);
    return;
  }
  s.target = SaturatingInt(std::min<int64_t>(static_cast<int64_t>(largest) * factor,
                                             options_.max_batch));
}

void BatchTuner::StopGrowing(const TunerKey& key, State& s) {
  // Measure an unmeasured neighbour of the best size on the doubling ladder, once.
  const int best = s.Best();
  auto above = s.probes.upper_bound(best);
  auto below = s.probes.lower_bound(best);
  if (above != s.probes.end() && above->first / 2 > best) {
    const int up = best * 2;
    if (!s.probes.count(up) && !s.Forbidden(up)) {
      s.target = up;
      return;
    }
  }
  if (below != s.probes.begin() && std::prev(below)->first < best / 2) {
    const int down = best / 2;
    if (down >= options_.min_batch && !s.probes.count(down)) {
      s.target = down;
      return;
    }
  }
  Settle(key, s);
}

void BatchTuner::Settle(const TunerKey& key, State& s) {
  const int best = s.Best();
  SettleAt(key, s, best > 0 ? best : std::max(1, s.target));
}

void BatchTuner::SettleAt(const TunerKey& key, State& s, int batch) {
  s.settled = true;
  s.settled_batch = std::max(1, batch);
  if (memory_ != nullptr) {
    memory_->Save(key, TunedBatch{s.settled_batch, s.BytesPerItem()});
  }
}

bool BatchTuner::Settled(const TunerKey& key) const {
  return options_.fixed_batch > 0 || Get(key).settled;
}

int BatchTuner::probes(const TunerKey& key) const { return Get(key).probe_count; }

}  // namespace framemill::gpu
