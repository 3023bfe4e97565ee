// One device shared by several worker processes (gpu/device_ledger.h, gpu/shared_device.h):
// the members never plan more than the device has, each plans within its share, a member
// that dies is reaped with its memory, and a device takes at most workers_per_device.
#include "gpu/device_ledger.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "base/clock.h"
#include "gpu/batch_tuner.h"
#include "engine/kernels.h"
#include "gpu/oom_ladder.h"
#include "gpu/shared_device.h"
#include "tests/support/chaos.h"
#include "tests/support/test_support.h"

namespace framemill::gpu {
namespace {

using testing::TempDir;
constexpr int64_t kMiB = 1 << 20;

// What each child process says it holds, written where the parent reads it while they run:
// raised after a reservation succeeded, lowered before it is released.
struct Shared {
  std::atomic<int64_t> held[2];
  std::atomic<int64_t> granted[2], refused[2];
  std::atomic<int> started;
};

// Two processes, each a simulated device on one ledger of 64 MiB, allocate and free engine
// buffers of 8-30 MiB (seeded, the seed printed), holding up to three at once, as fast as
// they can: together they want up to 180 MiB. A third party (this test) adds up what they
// hold, again and again: never more than the device. Both must also have been refused
// (they really contended) and granted.
TEST(DeviceLedgerTest, TwoProcessesOnOneSimulatedDeviceNeverPlanMoreThanItHas) {
  TempDir dir;
  const uint32_t seed = testing::ChaosSeed();
  auto* shared = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
                                           MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(shared, MAP_FAILED);
  new (shared) Shared{};
  constexpr int64_t kTotal = 64 * kMiB;
  pid_t kids[2];
  for (int k = 0; k < 2; ++k) {
    kids[k] = fork();
    ASSERT_GE(kids[k], 0);
    if (kids[k] != 0) continue;
    auto ledger = DeviceLedger::Join(dir.path(), "sim:0", kTotal, 4);
    if (!ledger.ok()) _exit(10);
    std::shared_ptr<DeviceLedger> l = std::move(ledger).value();
    auto device = MakeSharedSimBackend(l);
    auto kernels = device->MakeEngineKernels();
    if (!kernels.ok()) _exit(11);
    std::mt19937 rng(seed + static_cast<uint32_t>(k));
    std::uniform_int_distribution<int64_t> size(8 * kMiB, 30 * kMiB);
    std::vector<std::pair<void*, int64_t>> live;
    shared->started.fetch_add(1);
    while (shared->started.load() < 2) std::this_thread::yield();
    for (int i = 0; i < 4000; ++i) {
      if (live.size() >= 3 || (!live.empty() && rng() % 2 == 0)) {
        auto [p, n] = live.back();
        live.pop_back();
        shared->held[k].fetch_sub(n);
        (*kernels)->Free(p);
        continue;
      }
      const int64_t n = size(rng) / 256 * 256;
      void* p = nullptr;
      Status s = (*kernels)->Alloc(static_cast<size_t>(n), &p);
      if (!s.ok()) {
        if (!s.IsOutOfMemory()) _exit(12);
        shared->refused[k].fetch_add(1);
        continue;
      }
      shared->granted[k].fetch_add(1);
      shared->held[k].fetch_add(n);
      live.emplace_back(p, n);
      if (l->View().planned_bytes > kTotal) _exit(13);
    }
    for (auto& [p, n] : live) {
      shared->held[k].fetch_sub(n);
      (*kernels)->Free(p);
    }
    _exit(0);
  }
  int64_t most = 0;
  int64_t samples = 0;
  std::vector<int> codes;
  for (;;) {
    most = std::max(most, shared->held[0].load() + shared->held[1].load());
    ++samples;
    bool any = false;
    for (pid_t p : kids) {
      int status = 0;
      pid_t w = waitpid(p, &status, WNOHANG);
      if (w == 0) any = true;
      if (w == p) codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    }
    if (!any) break;
  }
  ASSERT_EQ(codes.size(), 2u);
  for (int c : codes) EXPECT_EQ(c, 0);
  std::printf("held by both at once: at most %lld of %lld MiB over %lld samples; granted %lld+%lld, "
              "refused %lld+%lld\n",
              static_cast<long long>(most / kMiB), static_cast<long long>(kTotal / kMiB),
              static_cast<long long>(samples), static_cast<long long>(shared->granted[0].load()),
              static_cast<long long>(shared->granted[1].load()),
              static_cast<long long>(shared->refused[0].load()),
              static_cast<long long>(shared->refused[1].load()));
  EXPECT_LE(most, kTotal);
  for (int k = 0; k < 2; ++k) {
    EXPECT_GT(shared->granted[k].load(), 0) << k;
    EXPECT_GT(shared->refused[k].load(), 0) << k << ": never contended";
  }
  // Both left: the ledger has no member, and its peak was within the device.
  auto view = DeviceLedger::Read(dir.path(), "sim:0");
  ASSERT_TRUE(view.ok() && view->has_value());
  EXPECT_TRUE((*view)->members.empty());
  EXPECT_EQ((*view)->planned_bytes, 0);
  EXPECT_LE((*view)->peak_planned_bytes, kTotal);
  EXPECT_GT((*view)->peak_planned_bytes, kTotal / 2);
  munmap(shared, sizeof(Shared));
}

TEST(DeviceLedgerTest, EachMemberPlansWithinItsShareReSplitAsMembersComeAndGo) {
  TempDir dir;
  auto a = DeviceLedger::Join(dir.path(), "sim:0", 100 * kMiB, 4);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ((*a)->Available(), 100 * kMiB);
  {
    auto b = DeviceLedger::Join(dir.path(), "sim:0", 999 * kMiB, 4);  // the first total stays
    ASSERT_TRUE(b.ok());
    EXPECT_EQ((*b)->total_bytes(), 100 * kMiB);
    EXPECT_EQ((*a)->Available(), 50 * kMiB);
    ASSERT_TRUE((*b)->Reserve(80 * kMiB, "a big item").ok());  // past its share: the total allows
    EXPECT_EQ((*a)->Available(), 20 * kMiB) << "never more than is free";
    EXPECT_EQ((*b)->Available(), 0);
    Status s = (*a)->Reserve(30 * kMiB, "a batch of 3");
    EXPECT_TRUE(s.IsOutOfMemory()) << s.ToString();
    EXPECT_NE(s.message().find("2 worker process(es) share it"), std::string::npos) << s.message();
    EXPECT_EQ((*a)->View().members.size(), 2u);
  }  // b leaves, with what it planned
  EXPECT_EQ((*a)->Available(), 100 * kMiB);
  EXPECT_TRUE((*a)->Reserve(100 * kMiB, "everything").ok());
  EXPECT_EQ((*a)->peak_seen(), 100 * kMiB);
}

TEST(DeviceLedgerTest, AMemberThatDiesIsReapedWithItsMemory) {
  TempDir dir;
  auto me = DeviceLedger::Join(dir.path(), "cuda:0", 64 * kMiB, 4);
  ASSERT_TRUE(me.ok());
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    auto l = DeviceLedger::Join(dir.path(), "cuda:0", 64 * kMiB, 4);
    if (!l.ok() || !(*l)->Reserve(40 * kMiB, "held when it dies").ok()) _exit(1);
    char c = 1;
    (void)!write(ready[1], &c, 1);
    pause();  // killed holding its reservation: no destructor runs
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  EXPECT_EQ((*me)->View().members.size(), 2u);
  EXPECT_EQ((*me)->Available(), 24 * kMiB);  // min(share 32, free 24)
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ((*me)->Available(), 64 * kMiB);
  EXPECT_EQ((*me)->View().members.size(), 1u);
  EXPECT_EQ((*me)->View().planned_bytes, 0);
}

TEST(DeviceLedgerTest, ADeviceTakesAtMostWorkersPerDeviceMembers) {
  TempDir dir;
  auto a = DeviceLedger::Join(dir.path(), "sim:0", 8 * kMiB, 2);
  auto b = DeviceLedger::Join(dir.path(), "sim:0", 8 * kMiB, 2);
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = DeviceLedger::Join(dir.path(), "sim:0", 8 * kMiB, 2);
  ASSERT_TRUE(c.status().IsBusy()) << c.status().ToString();
  EXPECT_NE(c.status().message().find("gpu.workers_per_device"), std::string::npos);
  auto other = DeviceLedger::Join(dir.path(), "sim:1", 8 * kMiB, 2);  // another device: its own
  EXPECT_TRUE(other.ok());
  b->reset();
  EXPECT_TRUE(DeviceLedger::Join(dir.path(), "sim:0", 8 * kMiB, 2).ok()) << "a place came free";
  EXPECT_FALSE(DeviceLedger::Read(dir.path(), "cuda:7").value().has_value());
}

// The device is busy while any member has a batch on it, counted once however many overlap;
// a member that dies mid-batch ends its batch with it. The ladder marks each device slice.
TEST(DeviceLedgerTest, TheBusyTimeIsTheUnionOfTheMembersBatches) {
  TempDir dir;
  auto a = DeviceLedger::Join(dir.path(), "sim:0", 64 * kMiB, 4);
  auto b = DeviceLedger::Join(dir.path(), "sim:0", 64 * kMiB, 4);
  ASSERT_TRUE(a.ok() && b.ok());
  auto sleep = [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
  const int64_t t0 = (*a)->BusyNs();
  EXPECT_EQ(t0, 0);
  (*a)->SetWorking(true);
  sleep(40);
  (*b)->SetWorking(true);  // overlaps a's batch
  sleep(40);
  (*a)->SetWorking(false);
  sleep(40);
  (*b)->SetWorking(false);
  sleep(60);  // idle: not counted
  const int64_t busy = (*a)->BusyNs();
  EXPECT_GE(busy, 120'000'000);
  EXPECT_LT(busy, 180'000'000) << "overlapping batches count once, idle time not at all";
  EXPECT_EQ((*b)->BusyNs(), busy) << "every member reads the device's one count";
  EXPECT_EQ(DeviceLedger::Read(dir.path(), "sim:0").value()->busy_ns / 1'000'000, busy / 1'000'000);

  // A member that dies with a batch on the device: the next one to take the lock ends it.
  pid_t child = fork();
  if (child == 0) {
    auto l = DeviceLedger::Join(dir.path(), "sim:0", 64 * kMiB, 4);
    if (!l.ok()) _exit(1);
    (*l)->SetWorking(true);
    _exit(0);  // no destructor runs
  }
  waitpid(child, nullptr, 0);
  (*a)->Available();  // reaps
  const int64_t after = (*a)->BusyNs();
  sleep(50);
  EXPECT_EQ((*a)->BusyNs(), after) << "no batch is left on the device";

  // The ladder marks its device slices: busy while a batch runs, not between batches.
  auto device = MakeSharedSimBackend(std::move(a).value());
  BatchTuner tuner({}, nullptr);
  auto cpu = MakeCpuBackend();
  OomLadder ladder(device.get(), cpu.get(), &tuner, SystemClock(), {});
  std::vector<std::string> device_of;
  const int64_t before = (*b)->BusyNs();
  ASSERT_TRUE(ladder.Run("LIGHTING", 1, 64, 1024, [&](ComputeBackend&, size_t, size_t) {
                      sleep(30);
                      return Status::OK();
                    }, &device_of).ok());
  EXPECT_EQ(device_of[0], "sim:0");
  EXPECT_GE((*b)->BusyNs() - before, 30'000'000);
}

// The tuner is told the share, not the device: with four members on 64 MiB, a worker's
// batches of LumaStats (1.5 MiB an item here) stay within 16 MiB, with no out-of-memory.
TEST(DeviceLedgerTest, TheTunerPlansWithinTheWorkersShare) {
  TempDir dir;
  std::vector<std::shared_ptr<DeviceLedger>> members;
  for (int i = 0; i < 4; ++i) members.push_back(DeviceLedger::Join(dir.path(), "sim:0", 64 * kMiB, 4).value());
  auto sim = MakeSharedSimBackend(members[0]);
  EXPECT_EQ(sim->Info()->free_bytes, 16 * kMiB);
  EXPECT_EQ(sim->Info()->total_bytes, 64 * kMiB);
  auto cpu = MakeCpuBackend();
  ManualClock clock;
  BatchTuner tuner(TunerOptions{}, nullptr);
  OomLadder ladder(sim.get(), cpu.get(), &tuner, &clock, LadderOptions{});
  std::vector<cv::Mat> images(200, cv::Mat(512, 1024, CV_8UC3, cv::Scalar(10, 200, 30)));
  const int64_t per_item = LumaStatsBytesPerItem(images[0]);
  int most = 0;
  std::vector<std::string> device_of;
  Status s = ladder.Run("LIGHTING", images.size(), 512 * 1024, per_item,
                        [&](ComputeBackend& b, size_t begin, size_t end) -> Status {
                          most = std::max(most, static_cast<int>(end - begin));
                          std::vector<cv::Mat> part(images.begin() + static_cast<long>(begin),
                                                    images.begin() + static_cast<long>(end));
                          return b.LumaStatsBatch(part).status();
                        },
                        &device_of);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ladder.stats().oom_events, 0);
  EXPECT_GT(most, 1);
  EXPECT_LE(most * per_item, 16 * kMiB) << most << " items of " << per_item << " bytes";
  EXPECT_EQ(std::count(device_of.begin(), device_of.end(), "sim:0"), 200);
}

// A worker whose share is used up is told so (a budget of nothing, not "unknown"): it tries
// one item, not the tuner's first batch of 8, and the ladder takes it from there.
TEST(DeviceLedgerTest, AWorkerWithNothingLeftTriesOneItemAtATime) {
  TempDir dir;
  auto mine = std::shared_ptr<DeviceLedger>(DeviceLedger::Join(dir.path(), "sim:0", 64 * kMiB, 4).value());
  auto other = DeviceLedger::Join(dir.path(), "sim:0", 64 * kMiB, 4).value();
  ASSERT_TRUE(other->Reserve(64 * kMiB, "everything").ok());
  auto sim = MakeSharedSimBackend(mine);
  EXPECT_EQ(sim->Info()->free_bytes, 0);
  auto cpu = MakeCpuBackend();
  ManualClock clock;
  BatchTuner tuner(TunerOptions{}, nullptr);
  OomLadder ladder(sim.get(), cpu.get(), &tuner, &clock, LadderOptions{});
  std::vector<cv::Mat> images(10, cv::Mat(64, 64, CV_8UC3, cv::Scalar(1, 2, 3)));
  int largest_on_device = 0;
  std::vector<std::string> device_of;
  Status s = ladder.Run("LIGHTING", images.size(), 64 * 64, LumaStatsBytesPerItem(images[0]),
                        [&](ComputeBackend& b, size_t begin, size_t end) -> Status {
                          if (b.is_gpu()) largest_on_device = std::max(largest_on_device, static_cast<int>(end - begin));
                          std::vector<cv::Mat> part(images.begin() + static_cast<long>(begin),
                                                    images.begin() + static_cast<long>(end));
                          return b.LumaStatsBatch(part).status();
                        },
                        &device_of);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(largest_on_device, 1);
  EXPECT_EQ(ladder.stats().oom_events, 3) << "three refusals in a row, then the cool-down";
  EXPECT_EQ(ladder.stats().cpu_fallback_items, 10);
  EXPECT_EQ(std::count(device_of.begin(), device_of.end(), "cpu"), 10);
}

}  // namespace
}  // namespace framemill::gpu
