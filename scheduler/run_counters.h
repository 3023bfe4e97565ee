// What a run's worker processes count for the run's metrics endpoint (`run --metrics`,
// scheduler/metrics_server.h): the seconds of each job they run, by stage and device, and
// their claims. In memory shared by the supervisor and its workers, mapped before the
// workers fork (as their deadlines are); lock-free, so a worker killed in the middle of
// an update leaves at most that one observation half counted.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace framemill {

class RunCounters {
 public:
  // Prometheus's default buckets stretched to the minutes a video job can take, in seconds.
  static constexpr std::array<double, 14> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                     1, 2.5, 5, 10, 30, 60, 300};
  static constexpr int kSeries = 256;  // (stage, device) pairs; more are not counted
  static constexpr int kNameBytes = 48;

  // One job of `stage` ran on `device` ("cpu", "cuda:0") for `seconds`.
  void ObserveJob(std::string_view stage, std::string_view device, double seconds);
  // A claim that leased `jobs` jobs (0: it found nothing).
  void ObserveClaim(int64_t jobs);

  struct Histogram {
    std::string stage, device;
    std::array<uint64_t, kBounds.size() + 1> buckets{};  // per bucket, the last one +Inf
    uint64_t count = 0;
    double sum_s = 0;
  };
  std::vector<Histogram> Histograms() const;
  uint64_t claims() const { return claims_.load(); }
  uint64_t claimed_jobs() const { return claimed_jobs_.load(); }

 private:
  struct Series {
    std::atomic<int> state{0};  // 0 free, 1 being named, 2 in use
    char stage[kNameBytes] = {0}, device[kNameBytes] = {0};
    std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets{};
    std::atomic<uint64_t> sum_us{0};
  };
  Series* Find(std::string_view stage, std::string_view device);

  std::array<Series, kSeries> series_;
  std::atomic<uint64_t> claims_{0}, claimed_jobs_{0};
};

// A RunCounters in anonymous shared memory, for a supervisor to map before it forks its
// workers; null when the kernel refuses.
RunCounters* MapRunCounters();
void UnmapRunCounters(RunCounters* counters);

}  // namespace framemill
