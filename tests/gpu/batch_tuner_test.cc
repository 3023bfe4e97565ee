// BatchTuner against deterministic synthetic devices: a throughput model says how long
// a batch takes, a byte budget says when it runs out of memory. The loop in Drive()
// plays the out-of-memory ladder: ask Next(), run that many items, report Observe()
// or ObserveOutOfMemory() and retry at half the size.
#include "gpu/batch_tuner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace framemill::gpu {
namespace {

constexpr int64_t kMB = 1'000'000;

// TunerMemory backed by a map, counting saves.
class MapMemory : public TunerMemory {
 public:
  std::optional<TunedBatch> Load(const TunerKey& key) override {
    ++loads;
    auto it = saved.find(key);
    if (it == saved.end()) return std::nullopt;
    return it->second;
  }
  void Save(const TunerKey& key, const TunedBatch& tuned) override {
    ++saves;
    saved[key] = tuned;
  }
  std::map<TunerKey, TunedBatch> saved;
  int saves = 0, loads = 0;
};

// A synthetic device: seconds(batch), the bytes one item really uses, the free bytes
// it reports as the budget, and (optionally) a hidden hard limit on the batch.
struct Device {
  std::string name;
  std::function<double(int)> seconds;
  int64_t real_bytes_per_item = 1 * kMB;
  int64_t budget_bytes = 64'000 * kMB;
  int oom_at_or_above = std::numeric_limits<int>::max();  // hidden: not in the budget

  double Throughput(int b) const { return b / seconds(b); }
  bool Fits(int b) const {
    return b < oom_at_or_above && b * real_bytes_per_item <= budget_bytes;
  }
};

// seconds = overhead + batch * per_item: throughput rises, then saturates at 1/per_item.
std::function<double(int)> Saturating(double overhead, double per_item) {
  return [=](int b) { return overhead + b * per_item; };
}

// Like Saturating up to `peak`; beyond it each item costs (b/peak)^k times more (cache
// thrashing), so throughput peaks near `peak` and then falls.
std::function<double(int)> Peaked(double overhead, double per_item, int peak, double k) {
  return [=](int b) {
    const double slow = b > peak ? std::pow(static_cast<double>(b) / peak, k) : 1.0;
    return overhead + b * per_item * slow;
  };
}

struct Trace {
  std::vector<int> proposals;  // every Next() result
  std::vector<int> ooms;       // sizes that ran out of memory
  int batches = 0;
};

// Runs `rounds` ladder rounds of `items` items each for `key` on `dev`.
Trace Drive(BatchTuner& tuner, const TunerKey& key, const Device& dev, int rounds = 40,
            int items = 1 << 20, int64_t guess = -1) {
  Trace trace;
  if (guess < 0) guess = dev.real_bytes_per_item;
  for (int r = 0; r < rounds; ++r) {
    int b = std::min(tuner.Next(key, dev.budget_bytes, guess), items);
    trace.proposals.push_back(b);
    while (b >= 1) {
      if (dev.Fits(b)) {
        tuner.Observe(key, b, dev.seconds(b), b * dev.real_bytes_per_item);
        ++trace.batches;
        break;
      }
      trace.ooms.push_back(b);
      tuner.ObserveOutOfMemory(key, b);
      b /= 2;
    }
  }
  return trace;
}

// The best throughput of an exhaustive sweep over powers of two that the budget allows.
double BestSweep(const Device& dev, const TunerOptions& opt, int64_t bytes_per_item) {
  const auto usable = static_cast<int64_t>(dev.budget_bytes * (1 - opt.headroom));
  double best = 0;
  for (int b = 1; b <= opt.max_batch && b * bytes_per_item <= usable && dev.Fits(b); b *= 2) {
    best = std::max(best, dev.Throughput(b));
  }
  return best;
}

TunerKey Key(std::string op = "PREPROCESS", std::string device = "sim:0", int bucket = 1) {
  return TunerKey{std::move(op), std::move(device), bucket};
}

TEST(BatchTunerTest, SizeBucketRoundsMegapixelsUpToAPowerOfTwo) {
  EXPECT_EQ(SizeBucket(0), 0);
  EXPECT_EQ(SizeBucket(640 * 480), 0);
  EXPECT_EQ(SizeBucket(1'000'000), 0);
  EXPECT_EQ(SizeBucket(1'000'001), 1);
  EXPECT_EQ(SizeBucket(1920 * 1080), 2);  // 2.07 MP -> 4 MP
  EXPECT_EQ(SizeBucket(4'000'000), 2);
  EXPECT_EQ(SizeBucket(4000 * 3000), 4);  // 12 MP -> 16 MP
  EXPECT_EQ(SizeBucket(std::numeric_limits<int64_t>::max()), SizeBucket(std::numeric_limits<int64_t>::max()));
  EXPECT_LT(SizeBucket(std::numeric_limits<int64_t>::max()), 64);
}

// seconds = 20 ms + 0.5 ms/item, 10 MB/item, 8 GB free: the budget allows 680 items.
TEST(BatchTunerTest, ConvergesWithinSixProbesWhenThroughputSaturates) {
  MapMemory memory;
  TunerOptions opt;
  BatchTuner tuner(opt, &memory);
  Device dev{"saturating", Saturating(0.020, 0.0005), 10 * kMB, 8'000 * kMB};
  const TunerKey key = Key();
  Drive(tuner, key, dev);
  ASSERT_TRUE(tuner.Settled(key));
  EXPECT_LE(tuner.probes(key), TunerOptions::kMaxProbes);
  EXPECT_GE(tuner.probes(key), 2);
  const int chosen = tuner.Next(key, dev.budget_bytes, dev.real_bytes_per_item);
  EXPECT_GE(dev.Throughput(chosen), 0.9 * BestSweep(dev, opt, dev.real_bytes_per_item))
      << "chosen " << chosen;
  ASSERT_EQ(memory.saved.count(key), 1u);
  EXPECT_EQ(memory.saved[key].batch, chosen);
  EXPECT_EQ(memory.saved[key].bytes_per_item, dev.real_bytes_per_item);
}

// 10 ms + 0.2 ms/item up to 64 items; beyond, each item costs b/64 times more.
TEST(BatchTunerTest, SettlesOnThePeakWhenThroughputFallsPastIt) {
  BatchTuner tuner(TunerOptions{}, nullptr);
  Device dev{"peak64", Peaked(0.010, 0.0002, 64, 1.0), 1 * kMB};
  const TunerKey key = Key();
  Drive(tuner, key, dev);
  ASSERT_TRUE(tuner.Settled(key));
  EXPECT_LE(tuner.probes(key), TunerOptions::kMaxProbes);
  EXPECT_EQ(tuner.Next(key, dev.budget_bytes, dev.real_bytes_per_item), 64);
}

// A table of models: saturating with overhead/per-item ratios from 1 to 400 items,
// peaked at 16..512 with gentle (k=0.5) and steep (k=1) falls, each under a budget of
// 34, 200 or 64000 items. The choice must reach 90% of the best power of two the
// budget allows, within kMaxProbes probes, never running out of memory.
TEST(BatchTunerTest, ChoosesWithinNinetyPercentOfAnExhaustiveSweep) {
  std::vector<Device> devices;
  for (double ratio : {1.0, 8.0, 40.0, 100.0, 400.0}) {
    devices.push_back({"saturating o/p=" + std::to_string(ratio), Saturating(0.001 * ratio, 0.001)});
  }
  for (int peak : {16, 32, 64, 128, 256, 512}) {
    for (double k : {0.5, 1.0}) {
      for (double ratio : {4.0, 40.0}) {
        devices.push_back({"peak=" + std::to_string(peak) + " k=" + std::to_string(k) +
                               " o/p=" + std::to_string(ratio),
                           Peaked(0.001 * ratio, 0.001, peak, k)});
      }
    }
  }
  TunerOptions opt;
  int cases = 0;
  for (const Device& base : devices) {
    for (int64_t items_in_budget : {34, 200, 64000}) {
      Device dev = base;
      dev.real_bytes_per_item = 3 * kMB;
      dev.budget_bytes = static_cast<int64_t>(items_in_budget * dev.real_bytes_per_item / (1 - opt.headroom)) + 1;
      SCOPED_TRACE(dev.name + " budget items=" + std::to_string(items_in_budget));
      BatchTuner tuner(opt, nullptr);
      const TunerKey key = Key();
      const Trace trace = Drive(tuner, key, dev);
      ASSERT_TRUE(tuner.Settled(key));
      EXPECT_LE(tuner.probes(key), TunerOptions::kMaxProbes);
      EXPECT_TRUE(trace.ooms.empty());
      const int chosen = tuner.Next(key, dev.budget_bytes, dev.real_bytes_per_item);
      EXPECT_GE(dev.Throughput(chosen), 0.9 * BestSweep(dev, opt, dev.real_bytes_per_item))
          << "chosen " << chosen;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 87);
}

// The guess says 1 MB per item, the device really uses 4 MB: after the first batch
// every proposal fits budget*(1-headroom) at the real cost, and nothing runs out.
TEST(BatchTunerTest, RespectsTheBudgetAfterLearningRealBytesPerItemExceedTheGuess) {
  TunerOptions opt;
  BatchTuner tuner(opt, nullptr);
  Device dev{"saturating", Saturating(0.050, 0.0001), 4 * kMB, 400 * kMB};
  const TunerKey key = Key();
  const int64_t usable = static_cast<int64_t>(dev.budget_bytes * (1 - opt.headroom));
  const Trace trace = Drive(tuner, key, dev, 40, 1 << 20, /*guess=*/1 * kMB);
  ASSERT_GE(trace.proposals.size(), 2u);
  EXPECT_LE(trace.proposals[0] * 1 * kMB, usable);  // first: only the guess is known
  for (size_t i = 1; i < trace.proposals.size(); ++i) {
    EXPECT_LE(trace.proposals[i] * dev.real_bytes_per_item, usable) << "proposal " << i;
  }
  EXPECT_TRUE(trace.ooms.empty());
  ASSERT_TRUE(tuner.Settled(key));
  // The overhead dominates, so the budget is what limits the batch: 340 MB / 4 MB.
  EXPECT_EQ(tuner.Next(key, dev.budget_bytes, 1 * kMB), 85);
}

TEST(BatchTunerTest, NeverProposesMoreThanTheBudgetWhileProbingOrSettled) {
  TunerOptions opt;
  opt.headroom = 0.25;
  BatchTuner tuner(opt, nullptr);
  Device dev{"saturating", Saturating(0.5, 0.0001), 7 * kMB, 1'000 * kMB};
  const TunerKey key = Key();
  const Trace trace = Drive(tuner, key, dev);
  for (int b : trace.proposals) EXPECT_LE(b * 7 * kMB, 750 * kMB) << b;
  EXPECT_EQ(tuner.Next(key, dev.budget_bytes, 7 * kMB), 107);  // floor(750/7)
  // Less free memory later: the settled size shrinks to fit.
  EXPECT_EQ(tuner.Next(key, 100 * kMB, 7 * kMB), 10);  // floor(75/7)
  // Too little for even one item: still one (the ladder falls back to the CPU).
  EXPECT_EQ(tuner.Next(key, 1 * kMB, 7 * kMB), 1);
}

// A hidden limit at 48 items that neither the budget nor the guess shows.
TEST(BatchTunerTest, OutOfMemoryLowersTheCeilingAndThatSizeIsNeverProposedAgain) {
  MapMemory memory;
  BatchTuner tuner(TunerOptions{}, &memory);
  Device dev{"hidden-limit", Saturating(0.040, 0.0001), 1 * kMB};
  dev.oom_at_or_above = 48;
  const TunerKey key = Key();
  const Trace trace = Drive(tuner, key, dev);
  ASSERT_FALSE(trace.ooms.empty());
  const int first_oom = trace.ooms.front();
  EXPECT_GE(first_oom, 48);
  bool after = false;
  for (size_t i = 0; i < trace.proposals.size(); ++i) {
    if (after) {
      EXPECT_LT(trace.proposals[i], first_oom) << "proposal " << i;
    }
    if (trace.proposals[i] == first_oom) after = true;
  }
  EXPECT_EQ(trace.ooms.size(), 1u);  // one OOM, then it stays below
  ASSERT_TRUE(tuner.Settled(key));
  EXPECT_LE(tuner.probes(key), TunerOptions::kMaxProbes);
  const int chosen = tuner.Next(key, dev.budget_bytes, dev.real_bytes_per_item);
  EXPECT_LT(chosen, 48);
  EXPECT_GE(chosen, 16);
  EXPECT_EQ(memory.saved[key].batch, chosen);
}

TEST(BatchTunerTest, OutOfMemoryAtTheSettledSizeResettlesAtHalfAndSaves) {
  MapMemory memory;
  BatchTuner tuner(TunerOptions{}, &memory);
  Device dev{"peak64", Peaked(0.010, 0.0002, 64, 1.0), 1 * kMB};
  const TunerKey key = Key();
  Drive(tuner, key, dev);
  ASSERT_EQ(tuner.Next(key, dev.budget_bytes, kMB), 64);
  const int saves = memory.saves;
  tuner.ObserveOutOfMemory(key, 64);
  EXPECT_TRUE(tuner.Settled(key));
  EXPECT_EQ(tuner.Next(key, dev.budget_bytes, kMB), 32);
  EXPECT_EQ(memory.saves, saves + 1);
  EXPECT_EQ(memory.saved[key].batch, 32);
  // A size proposed before the OOM stays forbidden whatever the budget says.
  for (int i = 0; i < 5; ++i) {
    tuner.Observe(key, 32, dev.seconds(32), 32 * kMB);
    EXPECT_LT(tuner.Next(key, 1'000'000 * kMB, kMB), 64);
  }
}

TEST(BatchTunerTest, OutOfMemoryOnTheFirstBatchProbesBelowIt) {
  BatchTuner tuner(TunerOptions{}, nullptr);
  Device dev{"tiny", Saturating(0.010, 0.001), 1 * kMB};
  dev.oom_at_or_above = 5;
  const TunerKey key = Key();
  const Trace trace = Drive(tuner, key, dev);
  ASSERT_EQ(trace.ooms, std::vector<int>{8});
  ASSERT_TRUE(tuner.Settled(key));
  EXPECT_EQ(tuner.Next(key, dev.budget_bytes, kMB), 4);
}

TEST(BatchTunerTest, FixedBatchTurnsTuningOff) {
  MapMemory memory;
  memory.saved[Key()] = TunedBatch{128, kMB};  // a saved choice does not override it
  TunerOptions opt;
  opt.fixed_batch = 24;
  BatchTuner tuner(opt, &memory);
  const TunerKey key = Key();
  EXPECT_TRUE(tuner.Settled(key));
  for (int i = 0; i < 10; ++i) {
    // Even a budget that would allow only 2 items, or a huge one: the user's size.
    EXPECT_EQ(tuner.Next(key, i % 2 ? 2 * kMB : 1'000'000 * kMB, kMB), 24);
    tuner.Observe(key, 24, 0.001 * (i + 1), 24 * kMB);
  }
  EXPECT_EQ(tuner.probes(key), 0);
  EXPECT_EQ(memory.saves, 0);
  EXPECT_EQ(memory.saved[key].batch, 128);
}

TEST(BatchTunerTest, RestartedTunerWithTheSameMemoryStartsSettledWithoutProbing) {
  MapMemory memory;
  Device dev{"peak64", Peaked(0.010, 0.0002, 64, 1.0), 2 * kMB};
  const TunerKey key = Key("LIGHTING", "cuda:0", 3);
  {
    BatchTuner first(TunerOptions{}, &memory);
    Drive(first, key, dev);
    ASSERT_TRUE(first.Settled(key));
    ASSERT_GT(first.probes(key), 0);
  }
  ASSERT_EQ(memory.saved.count(key), 1u);
  const int saves = memory.saves;

  BatchTuner second(TunerOptions{}, &memory);
  EXPECT_TRUE(second.Settled(key));
  EXPECT_EQ(second.probes(key), 0);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(second.Next(key, dev.budget_bytes, dev.real_bytes_per_item), 64);
    second.Observe(key, 64, dev.seconds(64), 64 * dev.real_bytes_per_item);
  }
  EXPECT_EQ(second.probes(key), 0);
  EXPECT_EQ(memory.saves, saves);
  // The saved bytes per item still clip the saved size to a smaller budget, before
  // any batch has run: 85 MB usable / 2 MB.
  BatchTuner third(TunerOptions{}, &memory);
  EXPECT_EQ(third.Next(key, 100 * kMB, /*guess=*/1), 42);
}

TEST(BatchTunerTest, OperationsDevicesAndSizeBucketsAreTunedIndependently) {
  MapMemory memory;
  BatchTuner tuner(TunerOptions{}, &memory);
  struct Case {
    TunerKey key;
    Device dev;
    int expect;
  };
  std::vector<Case> cases = {
      {Key("PREPROCESS", "sim:0", 1), {"p16", Peaked(0.002, 0.0002, 16, 1.0), kMB}, 16},
      {Key("LIGHTING", "sim:0", 1), {"p64", Peaked(0.010, 0.0002, 64, 1.0), kMB}, 64},
      {Key("PREPROCESS", "sim:1", 1), {"p256", Peaked(0.050, 0.0002, 256, 1.0), kMB}, 256},
      {Key("PREPROCESS", "sim:0", 4), {"p32", Peaked(0.005, 0.0002, 32, 1.0), kMB}, 32},
  };
  // Interleave the keys batch by batch.
  for (int round = 0; round < 20; ++round) {
    for (Case& c : cases) Drive(tuner, c.key, c.dev, 1);
  }
  std::set<int> chosen;
  for (Case& c : cases) {
    SCOPED_TRACE(c.dev.name);
    ASSERT_TRUE(tuner.Settled(c.key));
    EXPECT_LE(tuner.probes(c.key), TunerOptions::kMaxProbes);
    EXPECT_EQ(tuner.Next(c.key, c.dev.budget_bytes, kMB), c.expect);
    EXPECT_EQ(memory.saved[c.key].batch, c.expect);
    chosen.insert(c.expect);
  }
  EXPECT_EQ(chosen.size(), cases.size());
  EXPECT_EQ(memory.saved.size(), cases.size());
  // An OOM on one key leaves the others alone.
  tuner.ObserveOutOfMemory(cases[2].key, 256);
  EXPECT_EQ(tuner.Next(cases[2].key, cases[2].dev.budget_bytes, kMB), 128);
  EXPECT_EQ(tuner.Next(cases[1].key, cases[1].dev.budget_bytes, kMB), 64);
}

TEST(BatchTunerTest, FlatThroughputSettlesEarlyOnTheSmallerSize) {
  BatchTuner tuner(TunerOptions{}, nullptr);
  Device dev{"flat", Saturating(0.0, 0.001), kMB};
  const TunerKey key = Key();
  Drive(tuner, key, dev);
  ASSERT_TRUE(tuner.Settled(key));
  EXPECT_EQ(tuner.probes(key), 2);
  EXPECT_EQ(tuner.Next(key, dev.budget_bytes, kMB), 8);
}

TEST(BatchTunerTest, NonPositiveOrNanSecondsCountAsVeryFastAndDoNotCrash) {
  for (double secs : {0.0, -1.0, std::nan("")}) {
    BatchTuner tuner(TunerOptions{}, nullptr);
    const TunerKey key = Key();
    for (int i = 0; i < 20; ++i) {
      const int b = tuner.Next(key, 0, 0);  // no budget, no guess: only max_batch caps
      ASSERT_GE(b, 1);
      ASSERT_LE(b, TunerOptions{}.max_batch);
      tuner.Observe(key, b, secs, 0);
    }
    EXPECT_TRUE(tuner.Settled(key));
    EXPECT_LE(tuner.probes(key), TunerOptions::kMaxProbes);
  }
}

// A job with only 3 items at a time runs 3-item batches: those say nothing about
// larger sizes, so they are not probes and the tuner must not settle on 3.
TEST(BatchTunerTest, BatchesSmallerThanProposedAreNotProbes) {
  MapMemory memory;
  BatchTuner tuner(TunerOptions{}, &memory);
  Device dev{"saturating", Saturating(0.020, 0.0005), kMB};
  const TunerKey key = Key();
  Drive(tuner, key, dev, 20, /*items=*/3);
  EXPECT_EQ(tuner.probes(key), 0);
  EXPECT_FALSE(tuner.Settled(key));
  EXPECT_EQ(memory.saves, 0);
  // With enough items it tunes as usual.
  Drive(tuner, key, dev);
  EXPECT_TRUE(tuner.Settled(key));
  EXPECT_GT(tuner.Next(key, dev.budget_bytes, kMB), 3);
}

TEST(BatchTunerTest, MaxBatchCapsTheChoice) {
  TunerOptions opt;
  opt.max_batch = 50;
  BatchTuner tuner(opt, nullptr);
  Device dev{"saturating", Saturating(1.0, 0.0001), kMB};
  const TunerKey key = Key();
  const Trace trace = Drive(tuner, key, dev);
  for (int b : trace.proposals) EXPECT_LE(b, 50);
  EXPECT_EQ(tuner.Next(key, dev.budget_bytes, kMB), 50);
}

}  // namespace
}  // namespace framemill::gpu
