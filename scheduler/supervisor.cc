#include "scheduler/supervisor.h"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <memory>
#include <opencv2/core.hpp>
#include <thread>

#include "engine/dnnl/dnnl_kernels.h"
#include "scheduler/gpu_runtime.h"
#include "scheduler/metrics_server.h"
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
// The read end of a pipe whose write end only the supervisor holds: when the supervisor
// dies, however it dies and whoever reaps it (init, systemd, tini), the workers see EOF.
int g_supervisor_alive_fd = -1;
int g_supervisor_alive_write = -1;

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

void InstallHandler(void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  // SIGHUP (the terminal or ssh session went away) ends a run as SIGTERM does.
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

bool SupervisorGone() {
  pollfd p{g_supervisor_alive_fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0;  // EOF (or HUP): every write end is closed
}

// Stops this worker when the supervisor dies; if the batch in hand does not end within
// `grace_ms` (a hung stage), exits anyway: its leases expire and a rerun rescues them.
void WatchSupervisor(int64_t grace_ms) {
  std::thread([grace_ms] {
    pollfd p{g_supervisor_alive_fd, POLLIN, 0};
    while (poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    g_stop = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(grace_ms));
    _exit(kExitInterrupted);
  }).detach();
}

// One slot per worker index, in memory shared with the workers (mapped before fork).
WorkerDeadline* MapDeadlines() {
  void* p = mmap(nullptr, sizeof(WorkerDeadline) * kMaxWorkers, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) WorkerDeadline[kMaxWorkers];
}

std::string Hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// Body of one worker process. Returns its exit code.
int WorkerMain(const RunOptions& options, const StageRegistry& registry, int64_t run_id,
               int index, WorkerDeadline* deadline) {
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
  for (const gpu::OpDecision& d : gpu->plan.ops)
    if (d.run_on_device) wo.device_ops.insert(d.op);
  wo.ledger = gpu->ledger.get();
  auto seat = MakeDeviceSeat(options.gpu, *gpu, store->get(), SystemClock());
  wo.seat = seat.get();
  wo.deadline = deadline;
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
    spdlog::error("worker {}: the job store {} failed: {}", index, RedactedUri(options.db), s.ToString());
    return kExitStoreFailed;
  }
  return ToInt(ExitCode::kOk);
}

// A worker must not hold the supervisor's listening sockets (the metrics endpoint's): a
// port stays bound while any process holds its socket, so a worker outliving its
// supervisor would keep the next run from serving there. Connected sockets (a log
// shipped to journald, say) stay.
void CloseInheritedListeners() {
  for (int fd = 3; fd < 1024; ++fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening) close(fd);
  }
}

// A worker allocates and frees the same frame-sized buffers item after item. glibc's
// defaults give memory above 128 KB back to the kernel at once (a fresh mmap, or a trim of
// the heap's top), so every frame paid page faults again: 8.5% of the motion stage's CPU
// (perf, Megamind.avi). Kept in the heap instead: allocations up to 32 MB (glibc's largest
// threshold) and up to 256 MB of free heap top. Measured in bench/README ("Claims sized by
// their work"): vtest.avi's motion job 2.8 s -> 2.45 s with 2 workers.
void KeepFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

pid_t SpawnWorker(const RunOptions& options, const StageRegistry& registry, int64_t run_id,
                  int index, WorkerDeadline* deadlines) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid != 0) return pid;
  // Child: its own process group, so a terminal's Ctrl-C reaches only the supervisor,
  // which then asks each worker once; and a stop if the supervisor dies.
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  g_nchildren = 0;
  g_signals = 0;
  InstallHandler(ChildSignal);
  // A worker writes to sockets (downloads) and pipes; a peer that goes away must fail
  // that write, not kill the process.
  signal(SIGPIPE, SIG_IGN);
  close(g_supervisor_alive_write);
  CloseInheritedListeners();
  if (SupervisorGone()) _exit(kExitInterrupted);
  WatchSupervisor(options.worker.lease_ms);
  WorkerDeadline* deadline = deadlines != nullptr ? &deadlines[index] : nullptr;
  if (deadline != nullptr) deadline->deadline_ms = 0;
  // Parallelism comes from processes; OpenCV's, TBB's and oneDNN's (OpenMP) own threads
  // get this worker's share of the cores, or they would oversubscribe them.
  const int share = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                                    std::max(1, options.workers));
  cv::setNumThreads(share);
  // A parent that ran a oneDNN primitive has a started OpenMP pool, which a forked child
  // would wait on forever: there, one thread (which OpenMP runs inline) keeps it safe.
  if (engine::InferenceStarted())
    spdlog::warn("worker {}: its parent ran inference before forking; oneDNN runs on one thread", index);
  engine::SetCpuInferenceThreads(engine::InferenceStarted() ? 1 : share);
  tbb::global_control tbb_threads(tbb::global_control::max_allowed_parallelism,
                                  static_cast<size_t>(share));
  KeepFreedMemory();
  _exit(WorkerMain(options, registry, run_id, index, deadline));
}

// The parent's side of a run: its worker processes, their replacements, the watch on
// their time budgets, and the verdict. It holds its store connection only between forks:
// a child must not inherit an open SQLite connection (SQLite's per-process lock
// bookkeeping would then be shared with the parent's), so it closes the connection
// before every fork and opens a fresh one after.
class Supervisor {
 public:
  Supervisor(const RunOptions& options, const StageRegistry& registry,
             std::unique_ptr<JobStore> store, int64_t run_id, WorkerDeadline* deadlines,
             MetricsServer* metrics)
      : options_(options),
        registry_(registry),
        store_(std::move(store)),
        run_id_(run_id),
        deadlines_(deadlines),
        metrics_(metrics) {}

  void StartWorkers() {
    const int n = std::min(options_.workers, kMaxWorkers);
    store_.reset();
    for (int i = 0; i < n; ++i) {
      if (!Spawn(i)) break;
    }
    Reopen();
  }

  // Until every worker has exited: progress, the budgets, and a replacement for each
  // worker that crashed or hung.
  void Supervise() {
    Progress progress(store_.get(), options_.worker.stages, isatty(STDERR_FILENO) != 0);
    while (!live_.empty()) {
      int status = 0;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid > 0 && live_.count(pid)) {
        Exited(pid, status);
        continue;
      }
      KillOverBudget();
      KillPastStopGrace();
      progress.Tick(store_.get(), false);
      if (metrics_ != nullptr) metrics_->Refresh(store_.get(), run_id_, static_cast<int>(live_.size()));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    progress.Tick(store_.get(), true);
  }

  ExitCode Verdict() {
    if (store_failed_) {
      spdlog::error("the job store {} failed (the cause is above); nothing is lost: the jobs in "
                    "flight go back to the queue. Fix the cause (free space, permissions) and "
                    "rerun `framemill run` to resume",
                    RedactedUri(options_.db));
      return ExitCode::kStoreFailed;
    }
    if (store_ == nullptr) return ExitCode::kStoreFailed;
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
    if (!left.ok()) {
      spdlog::error("the job store {} failed: {}", RedactedUri(options_.db), left.status().ToString());
      return ExitCode::kStoreFailed;
    }
    if (left->running == 0 && left->pending > 0 &&
        left->next_run_at > (left->now > 0 ? left->now : SystemClock()->NowMs()) +
                                options_.worker.horizon_ms) {
      spdlog::warn("{} job(s) wait for retries, the first due at {}, beyond run.horizon_ms; "
                   "rerun `framemill run` then (or use --forever)",
                   left->pending, FormatLocalTime(left->next_run_at));
      return ExitCode::kSomeFailed;
    }
    if (left->pending + left->running > 0) {
      spdlog::error("workers stopped with work outstanding; rerun to resume");
      return ExitCode::kStoreFailed;
    }
    return failed > 0 ? ExitCode::kSomeFailed : ExitCode::kOk;
  }

  JobStore* store() const { return store_.get(); }

 private:
  static std::string FormatLocalTime(int64_t ms) {
    const time_t t = static_cast<time_t>(ms / 1000);
    struct tm tm {};
    localtime_r(&t, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
  }

  bool Spawn(int index) {
    pid_t pid = SpawnWorker(options_, registry_, run_id_, index, deadlines_);
    if (pid < 0) {
      spdlog::error("fork failed: {}", std::strerror(errno));
      return false;
    }
    g_children[index] = pid;
    g_nchildren = std::max(g_nchildren.load(), index + 1);
    live_[pid] = index;
    return true;
  }

  void Reopen() {
    auto store = OpenJobStore(options_.db, &registry_.graph(), SystemClock(), options_.store);
    if (!store.ok()) {
      spdlog::error("the job store {} failed: {}", RedactedUri(options_.db), store.status().ToString());
      store_failed_ = true;
      StopAll();
      return;
    }
    store_ = std::move(store).value();
  }

  void StopAll() {
    for (const auto& [pid, index] : live_) kill(pid, SIGTERM);
  }

  // After a stop, a worker still busy past run.stop_grace_ms is killed; Exited gives its
  // jobs back with no attempt spent.
  void KillPastStopGrace() {
    if (!g_stop) return;
    const int64_t now = SteadyNowMs();
    if (stop_seen_ms_ < 0) stop_seen_ms_ = now;
    if (now - stop_seen_ms_ < options_.stop_grace_ms) return;
    for (const auto& [pid, index] : live_) {
      if (!stop_killed_.insert(pid).second) continue;
      spdlog::info("worker {} (pid {}) still busy {} ms after the stop (run.stop_grace_ms): killed; its "
                   "jobs go back with no attempt spent", index, pid, now - stop_seen_ms_);
      kill(pid, SIGKILL);
    }
  }

  // A worker whose stage batch is past its budget is hung: kill it (it cannot be asked,
  // its thread is stuck) and let Exited treat it as a crash.
  void KillOverBudget() {
    if (deadlines_ == nullptr) return;
    const int64_t now = SteadyNowMs();
    for (const auto& [pid, index] : live_) {
      const int64_t deadline = deadlines_[index].deadline_ms.load();
      if (deadline <= 0 || now <= deadline || over_budget_.count(pid)) continue;
      const int64_t budget = deadlines_[index].budget_ms.load();
      over_budget_[pid] = "its stage batch ran past its time budget of " +
                          std::to_string(budget) + " ms (run.job_budget_ms, run.batch_budget_ms)"
                          "; the worker was killed as hung";
      spdlog::warn("worker {} (pid {}): {}", index, pid, over_budget_[pid]);
      kill(pid, SIGKILL);
    }
  }

  void Exited(pid_t pid, int status) {
    const int index = live_[pid];
    live_.erase(pid);
    g_children[index] = 0;
    if (stop_killed_.erase(pid) > 0 && store_ != nullptr) {
      auto r = store_->ReleaseWorkerJobs(run_id_, pid);
      if (!r.ok()) spdlog::warn("could not give worker {}'s jobs back: {}", index, r.status().ToString());
    }
    if (deadlines_ != nullptr) deadlines_[index].deadline_ms = 0;
    auto hung = over_budget_.find(pid);
    if (hung != over_budget_.end()) {
      // Its jobs are suspects now, not when their leases run out: each runs again alone
      // and fails by itself after run.max_attempts.
      if (store_ != nullptr) {
        auto r = store_->RescueWorkerJobs(run_id_, pid, "timeout", hung->second);
        if (!r.ok()) spdlog::warn("could not rescue worker {}'s jobs: {}", index, r.status().ToString());
      }
      over_budget_.erase(hung);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == kExitStoreFailed) {
      // Not transient: replacing the worker would only fail again. Stop the run once.
      if (!store_failed_) StopAll();
      store_failed_ = true;
      if (store_ != nullptr) (void)store_->ReleaseWorkerJobs(run_id_, pid);
      return;
    }
    const bool crashed = WIFSIGNALED(status) ||
                         (WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
                          WEXITSTATUS(status) != kExitInterrupted);
    if (!crashed || g_stop || store_failed_) return;
    spdlog::warn("worker {} (pid {}) {}; its jobs return to the queue", index, pid,
                 WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                     : "exited with code " + std::to_string(WEXITSTATUS(status)));
    if (respawns_ >= options_.max_respawns) {
      spdlog::error("worker {} not replaced: {} replacements already (run.max_respawns)", index,
                    respawns_);
      return;
    }
    ++respawns_;
    store_.reset();
    Spawn(index);
    Reopen();
  }

  const RunOptions& options_;
  const StageRegistry& registry_;
  std::unique_ptr<JobStore> store_;  // null while forking
  int64_t run_id_;
  WorkerDeadline* deadlines_;        // shared with the workers; may be null
  MetricsServer* metrics_;           // run --metrics; may be null
  std::map<pid_t, int> live_;        // pid -> worker index
  std::map<pid_t, std::string> over_budget_;  // killed as hung -> why
  std::set<pid_t> stop_killed_;               // killed past the stop's grace
  int64_t stop_seen_ms_ = -1;                 // steady ms the supervisor saw the stop
  int respawns_ = 0;
  bool store_failed_ = false;
};

}  // namespace

ExitCode RunWorkers(const RunOptions& options, const StageRegistry& registry) {
  auto store = OpenJobStore(options.db, &registry.graph(), SystemClock(), options.store);
  if (!store.ok()) {
    spdlog::error("cannot open the job store {}: {}", RedactedUri(options.db), store.status().ToString());
    return ExitCode::kStoreFailed;
  }
  std::string stage_list;
  for (const auto& s : options.worker.stages) stage_list += (stage_list.empty() ? "" : ",") + s;
  auto run_id = (*store)->BeginRun(options.workers, stage_list);
  if (!run_id.ok()) {
    spdlog::error("the job store {} failed: {}", RedactedUri(options.db), run_id.status().ToString());
    return ExitCode::kStoreFailed;
  }
  int alive[2];
  if (pipe2(alive, O_CLOEXEC) != 0) {
    spdlog::error("pipe: {}", std::strerror(errno));
    return ExitCode::kStoreFailed;
  }
  g_supervisor_alive_fd = alive[0];
  g_supervisor_alive_write = alive[1];
  InstallHandler(ParentSignal);
  WorkerDeadline* deadlines = MapDeadlines();

  spdlog::info("run #{}: {} worker(s), stages {}, batch {}, store {}", *run_id,
               std::min(options.workers, kMaxWorkers), stage_list, options.worker.batch, RedactedUri(options.db));
  RunOptions run = options;
  std::unique_ptr<MetricsServer> metrics;
  if (!options.metrics.empty()) {
    run.worker.counters = MapRunCounters();
    auto server = MetricsServer::Start(options.metrics, run.worker.counters, LedgerDir(options.gpu));
    if (!server.ok()) {
      spdlog::error("{} (run.metrics, FRAMEMILL_METRICS, --metrics)", server.status().message());
      (void)(*store)->EndRun(*run_id, ToInt(ExitCode::kUsage));
      return ExitCode::kUsage;
    }
    metrics = std::move(server).value();
    spdlog::info("metrics: http://{}/metrics", metrics->address());
  }
  Supervisor supervisor(run, registry, std::move(store).value(), *run_id, deadlines, metrics.get());
  supervisor.StartWorkers();
  supervisor.Supervise();
  const ExitCode code = supervisor.Verdict();
  if (supervisor.store() != nullptr) (void)supervisor.store()->EndRun(*run_id, ToInt(code));
  close(alive[0]);
  close(alive[1]);
  if (deadlines != nullptr) munmap(deadlines, sizeof(WorkerDeadline) * kMaxWorkers);
  metrics.reset();
  UnmapRunCounters(run.worker.counters);
  return code;
}

}  // namespace framemill
