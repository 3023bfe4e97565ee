// Where a job's wall time goes (issue 38): decoding media, kernels on a device, waiting
// (for a device, a lock, a model being opened, a decode another thread is doing), and the
// rest of the host's work. A user with a GPU asks this first: a device that waits for the
// host shows as a small `device` beside a large `decode` or `host`.
//
// Each thread keeps one running tally. The code that decodes, runs a device batch or waits
// opens a `TimeSpent` scope for its part; the worker reads the tally around each stage call
// and gives each job of the call its share (`host` is what is left of the job's time). A
// scope opened inside another (a lock taken inside a device batch) is counted once, in the
// inner part: the outer one leaves that time out.
// Thread-safety: the tally is the calling thread's own (thread_local).
#pragma once

#include <chrono>
#include <cstdint>

namespace framemill {

enum class TimePart { kDecode = 0, kDevice = 1, kWait = 2 };

// Microseconds spent in each part on this thread since it started.
struct TimeTally {
  int64_t decode_us = 0, device_us = 0, wait_us = 0;

  TimeTally operator-(const TimeTally& o) const {
    return {decode_us - o.decode_us, device_us - o.device_us, wait_us - o.wait_us};
  }
};

// This thread's tally so far.
TimeTally ThreadTimeTally();

// Adds microseconds to a part of this thread's tally directly (what a device measured
// itself, such as CUDA events; scopes below do the timing for everything else).
void AddThreadTime(TimePart part, int64_t us);

// Adds the wall time from its construction to its destruction to `part` of this thread's
// tally, less the time of scopes opened inside it.
class TimeSpent {
 public:
  explicit TimeSpent(TimePart part);
  ~TimeSpent();
  TimeSpent(const TimeSpent&) = delete;
  TimeSpent& operator=(const TimeSpent&) = delete;
  // Time counted elsewhere while this scope was open (an inner scope, AddThreadTime).
  void LeaveOut(int64_t us) { inner_us_ += us; }

 private:
  TimePart part_;
  std::chrono::steady_clock::time_point start_;
  int64_t inner_us_ = 0;  // time of the scopes opened inside this one
  TimeSpent* outer_;
};

// One job's split in milliseconds, as the store records it: `host` is the job's time less
// the other three (never below 0).
struct JobTimeSplit {
  int64_t decode_ms = 0, host_ms = 0, device_ms = 0, wait_ms = 0;
};

// A stage call's tally shared among the `jobs` it finished (as their run_ms is), each of
// whose time is `run_ms`.
JobTimeSplit ShareOfTally(const TimeTally& call, int64_t jobs, int64_t run_ms);

}  // namespace framemill
