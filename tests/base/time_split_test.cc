// Where a job's time goes (base/time_split.h): each part counts its own wall time once, a
// scope inside another is left out of the outer one, and a stage call's tally is shared
// among its jobs with the rest of their time as `host`.
#include "base/time_split.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace framemill {
namespace {

void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST(TimeSplitTest, EachScopeAddsItsOwnTimeToItsPart) {
  const TimeTally before = ThreadTimeTally();
  {
    TimeSpent decoding(TimePart::kDecode);
    Sleep(20);
  }
  const TimeTally spent = ThreadTimeTally() - before;
  EXPECT_GE(spent.decode_us, 20'000);
  EXPECT_EQ(spent.device_us, 0);
  EXPECT_EQ(spent.wait_us, 0);
}

TEST(TimeSplitTest, AnInnerScopeIsCountedOnceInItsOwnPart) {
  const TimeTally before = ThreadTimeTally();
  {
    TimeSpent device(TimePart::kDevice);
    Sleep(20);
    {
      TimeSpent lock(TimePart::kWait);  // a lock taken inside a device batch
      Sleep(30);
    }
    Sleep(5);
    AddThreadTime(TimePart::kWait, 5'000);  // those 5 ms, as the part itself measured them
  }
  const TimeTally spent = ThreadTimeTally() - before;
  EXPECT_GE(spent.wait_us, 35'000);
  EXPECT_GE(spent.device_us, 20'000);
  // The device's own time leaves the 30 ms of the lock and the 5 ms added out.
  EXPECT_LT(spent.device_us, 20'000 + 25'000);
}

TEST(TimeSplitTest, ATallyIsThisThreadsOwn) {
  const TimeTally before = ThreadTimeTally();
  std::thread([] {
    TimeSpent decoding(TimePart::kDecode);
    Sleep(10);
  }).join();
  EXPECT_EQ((ThreadTimeTally() - before).decode_us, 0);
}

TEST(TimeSplitTest, ACallsTallyIsSharedAmongItsJobsWithTheRestAsHost) {
  const TimeTally call{40'000, 100'000, 10'000};  // us: decode, device, wait
  const JobTimeSplit s = ShareOfTally(call, 4, 50);
  EXPECT_EQ(s.decode_ms, 10);
  EXPECT_EQ(s.device_ms, 25);
  EXPECT_EQ(s.wait_ms, 2);
  EXPECT_EQ(s.host_ms, 50 - 10 - 25 - 2);
  // The parts never add up to more than the job's time (clock steps, rounding).
  const JobTimeSplit over = ShareOfTally({90'000, 90'000, 90'000}, 1, 100);
  EXPECT_EQ(over.decode_ms + over.device_ms + over.wait_ms + over.host_ms, 100);
  EXPECT_EQ(over.host_ms, 0);
  EXPECT_EQ(ShareOfTally(call, 0, 50).host_ms, 0);
}

}  // namespace
}  // namespace framemill
