#include "base/clock.h"

#include <chrono>

namespace framemill {
namespace {
class WallClock : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};
}  // namespace

Clock* SystemClock() {
  static WallClock clock;
  return &clock;
}

}  // namespace framemill
