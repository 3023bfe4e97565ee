// Time as the store and scheduler see it. Injected so leases, backoff and rescue
// are tested without sleeping. Implementations must be thread-safe.
#pragma once

#include <atomic>
#include <cstdint>

namespace framemill {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch (wall clock: leases are compared across processes).
  virtual int64_t NowMs() const = 0;
};

// The real wall clock. Stateless; one shared instance.
Clock* SystemClock();

// A clock that moves only when told to. Thread-safe.
class ManualClock : public Clock {
 public:
  explicit ManualClock(int64_t start_ms = 1'700'000'000'000) : now_(start_ms) {}
  int64_t NowMs() const override { return now_.load(); }
  void Advance(int64_t ms) { now_ += ms; }
  void Set(int64_t ms) { now_ = ms; }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace framemill
