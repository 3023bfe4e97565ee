// Chooses the batch size for one (operation, device, input-size bucket): learns the
// bytes one item costs from the first batches, grows the batch while throughput
// still improves and the memory budget allows, and settles within kMaxProbes
// probes. A settled choice is saved through TunerMemory so a restarted run does not
// probe again. `fixed_batch` (GPU_BATCH_SIZE) turns tuning off.
// Thread-safety: one tuner per worker thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <optional>
#include <string>

namespace framemill::gpu {

struct TunerKey {
  std::string op;      // "LIGHTING", "PREPROCESS", ...
  std::string device;  // "cuda:0", "sim:0", "cpu"
  int size_bucket = 0; // see SizeBucket()
  bool operator<(const TunerKey& o) const {
    return std::tie(op, device, size_bucket) < std::tie(o.op, o.device, o.size_bucket);
  }
};

// Megapixels rounded up to a power of two: inputs of similar size share a choice.
int SizeBucket(int64_t pixels_per_item);

struct TunedBatch {
  int batch = 0;
  int64_t bytes_per_item = 0;
};

// Where settled choices persist (the job store implements it; tests use a map).
class TunerMemory {
 public:
  virtual ~TunerMemory() = default;
  virtual std::optional<TunedBatch> Load(const TunerKey& key) = 0;
  virtual void Save(const TunerKey& key, const TunedBatch& tuned) = 0;
};

struct TunerOptions {
  int fixed_batch = 0;        // GPU_BATCH_SIZE; 0 = tune
  int min_batch = 1;
  int max_batch = 1024;       // also capped by the caller's items at hand
  double headroom = 0.15;     // fraction of the budget kept free
  double min_gain = 0.05;     // grow only while throughput improves by at least this
  static constexpr int kMaxProbes = 6;
};

class BatchTuner {
 public:
  BatchTuner(TunerOptions options, TunerMemory* memory /* may be null */);

  // The batch size to use next for `key`, given the bytes the device may use now
  // (free memory capped by GPU_MEMORY_LIMIT_GB) and a first guess of bytes per item.
  // Always >= 1. budget_bytes <= 0 means unknown (no budget cap); the guess is used
  // until an Observe() reports the bytes a batch really used.
  int Next(const TunerKey& key, int64_t budget_bytes, int64_t guess_bytes_per_item);
  // Reports how a batch went: items done, seconds taken, and the device bytes it
  // used (0 if unknown; the guess is kept then).
  void Observe(const TunerKey& key, int batch, double seconds, int64_t bytes_used);
  // An out-of-memory at `batch`: never propose that size (or more) again for key.
  void ObserveOutOfMemory(const TunerKey& key, int batch);

  // True once `key` has a choice (after probing, loaded from memory, or fixed_batch).
  bool Settled(const TunerKey& key) const;
  // Observations that counted as probes for `key` (0 when loaded or fixed).
  int probes(const TunerKey& key) const;

 private:
  struct State;
  State& Get(const TunerKey& key) const;  // creates the state, consulting memory once
  int Clip(const State& s, int batch, int64_t budget_bytes) const;
  void Decide(const TunerKey& key, State& s);
  void StopGrowing(const TunerKey& key, State& s);
  void Settle(const TunerKey& key, State& s);
  void SettleAt(const TunerKey& key, State& s, int batch);

  TunerOptions options_;
  TunerMemory* memory_;
  // Mutable so that Settled()/probes() can consult memory on a key's first use.
  mutable std::map<TunerKey, std::shared_ptr<State>> states_;
};

}  // namespace framemill::gpu
