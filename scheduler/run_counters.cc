#include "scheduler/run_counters.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <thread>

namespace framemill {

RunCounters::Series* RunCounters::Find(std::string_view stage, std::string_view device) {
  if (stage.size() >= kNameBytes || device.size() >= kNameBytes) return nullptr;
  for (Series& s : series_) {
    int state = s.state.load(std::memory_order_acquire);
    if (state == 0) {
      int expected = 0;
      if (s.state.compare_exchange_strong(expected, 1)) {
        std::memcpy(s.stage, stage.data(), stage.size());
        std::memcpy(s.device, device.data(), device.size());
        s.state.store(2, std::memory_order_release);
        return &s;
      }
      state = expected;
    }
    while (state == 1) {  // another process is naming it: a few stores away
      std::this_thread::yield();
      state = s.state.load(std::memory_order_acquire);
    }
    if (stage == s.stage && device == s.device) return &s;
  }
  return nullptr;
}

void RunCounters::ObserveJob(std::string_view stage, std::string_view device, double seconds) {
  Series* s = Find(stage, device);
  if (s == nullptr) return;
  const size_t b = static_cast<size_t>(
      std::lower_bound(kBounds.begin(), kBounds.end(), seconds) - kBounds.begin());
  s->sum_us.fetch_add(static_cast<uint64_t>(std::max(0.0, seconds) * 1e6), std::memory_order_relaxed);
  s->buckets[b].fetch_add(1, std::memory_order_release);
}

void RunCounters::ObserveClaim(int64_t jobs) {
  claims_.fetch_add(1, std::memory_order_relaxed);
  claimed_jobs_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, jobs)), std::memory_order_relaxed);
}

std::vector<RunCounters::Histogram> RunCounters::Histograms() const {
  std::vector<Histogram> out;
  for (const Series& s : series_) {
    if (s.state.load(std::memory_order_acquire) != 2) continue;
    Histogram h;
    h.stage = s.stage;
    h.device = s.device;
    // The count is the buckets' (a histogram's +Inf bucket must equal it); a sample under
    // way may show in its bucket before its sum.
    for (size_t b = 0; b < h.buckets.size(); ++b) h.count += h.buckets[b] = s.buckets[b].load();
    h.sum_s = static_cast<double>(s.sum_us.load()) / 1e6;
    out.push_back(std::move(h));
  }
  return out;
}

RunCounters* MapRunCounters() {
  void* p = mmap(nullptr, sizeof(RunCounters), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) RunCounters();
}

void UnmapRunCounters(RunCounters* counters) {
  if (counters != nullptr) munmap(counters, sizeof(RunCounters));
}

}  // namespace framemill
