#include "scheduler/supervisor.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <map>
#include <opencv2/core.hpp>
#include <thread>

#include "scheduler/gpu_runtime.h"
#include "scheduler/progress.h"
#include "scheduler/worker.h"
#include "storage/job_store.h"

namespace framemill {
namespace {

constexpr int kExitInterrupted = ToInt(ExitCode::kInterrupted);
constexpr int kExitStoreFailed = ToInt(ExitCode::kStoreFailed);
constexpr int kMaxWorkers = 1024;

std::atomic<bool> g_stop{false};
std::atomic<int> g_signals{0};
pid_t g_children[kMaxWorkers];  // read by the signal handler; 0 = empty slot
std::atomic<int> g_nchildren{0};

void ParentSignal(int) {
  int n = ++g_signals;
  g_stop = true;
  for (int i = 0; i < g_nchildren.load(); ++i) {
    if (g_children[i] > 0) kill(g_children[i], n == 1 ? SIGTERM : SIGKILL);
  }
  if (n >= 2) _exit(kExitInterrupted);  // leases expire; the next run rescues them
}

void ChildSignal(int) {
  if (++g_signals >= 2) _exit(kExitInterrupted);
  g_stop = true;
}

std::string Hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// Body of one worker process. Returns its exit code.
int WorkerMain(const RunOptions& options, const StageRegistry& registry, int64_t run_id,
               int index) {
  std::string id = Hostname() + ":" + std::to_string(getpid()) + ":" +
                   std::to_string(SystemClock()->NowMs());
  auto store = OpenJobStore(options.db, &registry.graph(), SystemClock(), options.store);
  auto hb = OpenJobStore(options.db, &registry.graph(), SystemClock(), options.store);
  if (!store.ok() || !hb.ok()) {
    spdlog::error("worker {}: cannot open the job store: {}", index,
                  (!store.ok() ? store.status() : hb.status()).ToString());
    return kExitStoreFailed;
  }
  Status reg = (*store)->RegisterWorker(id, run_id, getpid(), Hostname());
  if (!reg.ok()) spdlog::warn("worker {}: {}", index, reg.ToString());
  std::vector<std::string> warnings;
  auto gpu = MakeGpuRuntime(options.gpu, store->get(), SystemClock(), &warnings);
  // Every worker reaches the same verdict; one of them says it.
  if (index == 0) {
    for (const auto& w : warnings) spdlog::warn("{}", w);
    if (gpu->gpu != nullptr) {
      std::string on;
      for (const auto& d : gpu->plan.ops)
        if (d.use_gpu) on += (on.empty() ? "" : ",") + d.op;
      spdlog::info("device {}: {}", gpu->gpu->device(), on);
    }
  }
  WorkerOptions wo = options.worker;
  wo.id = id;
  wo.ladder = gpu->ladder.get();
  Worker worker(store->get(), hb->get(), &registry, SystemClock(), wo, &g_stop);
  Status s = worker.Run();
  (*store)->WorkerStopped(id);
  const WorkerStats& st = worker.stats();
  spdlog::debug("worker {} ({}) finished: {} done, {} failed, {} retried, {} stale, {} released,"
                " {} out-of-memory events, {} CPU fallbacks",
                index, id, st.done, st.failed, st.retried, st.stale, st.released, st.oom_events,
                st.cpu_fallbacks);
  if (s.IsAborted()) return kExitInterrupted;
  if (!s.ok()) {
    spdlog::error("worker {}: {}", index, s.ToString());
    return kExitStoreFailed;
  }
  return ToInt(ExitCode::kOk);
}

pid_t SpawnWorker(const RunOptions& options, const StageRegistry& registry, int64_t run_id,
                  int index) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid != 0) return pid;
  // Child: its own process group, so a terminal's Ctrl-C reaches only the supervisor,
  // which then asks each worker once; and a stop if the supervisor dies.
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  g_nchildren = 0;
  g_signals = 0;
  struct sigaction sa {};
  sa.sa_handler = ChildSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (getppid() == 1) _exit(kExitInterrupted);  // supervisor already gone
  // Parallelism comes from processes; OpenCV's and TBB's own threads get this
  // worker's share of the cores, or they would oversubscribe them.
  const int share = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                                    std::max(1, options.workers));
  cv::setNumThreads(share);
  tbb::global_control tbb_threads(tbb::global_control::max_allowed_parallelism,
                                  static_cast<size_t>(share));
  _exit(WorkerMain(options, registry, run_id, index));
}

// The parent's side of a run: its worker processes, their replacements, and the verdict.
class Supervisor {
 public:
  Supervisor(const RunOptions& options, const StageRegistry& registry, JobStore* store,
             int64_t run_id)
      : options_(options), registry_(registry), store_(store), run_id_(run_id) {}

  void StartWorkers() {
    const int n = std::min(options_.workers, kMaxWorkers);
    for (int i = 0; i < n; ++i) {
      pid_t pid = SpawnWorker(options_, registry_, run_id_, i);
      if (pid < 0) {
        spdlog::error("fork failed: {}", std::strerror(errno));
        break;
      }
      g_children[i] = pid;
      g_nchildren = i + 1;
      live_[pid] = i;
    }
  }

  // Until every worker has exited: progress, and a replacement for each that crashed.
  void Supervise() {
    Progress progress(store_, options_.worker.stages, isatty(STDERR_FILENO) != 0);
    while (!live_.empty()) {
      int status = 0;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid > 0 && live_.count(pid)) {
        Exited(pid, status);
        continue;
      }
      progress.Tick(false);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    progress.Tick(true);
  }

  ExitCode Verdict() {
    const std::vector<std::string>& stages = options_.worker.stages;
    auto left = store_->CountOutstanding(stages);
    auto counts = store_->Counts(60'000);
    int64_t failed = 0;
    if (counts.ok())
      for (const auto& c : *counts)
        if (std::find(stages.begin(), stages.end(), c.stage) != stages.end()) failed += c.failed;
    if (g_stop) {
      spdlog::info("stopped; rerun `framemill run` to resume");
      return ExitCode::kInterrupted;
    }
    if (store_error_ || !left.ok() || left->pending + left->running > 0) {
      spdlog::error("workers stopped with work outstanding; rerun to resume");
      return ExitCode::kStoreFailed;
    }
    return failed > 0 ? ExitCode::kSomeFailed : ExitCode::kOk;
  }

 private:
  void Exited(pid_t pid, int status) {
    const int index = live_[pid];
    live_.erase(pid);
    g_children[index] = 0;
    const bool crashed = WIFSIGNALED(status) ||
                         (WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
                          WEXITSTATUS(status) != kExitInterrupted);
    if (WIFEXITED(status) && WEXITSTATUS(status) == kExitStoreFailed) store_error_ = true;
    if (!crashed || g_stop) return;
    spdlog::warn("worker {} (pid {}) {}; its jobs return to the queue when their lease expires",
                 index, pid,
                 WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                     : "exited with code " + std::to_string(WEXITSTATUS(status)));
    if (respawns_ >= options_.max_respawns) {
      spdlog::error("worker {} not replaced: {} replacements already (run.max_respawns)", index,
                    respawns_);
      return;
    }
    ++respawns_;
    pid_t np = SpawnWorker(options_, registry_, run_id_, index);
    if (np > 0) {
      g_children[index] = np;
      live_[np] = index;
      store_error_ = false;
    }
  }

  const RunOptions& options_;
  const StageRegistry& registry_;
  JobStore* store_;
  int64_t run_id_;
  std::map<pid_t, int> live_;  // pid -> worker index
  int respawns_ = 0;
  bool store_error_ = false;
};

}  // namespace

ExitCode RunWorkers(const RunOptions& options, const StageRegistry& registry) {
  auto store = OpenJobStore(options.db, &registry.graph(), SystemClock(), options.store);
  if (!store.ok()) {
    spdlog::error("cannot open the job store {}: {}", options.db, store.status().ToString());
    return ExitCode::kStoreFailed;
  }
  std::string stage_list;
  for (const auto& s : options.worker.stages) stage_list += (stage_list.empty() ? "" : ",") + s;
  auto run_id = (*store)->BeginRun(options.workers, stage_list);
  if (!run_id.ok()) {
    spdlog::error("{}", run_id.status().ToString());
    return ExitCode::kStoreFailed;
  }
  struct sigaction sa {};
  sa.sa_handler = ParentSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  spdlog::info("run #{}: {} worker(s), stages {}, batch {}, store {}", *run_id,
               std::min(options.workers, kMaxWorkers), stage_list, options.worker.batch, options.db);
  Supervisor supervisor(options, registry, store->get(), *run_id);
  supervisor.StartWorkers();
  supervisor.Supervise();
  const ExitCode code = supervisor.Verdict();
  (*store)->EndRun(*run_id, ToInt(code));
  return code;
}

}  // namespace framemill
