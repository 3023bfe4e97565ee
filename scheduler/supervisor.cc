#include "scheduler/supervisor.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <tbb/global_control.h>

#include <atomic>
#include <chrono>
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

constexpr int kExitInterrupted = 130;
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
int WorkerMain(const Config& config, const StageRegistry& registry, const RunRequest& req,
               int64_t run_id, int index) {
  std::string id = Hostname() + ":" + std::to_string(getpid()) + ":" +
                   std::to_string(SystemClock()->NowMs());
  auto store = OpenConfiguredStore(config, registry);
  auto hb = OpenConfiguredStore(config, registry);
  if (!store.ok() || !hb.ok()) {
    spdlog::error("worker {}: cannot open the job store: {}", index,
                  (!store.ok() ? store.status() : hb.status()).ToString());
    return 1;
  }
  Status reg = (*store)->RegisterWorker(id, run_id, getpid(), Hostname());
  if (!reg.ok()) spdlog::warn("worker {}: {}", index, reg.ToString());
  std::vector<std::string> warnings;
  auto gpu = MakeGpuRuntime(config.gpu, store->get(), SystemClock(), &warnings);
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
  WorkerOptions wo;
  wo.id = id;
  wo.stages = req.stages;
  wo.batch = config.run.batch;
  wo.batch_by_stage[kFetchStage] = config.fetch.batch;
  wo.lease_ms = config.run.lease_ms;
  wo.poll_ms = config.run.poll_ms;
  wo.forever = req.forever;
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
    return 1;
  }
  return 0;
}

pid_t SpawnWorker(const Config& config, const StageRegistry& registry, const RunRequest& req,
                  int64_t run_id, int index) {
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
                                    std::max(1, config.workers));
  cv::setNumThreads(share);
  tbb::global_control tbb_threads(tbb::global_control::max_allowed_parallelism,
                                  static_cast<size_t>(share));
  _exit(WorkerMain(config, registry, req, run_id, index));
}

}  // namespace

Result<std::unique_ptr<JobStore>> OpenConfiguredStore(const Config& config,
                                                      const StageRegistry& registry) {
  StoreOptions so;
  so.retry.base_delay_ms = config.run.retry_base_ms;
  so.retry.max_delay_ms = config.run.retry_max_ms;
  return OpenSqliteJobStore(config.db, &registry.graph(), SystemClock(), so);
}

int RunWorkers(const Config& config, const StageRegistry& registry, const RunRequest& req) {
  auto store = OpenConfiguredStore(config, registry);
  if (!store.ok()) {
    spdlog::error("cannot open the job store {}: {}", config.db, store.status().ToString());
    return 1;
  }
  std::string stage_list;
  for (const auto& s : req.stages) stage_list += (stage_list.empty() ? "" : ",") + s;
  auto run_id = (*store)->BeginRun(config.workers, stage_list);
  if (!run_id.ok()) {
    spdlog::error("{}", run_id.status().ToString());
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = ParentSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  const int n = std::min(config.workers, kMaxWorkers);
  spdlog::info("run #{}: {} worker(s), stages {}, batch {}, store {}", *run_id, n, stage_list,
               config.run.batch, config.db);
  std::map<pid_t, int> live;  // pid -> worker index
  for (int i = 0; i < n; ++i) {
    pid_t pid = SpawnWorker(config, registry, req, *run_id, i);
    if (pid < 0) {
      spdlog::error("fork failed: {}", std::strerror(errno));
      break;
    }
    g_children[i] = pid;
    g_nchildren = i + 1;
    live[pid] = i;
  }

  Progress progress(store->get(), req.stages, isatty(STDERR_FILENO) != 0);
  int respawns = 0;
  bool store_error = false;
  while (!live.empty()) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && live.count(pid)) {
      int index = live[pid];
      live.erase(pid);
      g_children[index] = 0;
      bool crashed = WIFSIGNALED(status) ||
                     (WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
                      WEXITSTATUS(status) != kExitInterrupted);
      if (WIFEXITED(status) && WEXITSTATUS(status) == 1) store_error = true;
      if (crashed && !g_stop) {
        spdlog::warn("worker {} (pid {}) {}; its jobs return to the queue when their lease "
                     "expires", index, pid,
                     WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                         : "exited with code " + std::to_string(WEXITSTATUS(status)));
        if (respawns < config.run.max_respawns) {
          ++respawns;
          pid_t np = SpawnWorker(config, registry, req, *run_id, index);
          if (np > 0) {
            g_children[index] = np;
            live[np] = index;
            store_error = false;
          }
        } else {
          spdlog::error("worker {} not replaced: {} replacements already (run.max_respawns)",
                        index, respawns);
        }
      }
      continue;
    }
    progress.Tick(false);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  progress.Tick(true);

  int code = 0;
  auto left = (*store)->CountOutstanding(req.stages);
  auto counts = (*store)->Counts(60'000);
  int64_t failed = 0;
  if (counts.ok())
    for (const auto& c : *counts)
      for (const auto& s : req.stages)
        if (c.stage == s) failed += c.failed;
  if (g_stop) {
    code = kExitInterrupted;
    spdlog::info("stopped; rerun `framemill run` to resume");
  } else if (store_error || !left.ok() || left->pending + left->running > 0) {
    code = 1;
    spdlog::error("workers stopped with work outstanding; rerun to resume");
  } else if (failed > 0) {
    code = 3;
  }
  (*store)->EndRun(*run_id, code);
  return code;
}

}  // namespace framemill
