// The device ledger over a real CUDA backend (gpu/shared_device.h): two processes, each a
// CUDA context on device 0 sharing a ledger whose total is set to 256 MiB, run LumaStats
// batches and engine allocations. Neither the ledger's peak nor what both say they hold
// passes 256 MiB; every batch that ran equals the CPU's; refusals are OutOfMemory. Skips
// without a device. The two processes are this binary exec'd again (kChildEnv).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <vector>

#include <opencv2/core.hpp>

#include "gpu/compute_backend.h"
#include "gpu/device_ledger.h"
#include "engine/kernels.h"
#include "gpu/shared_device.h"
#include <filesystem>

namespace framemill::gpu {
namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kTotal = 256 * kMiB;

struct Shared {
  std::atomic<int64_t> held[2];
  std::atomic<int64_t> refused, ran;
};

// The children are this test binary again (exec'd with this variable set to "K:DIR"): a
// process that has used CUDA cannot fork a child that uses it (the child's first call
// fails with an initialization error), and this process has, as every earlier device test
// of the binary has. framemill's supervisor never touches CUDA before it forks.
constexpr char kChildEnv[] = "FRAMEMILL_SHARED_CUDA_CHILD";

// The counters both children and the parent see: a file in the test's directory.
Shared* MapShared(const std::string& dir, bool create) {
  const std::string path = dir + "/shared";
  const int fd = open(path.c_str(), create ? O_RDWR | O_CREAT : O_RDWR, 0600);
  if (fd < 0) return nullptr;
  if (create && ftruncate(fd, sizeof(Shared)) != 0) {
    close(fd);
    return nullptr;
  }
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return nullptr;
  return create ? new (p) Shared{} : static_cast<Shared*>(p);
}

// One child: its own CUDA context on device 0 and a share of the ledger; the exit status
// says what went wrong (0: nothing).
int ChildMain(int k, const std::string& dir_path, Shared* shared) {
  auto ledger = DeviceLedger::Join(dir_path, "cuda:0", kTotal, 4);
  if (!ledger.ok()) return 10;
  auto cuda = MakeCudaBackend(0);
  if (!cuda.ok()) return 11;
  auto device = ShareDevice(std::move(cuda).value(), std::move(ledger).value());
  auto cpu = MakeCpuBackend();
  auto kernels = device->MakeEngineKernels();
  if (!kernels.ok()) return 12;
  cv::RNG rng(7 + k);
  for (int i = 0; i < 60; ++i) {
    // An engine buffer of 40-120 MiB held across a LumaStats batch of 8 frames.
    const int64_t n = (40 + rng.uniform(0, 80)) * kMiB;
    void* p = nullptr;
    Status a = (*kernels)->Alloc(static_cast<size_t>(n), &p);
    if (a.ok()) shared->held[k].fetch_add(n);
    else if (!a.IsOutOfMemory()) return 13;
    else shared->refused.fetch_add(1);
    std::vector<cv::Mat> frames(8, cv::Mat(1080, 1920, CV_8UC3));
    for (cv::Mat& f : frames) rng.fill(f, cv::RNG::UNIFORM, 0, 256);
    auto got = device->LumaStatsBatch(frames);
    if (got.ok()) {
      auto want = cpu->LumaStatsBatch(frames);
      for (size_t j = 0; j < frames.size(); ++j)
        if ((*got)[j].histogram != (*want)[j].histogram) return 14;
      shared->ran.fetch_add(1);
    } else if (!got.status().IsOutOfMemory()) {
      return 15;
    } else {
      shared->refused.fetch_add(1);
    }
    if (a.ok()) {
      shared->held[k].fetch_sub(n);
      (*kernels)->Free(p);
    }
  }
  return 0;
}

TEST(SharedCudaTest, TwoProcessesOnOneCudaDeviceStayWithinTheLedger) {
  if (const char* child = std::getenv(kChildEnv)) {  // one of the two children
    const std::string arg = child;
    const std::string dir = arg.substr(arg.find(':') + 1);
    Shared* shared = MapShared(dir, false);
    _exit(shared == nullptr ? 16 : ChildMain(std::atoi(arg.c_str()), dir, shared));
  }
  std::string why;
  if (CudaDevices(&why).empty()) GTEST_SKIP() << "no CUDA device: " << why;
  // framemill_gpu_tests travels alone (scripts/bundle-gpu.sh): no test_support here.
  char tmpl[] = "/tmp/framemill-shared-cuda-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir_path = tmpl;
  Shared* shared = MapShared(dir_path, true);
  ASSERT_NE(shared, nullptr);
  pid_t kids[2];
  for (int k = 0; k < 2; ++k) {
    kids[k] = fork();
    if (kids[k] != 0) continue;
    const std::string arg = std::to_string(k) + ":" + dir_path;
    setenv(kChildEnv, arg.c_str(), 1);
    execl("/proc/self/exe", "/proc/self/exe",
          "--gtest_filter=SharedCudaTest.TwoProcessesOnOneCudaDeviceStayWithinTheLedger", nullptr);
    _exit(17);
  }
  int64_t most = 0;
  for (int live = 2; live > 0;) {
    most = std::max(most, shared->held[0].load() + shared->held[1].load());
    for (pid_t& p : kids) {
      int status = 0;
      if (p > 0 && waitpid(p, &status, WNOHANG) == p) {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "wait status " << status << " (an exit status is ChildMain's)";
        p = 0;
        --live;
      }
    }
  }
  EXPECT_LE(most, kTotal);
  EXPECT_GT(shared->ran.load(), 0);
  auto view = DeviceLedger::Read(dir_path, "cuda:0");
  ASSERT_TRUE(view.ok() && view->has_value());
  EXPECT_LE((*view)->peak_planned_bytes, kTotal);
  std::printf("held at most %lld MiB of %lld; %lld batches ran, %lld refused\n",
              static_cast<long long>(most / kMiB), static_cast<long long>(kTotal / kMiB),
              static_cast<long long>(shared->ran.load()), static_cast<long long>(shared->refused.load()));
  munmap(shared, sizeof(Shared));
  std::filesystem::remove_all(dir_path);
}

}  // namespace
}  // namespace framemill::gpu
