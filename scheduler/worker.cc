#include "scheduler/worker.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "jobs/failure.h"

namespace framemill {
namespace {

constexpr int64_t kTailPollMs = 25;

// Renews leases every third of their length until told to stop.
class HeartbeatThread {
 public:
  HeartbeatThread(JobStore* store, std::string worker, int64_t lease_ms)
      : store_(store), worker_(std::move(worker)), lease_ms_(lease_ms) {
    if (store_ != nullptr) thread_ = std::thread([this] { Loop(); });
  }
  ~HeartbeatThread() {
    {
      std::lock_guard<std::mutex> l(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    while (!cv_.wait_for(l, std::chrono::milliseconds(lease_ms_ / 3), [this] { return done_; })) {
      l.unlock();
      auto r = store_->Heartbeat(worker_, lease_ms_);
      if (!r.ok()) spdlog::warn("heartbeat failed: {}", r.status().ToString());
      l.lock();
    }
  }
  JobStore* store_;
  std::string worker_;
  int64_t lease_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// The size in MB of a job's file; 0 for a URL not yet fetched or a file gone.
double SourceMegabytes(const ClaimedJob& job) {
  struct stat st {};
  if (job.source.find("://") != std::string::npos || stat(job.source.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_size) / (1 << 20);
}

constexpr int64_t kCostRefreshMs = 10'000;  // how often a worker reads others' job times
constexpr int64_t kCostHistory = 256;       // each stage's newest done jobs read each time
constexpr double kTailShare = 4;            // at the tail a claim keeps target / this
constexpr int64_t kBusyRecordMs = 5'000;     // how often a device worker records its busy time

// The distinct items of a claim.
int ItemsOf(const std::vector<ClaimedJob>& jobs) {
  std::set<int64_t> items;
  for (const ClaimedJob& j : jobs) items.insert(j.item_id);
  return static_cast<int>(items.size());
}

}  // namespace

int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t JobBudget::For(const std::vector<ClaimedJob>& group) const {
  if (job_ms <= 0 || group.empty()) return 0;
  double ms = static_cast<double>(batch_ms);
  auto extra = extra_by_stage.find(group.front().stage);
  if (extra != extra_by_stage.end()) ms += static_cast<double>(extra->second);
  for (const ClaimedJob& j : group)
    ms += static_cast<double>(job_ms) + static_cast<double>(per_mb_ms) * SourceMegabytes(j);
  return static_cast<int64_t>(ms);
}

Worker::Worker(JobStore* store, JobStore* heartbeat_store, const StageRegistry* registry,
               const Clock* clock, WorkerOptions options, const std::atomic<bool>* stop)
    : store_(store),
      heartbeat_store_(heartbeat_store),
      registry_(registry),
      clock_(clock),
      options_(std::move(options)),
      stop_(stop),
      rng_(std::random_device{}()) {
  ladder_ = options_.ladder;
  if (ladder_ == nullptr) {
    own_ladder_ = std::make_unique<gpu::CpuLadder>(clock_);
    ladder_ = own_ladder_->get();
  }
  NewPictureCache();
}

void Worker::NewPictureCache() {
  // A device worker decodes ahead on threads of its own, so the device does not wait for
  // the host; a CPU worker's cores are busy with its own work and the other workers'.
  PictureCacheOptions pictures = options_.pictures;
  pictures.threads = ladder_->gpu() != nullptr ? options_.decode_threads : 0;
  pictures_decoded_before_ = stats_.pictures_decoded;
  pictures_reused_before_ = stats_.pictures_reused;
  pictures_ = std::make_unique<PictureCache>(pictures);
}

void Worker::SleepFor(int64_t ms) {
  // In slices, so a stop request is noticed promptly; an enqueue, promotion or release
  // anywhere (PostgreSQL's NOTIFY) ends the wait at once.
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!stop_->load()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          until - std::chrono::steady_clock::now()).count();
    if (left <= 0) return;
    auto woke = store_->WaitForWork(std::min<int64_t>(left, 50));
    if (woke.ok() && *woke) return;
  }
}

Status Worker::Run() {
  HeartbeatThread heartbeat(heartbeat_store_, options_.id, options_.lease_ms);
  // The run's devices name their workers from the start, not from a first batch, and their
  // busy time counts from the moment this worker joined.
  if (options_.ledger != nullptr) RecordGpuEvents(ladder_->stats(), /*busy_now=*/true);
  Status s = Loop();
  if (options_.ledger != nullptr) RecordGpuEvents(ladder_->stats(), /*busy_now=*/true);
  return s;
}

Status Worker::Loop() {
  while (!stop_->load()) {
    MaybeJoinDevice();
    auto jobs = ClaimBatch();
    if (!jobs.ok()) return jobs.status();
    if (!jobs->empty()) FM_RETURN_IF_ERROR(Localize(&*jobs));
    if (!jobs->empty()) {
      const int64_t given = stats_.given_back;
      FM_RETURN_IF_ERROR(RunBatch(std::move(jobs).value()));
      if (stats_.given_back > given) SleepFor(options_.give_back_pause_ms);
      continue;
    }
    auto left = store_->CountOutstanding(options_.stages);
    if (!left.ok()) return left.status();
    if (left->pending == 0 && left->running == 0 && !options_.forever) return Status::OK();
    // Retry times are on the store's clock (PostgreSQL's, which may not be this machine's).
    const int64_t now = left->now > 0 ? left->now : clock_->NowMs();
    // Only retries due beyond the horizon are left (a server's Retry-After, a long
    // backoff): a later run takes them; the supervisor says when they are due.
    if (left->running == 0 && !options_.forever && left->next_run_at > now + options_.horizon_ms)
      return Status::OK();
    // Something is in backoff or held by another worker (which may yet fail, or die
    // and be rescued): wait for it, but no longer than until the next retry is due.
    int64_t wait = options_.poll_ms;
    if (left->pending > 0 && left->next_run_at > 0)
      wait = std::clamp<int64_t>(left->next_run_at - now, 1, options_.poll_ms);
    // Only other workers' batches are left: they end soon, and their completions may
    // make dependants claimable, so look again shortly rather than after a full poll.
    if (left->pending == 0 && left->running > 0) wait = std::min<int64_t>(wait, kTailPollMs);
    SleepFor(wait);
  }
  return Status::Aborted("stop requested");
}

int Worker::BatchOf(const std::string& stage) const {
  auto it = options_.batch_by_stage.find(stage);
  return it != options_.batch_by_stage.end() && it->second > 0 ? it->second : options_.batch;
}

void Worker::RefreshCosts() {
  const int64_t now = SteadyNowMs();
  if (costs_loaded_at_ >= 0 && now - costs_loaded_at_ < kCostRefreshMs) return;
  costs_loaded_at_ = now;
  auto times = store_->RecentJobTimes(kCostHistory);
  if (!times.ok()) {
    spdlog::warn("could not read job times: {}", times.status().ToString());
    return;
  }
  costs_ = CostModel();
  costs_.Learn(*times);
  if (ladder_->gpu() != nullptr) return;  // the rest is for a worker on the CPU
  device_workers_ = 0;
  if (auto run = store_->LastRun(); run.ok() && run->has_value())
    for (const RunDevice& d : (*run)->devices) device_workers_ += d.workers;
  if (auto left = store_->CountOutstanding(options_.stages); left.ok()) pending_ = left->pending;
}

std::vector<std::string> Worker::ClaimStages() {
  if (ladder_->gpu() != nullptr) return options_.stages;
  RefreshCosts();
  const std::set<std::string> leave = costs_.StagesForTheDevice(options_.stages, pending_, device_workers_);
  if (leave.empty()) return options_.stages;
  std::vector<std::string> mine;
  for (const std::string& s : options_.stages)
    if (leave.count(s) == 0) mine.push_back(s);
  return mine;
}

void Worker::MaybeJoinDevice() {
  if (options_.seat == nullptr || ladder_->gpu() != nullptr) return;
  const int64_t now = SteadyNowMs();
  if (seat_looked_at_ >= 0 && now - seat_looked_at_ < options_.seat->window_ms()) return;
  const std::optional<gpu::LedgerView> view = options_.seat->Look();
  if (!view) return;
  if (seat_looked_at_ >= 0) {
    const double busy = static_cast<double>(view->busy_ns - seat_busy_ns_) /
                        (static_cast<double>(now - seat_looked_at_) * 1e6);
    auto left = store_->CountOutstanding(options_.stages);
    if (busy < options_.seat->join_below_busy() && left.ok() && left->pending > 0) {
      if (auto runtime = options_.seat->Take()) {
        spdlog::info("{} busy {:.0f}% of the last {} ms with {} job(s) waiting: this worker joins it",
                     view->device, 100 * busy, now - seat_looked_at_, left->pending);
        return UseDevice(std::move(runtime));
      }
    }
  }
  seat_looked_at_ = now;
  seat_busy_ns_ = view->busy_ns;
}

void Worker::UseDevice(std::unique_ptr<GpuRuntime> runtime) {
  joined_ = std::move(runtime);
  ladder_ = joined_->ladder.get();
  options_.ledger = joined_->ledger.get();
  NewPictureCache();
  recorded_peak_mb_ = -1;
  busy_from_ms_ = -1;
  RecordGpuEvents(ladder_->stats(), /*busy_now=*/true);
}

namespace {

// What a claim keeps or gives back whole: an image item with all its claimed jobs (they
// share one decode), or one job of a video or of the dataset (each reads its media its own
// way, and a long video's stages are better spread over workers).
struct ClaimUnit {
  double expected_ms = 0;
  std::vector<ClaimedJob> jobs;
};

std::vector<ClaimUnit> UnitsOf(std::vector<ClaimedJob>* jobs, const CostModel& costs, Ran on) {
  std::vector<ClaimUnit> units;
  std::map<int64_t, size_t> image_unit;  // item id -> its unit
  for (ClaimedJob& j : *jobs) {
    size_t u = units.size();
    if (j.kind == MediaKind::kImage) u = image_unit.emplace(j.item_id, units.size()).first->second;
    if (u == units.size()) units.emplace_back();
    units[u].expected_ms += costs.ExpectedMs(j.stage, j.kind, j.size, on);
    units[u].jobs.push_back(std::move(j));
  }
  jobs->clear();
  return units;
}

}  // namespace

Status Worker::TrimToTarget(std::vector<ClaimedJob>* jobs, bool tail) {
  const bool trim = options_.claim_target_ms > 0 && jobs->size() > 1;
  if (trim) RefreshCosts();
  std::vector<ClaimUnit> units = UnitsOf(jobs, costs_, ladder_->gpu() != nullptr ? Ran::kDevice : Ran::kCpu);
  // The claim took the last due jobs: the longest first, and a quarter of the target, so
  // that what is left goes to the workers that fall idle first.
  if (trim && tail)
    std::stable_sort(units.begin(), units.end(),
                     [](const auto& a, const auto& b) { return a.expected_ms > b.expected_ms; });
  std::vector<double> expected;
  for (const ClaimUnit& u : units) expected.push_back(u.expected_ms);
  const double target = static_cast<double>(options_.claim_target_ms) / (tail ? kTailShare : 1);
  const size_t keep = trim ? KeepWithinTarget(expected, target) : units.size();
  std::vector<ClaimedJob> rest;
  for (size_t k = 0; k < units.size(); ++k)
    for (ClaimedJob& j : units[k].jobs) (k < keep ? *jobs : rest).push_back(std::move(j));
  if (!rest.empty()) {
    auto r = store_->Release(rest);
    if (!r.ok()) return r.status();
    stats_.trimmed += *r;
  }
  // On a device, stage by stage in dependency order (every claimed job's dependencies are
  // done already), so that each stage runs its jobs as one device batch. On the CPU, item by
  // item as claimed: an item's stages run one after another on its picture while it is in
  // cache, and a batch can give its unstarted items back between two of them; only a stage
  // with a batch size of its own (fetch: its transfers overlap within a batch) is gathered.
  const auto& order = registry_->graph().stages();
  const bool on_device = ladder_->gpu() != nullptr;
  auto rank = [&](const ClaimedJob& j) -> long {
    if (!on_device && options_.batch_by_stage.count(j.stage) == 0) return static_cast<long>(order.size());
    auto it = std::find_if(order.begin(), order.end(), [&](const StageSpec& s) { return s.name == j.stage; });
    return it - order.begin();
  };
  std::stable_sort(jobs->begin(), jobs->end(),
                   [&](const ClaimedJob& a, const ClaimedJob& b) { return rank(a) < rank(b); });
  return Status::OK();
}

Result<std::vector<ClaimedJob>> Worker::ClaimBatch() {
  auto jobs = ClaimByCount();
  if (jobs.ok() && options_.counters != nullptr) options_.counters->ObserveClaim(static_cast<int64_t>(jobs->size()));
  if (!jobs.ok() || jobs->empty()) return jobs;
  // A claim short of its limit found every due job there was.
  const bool tail = ItemsOf(*jobs) < options_.batch;
  if (Status s = TrimToTarget(&*jobs, tail); !s.ok()) {
    (void)store_->Release(*jobs);
    return s;
  }
  return jobs;
}

Result<std::vector<ClaimedJob>> Worker::ClaimByCount() {
  const std::vector<std::string> stages = ClaimStages();
  if (stages.empty()) return std::vector<ClaimedJob>();
  auto jobs = store_->ClaimItems(options_.id, stages, options_.batch, options_.lease_ms);
  // A claim short of its limit found every due job there was: nothing to top up.
  if (!jobs.ok() || ItemsOf(*jobs) < options_.batch || options_.batch_by_stage.empty())
    return jobs;
  // One claim over all stages keeps priority order; a stage with a larger batch that it
  // reached is then topped up alone (a smaller one is cut into groups in RunBatch), and
  // TrimToTarget orders them stage by stage.
  std::map<std::string, int> claimed;
  for (const ClaimedJob& j : *jobs) ++claimed[j.stage];
  for (const auto& [stage, n] : claimed) {
    if (options_.batch_by_stage.count(stage) == 0) continue;
    const int more = BatchOf(stage) - n;
    if (more <= 0) continue;
    auto extra = store_->Claim(options_.id, {stage}, more, options_.lease_ms);
    if (!extra.ok()) {
      // Give back what is held rather than leave it to lease expiry.
      (void)store_->Release(*jobs);
      return extra.status();
    }
    for (ClaimedJob& j : *extra) jobs->push_back(std::move(j));
  }
  return jobs;
}

Status Worker::Localize(std::vector<ClaimedJob>* jobs) {
  std::vector<FinishedJob> missing;
  std::vector<ClaimedJob> kept;
  for (ClaimedJob& j : *jobs) {
    j.source = options_.path_map.ToLocal(j.source);
    if (!options_.check_files || j.source.empty() || j.source[0] != '/' ||
        ::access(j.source.c_str(), R_OK) == 0) {
      kept.push_back(std::move(j));
      continue;
    }
    const int err = errno;
    char host[256] = "?";
    ::gethostname(host, sizeof host - 1);
    missing.push_back(Finish(
        j, Outcome::Failed(Status::NotFound(j.source + ": " + std::strerror(err) + " on " + host +
                                            " (deleted since enqueue, or the shared storage is not "
                                            "mounted here: mount it at the same path on every "
                                            "machine, or map it with FRAMEMILL_PATH_MAP)"),
                           "file_missing")));
  }
  *jobs = std::move(kept);
  if (missing.empty()) return Status::OK();
  if (Status s = Record(missing); !s.ok()) {
    (void)store_->Release(*jobs);
    return s;
  }
  return Status::OK();
}

void Worker::PrefetchPictures(const std::vector<ClaimedJob>& jobs) {
  for (const ClaimedJob& j : jobs) {
    if (j.kind != MediaKind::kImage) continue;
    const Stage* stage = registry_->Find(j.stage);
    if (stage != nullptr && stage->ReadsPictures()) pictures_->Prefetch(j.source);
  }
}

Status Worker::RunBatch(std::vector<ClaimedJob> jobs) {
  ++stats_.batches;
  const gpu::LadderStats before = ladder_->stats();
  PrefetchPictures(jobs);
  std::vector<FinishedJob> finished = RunStages(jobs);
  pictures_->Clear();  // the claim's pictures: its stages are done with them
  stats_.pictures_decoded = pictures_decoded_before_ + pictures_->stats().decoded;
  stats_.pictures_reused = pictures_reused_before_ + pictures_->stats().reused;
  if (Status s = Record(finished); !s.ok()) {
    // The store failed (disk full, read-only, corrupt): give the whole batch back while
    // it may still take a small write; if not, the leases expire and a rerun rescues it.
    (void)store_->Release(jobs);
    return s;
  }
  RecordGpuEvents(before);
  return ReleaseRest(jobs, finished.size());
}

std::vector<FinishedJob> Worker::RunStages(const std::vector<ClaimedJob>& jobs) {
  std::vector<FinishedJob> finished;
  finished.reserve(jobs.size());
  StageContext ctx{ladder_, stop_, store_, pictures_.get(), &options_.device_ops};
  // Claims come in id order, so one item's stages are apart; a run of equal stages
  // goes to its stage as one batch (one job at a time to a stage that gains nothing).
  const int64_t batch_start = clock_->NowMs();
  size_t next = 0;
  while (next < jobs.size() && !stop_->load()) {
    if (next > 0 && ShouldGiveBack(batch_start)) {
      stats_.given_back += static_cast<int64_t>(jobs.size() - next);
      break;  // RunBatch gives the unstarted rest back
    }
    Stage* stage = registry_->Find(jobs[next].stage);
    size_t end = next;
    const size_t cap = stage != nullptr && !stage->RunsJobsTogether(ctx)
                           ? 1
                           : static_cast<size_t>(std::max(1, BatchOf(jobs[next].stage)));
    while (end < jobs.size() && end - next < cap && jobs[end].stage == jobs[next].stage) ++end;
    std::vector<ClaimedJob> group(jobs.begin() + static_cast<long>(next),
                                  jobs.begin() + static_cast<long>(end));
    const int64_t start = clock_->NowMs();
    const TimeTally tally_before = ThreadTimeTally();
    std::vector<Outcome> outs;
    if (stage != nullptr) {
      outs = CallStage(stage, group, ctx);
    } else {
      outs.assign(group.size(), Outcome::Failed(Status::Unsupported(
                                    "stage " + group.front().stage + " is not in this build")));
    }
    outs.resize(std::min(outs.size(), group.size()));
    if (stop_->load()) {
      // A failure while stopping may be the stop's own doing (SIGTERM interrupts a blocked
      // read): from the first one on, the group goes back with no attempt spent.
      auto failed = std::find_if(outs.begin(), outs.end(), [](const Outcome& o) { return o.failed(); });
      outs.erase(failed, outs.end());
    }
    const size_t from = finished.size();
    for (size_t k = 0; k < outs.size(); ++k) finished.push_back(Finish(group[k], std::move(outs[k])));
    Time(&finished, from, start, ThreadTimeTally() - tally_before, group);
    next += outs.size();
    if (outs.size() < group.size()) break;  // stopped inside the group
  }
  return finished;
}

bool Worker::ShouldGiveBack(int64_t batch_start) {
  if (options_.claim_target_ms <= 0 || clock_->NowMs() - batch_start < options_.claim_target_ms) return false;
  auto left = store_->CountOutstanding(options_.stages);
  return left.ok() && left->pending == 0;
}

void Worker::Time(std::vector<FinishedJob>* finished, size_t from, int64_t start,
                  const TimeTally& spent, const std::vector<ClaimedJob>& group) {
  const size_t n = finished->size() - from;
  if (n == 0) return;
  const int64_t share = std::max<int64_t>(0, clock_->NowMs() - start) / static_cast<int64_t>(n);
  const JobTimeSplit split = ShareOfTally(spent, static_cast<int64_t>(n), share);
  for (size_t k = 0; k < n; ++k) {
    FinishedJob& f = (*finished)[from + k];
    f.started_at_ms = start + share * static_cast<int64_t>(k);
    f.run_ms = share;
    f.split = split;
    if (!f.outcome.done()) continue;
    f.media_seconds = MediaSecondsOf(f.outcome.result);
    if (options_.counters != nullptr)
      options_.counters->ObserveJob(group[k].stage, f.outcome.device, static_cast<double>(share) / 1000);
    costs_.Observe({group[k].stage, group[k].kind, share, f.media_seconds, group[k].size,
                    f.outcome.device, split});
  }
}

namespace {
// A stage's batch, or the failure of what it threw (nullopt, with *thrown set as
// jobs/failure.h classes it).
std::optional<std::vector<Outcome>> RunGuarded(Stage* stage, const std::vector<ClaimedJob>& jobs,
                                               const StageContext& ctx, Outcome* thrown) {
  try {
    return stage->RunBatch(jobs, ctx);
  } catch (...) {
    *thrown = FailedByThrow("stage " + stage->spec().name + " threw");
  }
  return std::nullopt;
}
}  // namespace

// A throw from any stage fails the jobs it took down, with the reason and the class of
// jobs/failure.h (transient: the retry policy decides), instead of ending the worker. Which
// job of a batch threw is not known, so each then runs again alone: only the one that
// throws again fails.
std::vector<Outcome> Worker::CallStage(Stage* stage, const std::vector<ClaimedJob>& group,
                                       const StageContext& ctx) {
  Outcome failure;
  PostDeadline(options_.budget.For(group));
  auto outs = RunGuarded(stage, group, ctx, &failure);
  PostDeadline(0);
  if (outs) return std::move(*outs);
  auto thrown = [&] {
    spdlog::warn("{}", failure.error.message());
    return failure;
  };
  if (group.size() == 1) return {thrown()};
  std::vector<Outcome> each;
  for (const ClaimedJob& job : group) {
    const std::vector<ClaimedJob> one{job};
    PostDeadline(options_.budget.For(one));
    auto out = RunGuarded(stage, one, ctx, &failure);
    PostDeadline(0);
    if (!out) each.push_back(thrown());
    else if (out->empty()) break;  // stopped
    else each.push_back(std::move(out->front()));
  }
  return each;
}

void Worker::PostDeadline(int64_t budget_ms) {
  if (options_.deadline == nullptr) return;
  options_.deadline->budget_ms = budget_ms;
  options_.deadline->deadline_ms = budget_ms > 0 ? SteadyNowMs() + budget_ms : 0;
}

FinishedJob Worker::Finish(const ClaimedJob& job, Outcome outcome) {
  FinishedJob f{job.id, job.lease_token, std::move(outcome), 0, 0, job.stage};
  if (!f.outcome.failed()) return f;
  spdlog::debug("{} {} failed: {}", job.stage, job.source, f.outcome.error.ToString());
  const double unit = std::uniform_real_distribution<double>(0, 1)(rng_);
  f.decided_at_ms = clock_->NowMs();
  f.retry_at_ms = options_.retry.RetryAt(job, f.outcome, f.decided_at_ms, unit);
  return f;
}

Status Worker::Record(const std::vector<FinishedJob>& finished) {
  if (finished.empty()) return Status::OK();
  auto st = store_->Complete(finished);
  if (!st.ok()) return st.status();
  stats_.done += st->done;
  stats_.failed += st->failed;
  stats_.retried += st->retried;
  stats_.skipped += st->skipped;
  stats_.stale += st->stale;
  if (st->stale > 0)
    spdlog::warn("{} result(s) discarded: their lease was lost to another worker", st->stale);
  RemoveStaleArtifacts(finished, st->stale_jobs);
  return Status::OK();
}

void Worker::RemoveStaleArtifacts(const std::vector<FinishedJob>& finished,
                                  const std::vector<int64_t>& stale) {
  // Stages name artifacts by lease token, so a fenced-out worker never overwrote the new
  // holder's files; what it wrote itself is nobody's result and goes.
  for (const FinishedJob& f : finished) {
    if (std::find(stale.begin(), stale.end(), f.job_id) == stale.end()) continue;
    for (const std::string& path : f.outcome.artifacts) std::remove(path.c_str());
  }
}

void Worker::RecordGpuEvents(const gpu::LadderStats& before, bool busy_now) {
  const gpu::LadderStats& after = ladder_->stats();
  gpu::DeviceLedger* ledger = options_.ledger;
  DeviceUse use;
  use.oom_events = after.oom_events - before.oom_events;
  use.cpu_fallbacks = after.cpu_fallback_items - before.cpu_fallback_items;
  bool busy_due = false;
  if (ledger != nullptr) {
    constexpr int64_t kMiB = 1 << 20;
    use.device = ledger->device();
    use.total_mb = ledger->total_bytes() / kMiB;
    // Rounded up, but never past the total: the ledger itself never plans past it.
    use.peak_planned_mb = std::min(use.total_mb, (ledger->peak_seen() + kMiB - 1) / kMiB);
    // The device's busy time: where it stood when this worker joined, and now (every few
    // seconds, and when the worker ends), so a run's busy share is known while it runs.
    const int64_t now = SteadyNowMs();
    busy_due = busy_now || now - busy_recorded_at_ >= kBusyRecordMs;
    if (busy_due) {
      use.busy_to_ms = ledger->BusyNs() / 1'000'000;
      use.busy_from_ms = busy_from_ms_ < 0 ? use.busy_to_ms : busy_from_ms_;
      busy_from_ms_ = use.busy_from_ms;
      busy_recorded_at_ = now;
    }
  }
  const bool new_peak = ledger != nullptr && use.peak_planned_mb > recorded_peak_mb_;
  if (use.oom_events == 0 && use.cpu_fallbacks == 0 && !new_peak && !busy_due) return;
  stats_.oom_events += use.oom_events;
  stats_.cpu_fallbacks += use.cpu_fallbacks;
  Status g = store_->AddGpuEvents(options_.id, use);
  if (!g.ok()) {
    spdlog::warn("could not record GPU events: {}", g.ToString());
    return;
  }
  if (ledger != nullptr) recorded_peak_mb_ = use.peak_planned_mb;
}

Status Worker::ReleaseRest(const std::vector<ClaimedJob>& jobs, size_t finished) {
  if (finished >= jobs.size()) return Status::OK();
  std::vector<ClaimedJob> rest(jobs.begin() + static_cast<long>(finished), jobs.end());
  auto r = store_->Release(rest);
  if (!r.ok()) return r.status();
  stats_.released += *r;
  return Status::OK();
}

}  // namespace framemill
