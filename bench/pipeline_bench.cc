// Orchestration overhead of `framemill run`: the real binary (worker processes,
// SQLite claims, leases, results) against a plain C++ loop that calls the same
// stage function on the same files with the same number of threads. The ratio of
// their throughputs is what the orchestrator costs.
//
//   build/pipeline_bench [--num=1000] [--workers=2] [--reps=3] [--max_side=640]
//                        [--benchmarks=plain_loop,framemill_run]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <opencv2/core.hpp>
#include <sqlite3.h>

#include "bench/bench_support.h"
#include "stages/lighting_stage.h"
#include "tests/support/test_support.h"

namespace fm = framemill;
using Clock = std::chrono::steady_clock;

namespace {

struct Flags {
  int num = 1000, workers = 2, reps = 3, max_side = 640;
  std::string benchmarks = "plain_loop,framemill_run";
};

double ChildrenCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}
double SelfCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

using fm::bench::CpuModel;

struct Measure {
  double wall_s = 0, cpu_s = 0;
};

// The same work as a worker does per job, minus the orchestration: one thread per
// "worker", each taking the next file from a shared counter.
Measure PlainLoop(const std::vector<std::string>& files, int threads) {
  fm::LightingStage stage(fm::LightingOptions{});
  std::atomic<size_t> next{0};
  std::atomic<int> failures{0};
  double cpu0 = SelfCpuSeconds();
  auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < files.size();) {
        fm::ClaimedJob job;
        job.id = static_cast<int64_t>(i);
        job.stage = "lighting";
        job.source = files[i];
        job.kind = fm::MediaKind::kImage;
        fm::Outcome out = stage.Run(job);
        // Serialise the result as the worker must, so both sides do the same work.
        std::string json = out.result.dump();
        if (!out.done() || json.size() < 10) ++failures;
      }
    });
  }
  for (auto& th : pool) th.join();
  Measure m{std::chrono::duration<double>(Clock::now() - t0).count(), SelfCpuSeconds() - cpu0};
  if (failures) std::fprintf(stderr, "plain_loop: %d failures\n", failures.load());
  return m;
}

int Run(const std::vector<std::string>& argv, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "a");
    dup2(fileno(f), 1);
    dup2(fileno(f), 2);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execv(a[0], a.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Measure FramemillRun(const std::string& dir, const std::string& media, int workers, int rep) {
  std::string db = dir + "/run-" + std::to_string(rep) + ".db";
  std::string log = dir + "/run.log";
  setenv("FRAMEMILL_DB", db.c_str(), 1);
  setenv("LOG_LEVEL", "warn", 1);
  setenv("FRAMEMILL_STAGES", "lighting", 1);  // the same work as PlainLoop
  if (Run({FRAMEMILL_BIN, "enqueue", media}, log) != 0) {
    std::fprintf(stderr, "enqueue failed, see %s\n", log.c_str());
    std::exit(1);
  }
  double cpu0 = ChildrenCpuSeconds();
  auto t0 = Clock::now();
  int code = Run({FRAMEMILL_BIN, "run", "--workers", std::to_string(workers)}, log);
  Measure m{std::chrono::duration<double>(Clock::now() - t0).count(), ChildrenCpuSeconds() - cpu0};
  if (code != 0) {
    std::fprintf(stderr, "framemill run exited %d, see %s\n", code, log.c_str());
    std::exit(1);
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (!fm::bench::ParseFlags("pipeline_bench", argc, argv,
                             {{"--num=", &f.num}, {"--workers=", &f.workers}, {"--reps=", &f.reps},
                              {"--max_side=", &f.max_side}, {"--benchmarks=", &f.benchmarks}}))
    return 2;
  fm::testing::TempDir dir;
  const std::string media = dir / "media";
  auto files = fm::testing::MakeRealImages(media, f.num, f.max_side);
  // Parallelism comes from the threads/processes, as in `framemill run`.
  cv::setNumThreads(1);

  time_t now = time(nullptr);
  std::printf("framemill pipeline_bench\n");
  std::printf("Date:       %s", ctime(&now));
  std::printf("CPU:        %u x %s\n", std::thread::hardware_concurrency(), CpuModel().c_str());
  std::printf("SQLite:     %s\n", sqlite3_libversion());
  std::printf("Workload:   lighting stage on %d real photos (crops of opencv-doc samples, "
              "longest side <= %d px, JPEG/PNG)\n", f.num, f.max_side);
  std::printf("Workers:    %d (framemill run processes) vs %d threads (plain loop)\n",
              f.workers, f.workers);
  std::printf("Reps:       %d, alternating; each framemill run uses a fresh store\n", f.reps);
  std::printf("------------------------------------------------------------------\n");

  bool do_plain = f.benchmarks.find("plain_loop") != std::string::npos;
  bool do_run = f.benchmarks.find("framemill_run") != std::string::npos;
  std::vector<double> plain, run, ratio;
  for (int r = 0; r < f.reps; ++r) {
    Measure p{}, m{};
    if (do_plain) {
      p = PlainLoop(files, f.workers);
      plain.push_back(f.num / p.wall_s);
      std::printf("plain_loop     rep %d: %8.1f items/s  %6.2f s  CPU %6.2f ms/item\n", r,
                  f.num / p.wall_s, p.wall_s, 1e3 * p.cpu_s / f.num);
    }
    if (do_run) {
      m = FramemillRun(dir.path(), media, f.workers, r);
      run.push_back(f.num / m.wall_s);
      std::printf("framemill_run  rep %d: %8.1f items/s  %6.2f s  CPU %6.2f ms/item\n", r,
                  f.num / m.wall_s, m.wall_s, 1e3 * m.cpu_s / f.num);
    }
    if (do_plain && do_run) {
      ratio.push_back(m.wall_s / p.wall_s);
      std::printf("               rep %d: run/plain wall-time ratio %.3f (overhead %+.1f%%), "
                  "CPU overhead %+.2f ms/item\n", r, m.wall_s / p.wall_s,
                  100 * (m.wall_s / p.wall_s - 1), 1e3 * (m.cpu_s - p.cpu_s) / f.num);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
  };
  std::printf("------------------------------------------------------------------\n");
  if (do_plain) std::printf("plain_loop     median %8.1f items/s\n", median(plain));
  if (do_run) std::printf("framemill_run  median %8.1f items/s\n", median(run));
  if (!ratio.empty())
    std::printf("overhead       median %+.1f%% (goal <= 5%%): run/plain wall-time ratio %.3f\n",
                100 * (median(ratio) - 1), median(ratio));
  return 0;
}
