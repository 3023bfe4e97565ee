#include "base/time_split.h"

#include <algorithm>

namespace framemill {
namespace {

thread_local TimeTally tally;
thread_local TimeSpent* innermost = nullptr;

int64_t& PartOf(TimeTally& t, TimePart part) {
  switch (part) {
    case TimePart::kDecode: return t.decode_us;
    case TimePart::kDevice: return t.device_us;
    case TimePart::kWait: break;
  }
  return t.wait_us;
}

}  // namespace

TimeTally ThreadTimeTally() { return tally; }

void AddThreadTime(TimePart part, int64_t us) {
  PartOf(tally, part) += us;
  if (innermost != nullptr) innermost->LeaveOut(us);
}

TimeSpent::TimeSpent(TimePart part)
    : part_(part), start_(std::chrono::steady_clock::now()), outer_(innermost) {
  innermost = this;
}

TimeSpent::~TimeSpent() {
  const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::steady_clock::now() - start_).count();
  innermost = outer_;
  PartOf(tally, part_) += std::max<int64_t>(0, us - inner_us_);
  if (outer_ != nullptr) outer_->LeaveOut(us);
}

JobTimeSplit ShareOfTally(const TimeTally& call, int64_t jobs, int64_t run_ms) {
  JobTimeSplit s;
  if (jobs <= 0) return s;
  auto share = [&](int64_t us) { return std::max<int64_t>(0, us) / 1000 / jobs; };
  s.decode_ms = std::min(run_ms, share(call.decode_us));
  s.device_ms = std::min(run_ms - s.decode_ms, share(call.device_us));
  s.wait_ms = std::min(run_ms - s.decode_ms - s.device_ms, share(call.wait_us));
  s.host_ms = std::max<int64_t>(0, run_ms - s.decode_ms - s.device_ms - s.wait_ms);
  return s;
}

}  // namespace framemill
