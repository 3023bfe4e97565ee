#include "scheduler/worker.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>

#include "jobs/failure.h"
#include "scheduler/heartbeat.h"

namespace framemill {
namespace {

constexpr int64_t kTailPollMs = 25;

}  // namespace

Worker::Worker(JobStore* store, JobStore* heartbeat_store, const StageRegistry* registry,
               const Clock* clock, WorkerOptions options, const std::atomic<bool>* stop)
    : store_(store),
      heartbeat_store_(heartbeat_store),
      registry_(registry),
      clock_(clock),
      options_(std::move(options)),
      stop_(stop),
      rng_(std::random_device{}()),
      device_(store, clock, &options_),
      planner_(store, registry, &options_) {
  NewPictureCache();
}

void Worker::NewPictureCache() {
  // A device worker decodes ahead on threads of its own, so the device does not wait for
  // the host; a CPU worker's cores are busy with its own work and the other workers'.
  PictureCacheOptions pictures = options_.pictures;
  pictures.threads = device_.on_device() ? options_.decode_threads : 0;
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
  if (device_.ledger() != nullptr) device_.RecordEvents(device_.ladder()->stats(), /*busy_now=*/true, &stats_);
  Status s = Loop();
  if (device_.ledger() != nullptr) device_.RecordEvents(device_.ladder()->stats(), /*busy_now=*/true, &stats_);
  return s;
}

Status Worker::Loop() {
  while (!stop_->load()) {
    if (device_.MaybeJoin(&stats_)) NewPictureCache();
    auto jobs = planner_.Claim(device_.on_device(), &stats_.trimmed);
    if (!jobs.ok()) return jobs.status();
    if (!jobs->empty()) FM_RETURN_IF_ERROR(Localize(&*jobs));
    if (!jobs->empty()) {
      const int64_t given = stats_.given_back;
      FM_RETURN_IF_ERROR(RunBatch(std::move(jobs).value()));
      if (stats_.given_back > given) SleepFor(options_.give_back_pause_ms);
      continue;
    }
    auto wait = NothingClaimed();
    if (!wait.ok()) return wait.status();
    if (!wait->has_value()) return Status::OK();
    SleepFor(**wait);
  }
  return Status::Aborted("stop requested");
}

Result<std::optional<int64_t>> Worker::NothingClaimed() {
  auto left = store_->CountOutstanding(options_.stages);
  if (!left.ok()) return left.status();
  if (left->pending == 0 && left->running == 0 && !options_.forever) return std::optional<int64_t>();
  // Retry times are on the store's clock (PostgreSQL's, which may not be this machine's).
  const int64_t now = left->now > 0 ? left->now : clock_->NowMs();
  // Only retries due beyond the horizon are left (a server's Retry-After, a long
  // backoff): a later run takes them; the supervisor says when they are due.
  if (left->running == 0 && !options_.forever && left->next_run_at > now + options_.horizon_ms)
    return std::optional<int64_t>();
  // Something is in backoff or held by another worker (which may yet fail, or die
  // and be rescued): wait for it, but no longer than until the next retry is due.
  int64_t wait = options_.poll_ms;
  if (left->pending > 0 && left->next_run_at > 0)
    wait = std::clamp<int64_t>(left->next_run_at - now, 1, options_.poll_ms);
  // Only other workers' batches are left: they end soon, and their completions may
  // make dependants claimable, so look again shortly rather than after a full poll.
  if (left->pending == 0 && left->running > 0) wait = std::min<int64_t>(wait, kTailPollMs);
  return std::optional<int64_t>(wait);
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
  const gpu::LadderStats before = device_.ladder()->stats();
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
  device_.RecordEvents(before, /*busy_now=*/false, &stats_);
  return ReleaseRest(jobs, finished.size());
}

std::vector<FinishedJob> Worker::RunStages(const std::vector<ClaimedJob>& jobs) {
  std::vector<FinishedJob> finished;
  finished.reserve(jobs.size());
  StageContext ctx{device_.ladder(), stop_, store_, pictures_.get(), &options_.device_ops};
  // Claims come in id order, so one item's stages are apart; a run of equal stages
  // goes to its stage as one batch (one job at a time to a stage that gains nothing).
  const int64_t batch_start = clock_->NowMs();
  size_t next = 0;
  while (next < jobs.size() && !stop_->load()) {
    if (next > 0 && planner_.ShouldGiveBack(clock_->NowMs() - batch_start)) {
      stats_.given_back += static_cast<int64_t>(jobs.size() - next);
      break;  // RunBatch gives the unstarted rest back
    }
    const Stage* stage = registry_->Find(jobs[next].stage);
    const size_t cap = stage != nullptr && !stage->RunsJobsTogether(ctx)
                           ? 1
                           : static_cast<size_t>(std::max(1, planner_.BatchOf(jobs[next].stage)));
    size_t end = next;
    while (end < jobs.size() && end - next < cap && jobs[end].stage == jobs[next].stage) ++end;
    const std::vector<ClaimedJob> group(jobs.begin() + static_cast<long>(next),
                                        jobs.begin() + static_cast<long>(end));
    const size_t before = finished.size();
    const bool whole = RunGroup(group, ctx, &finished);
    next += finished.size() - before;
    if (!whole) break;  // stopped inside the group
  }
  return finished;
}

bool Worker::RunGroup(const std::vector<ClaimedJob>& group, const StageContext& ctx,
                      std::vector<FinishedJob>* finished) {
  Stage* stage = registry_->Find(group.front().stage);
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
  const size_t from = finished->size();
  for (size_t k = 0; k < outs.size(); ++k) finished->push_back(Finish(group[k], std::move(outs[k])));
  Time(finished, from, start, ThreadTimeTally() - tally_before, group);
  return outs.size() == group.size();
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
    planner_.Observe({group[k].stage, group[k].kind, share, f.media_seconds, group[k].size,
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

Status Worker::ReleaseRest(const std::vector<ClaimedJob>& jobs, size_t finished) {
  if (finished >= jobs.size()) return Status::OK();
  std::vector<ClaimedJob> rest(jobs.begin() + static_cast<long>(finished), jobs.end());
  auto r = store_->Release(rest);
  if (!r.ok()) return r.status();
  stats_.released += *r;
  return Status::OK();
}

}  // namespace framemill
