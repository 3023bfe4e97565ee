#include "cli/command.h"

#include <cstdio>
#include <map>
#include <ctime>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/json_text.h"
#include "media/kind.h"
#include "jobs/clip_totals.h"
#include "scheduler/progress.h"

namespace framemill {
namespace {

// Everything `status` shows, read from the store once.
struct StatusReport {
  int64_t items = 0;
  std::vector<StageCounts> counts;
  std::vector<ErrorClassCount> failures;
  std::optional<RunRecord> last_run;
  // Per stage and media kind, the median of the newest done jobs' own times and the median
  // job's split (SummariseJobTimes, as the report shows them).
  std::map<std::string, std::map<MediaKind, JobTimeSummary>> times;
  int64_t now_ms = 0;  // when it was read: a running run's busy share is up to now
  ClipTotals clips;    // what the clips stage made
};

// The crawler's report, as img2dataset gives it: success rate and failures by class.
struct FetchSummary {
  int64_t done = 0, failed = 0;
  std::vector<std::pair<std::string, int64_t>> failures;  // class -> count
  std::optional<double> SuccessRate() const {
    if (done + failed == 0) return std::nullopt;
    return static_cast<double>(done) / static_cast<double>(done + failed);
  }
};

Result<StatusReport> ReadStatus(JobStore& store) {
  StatusReport r;
  auto items = store.ItemCount();
  auto counts = store.Counts(5 * 60'000);
  auto failures = store.FailuresByClass();
  auto last = store.LastRun();
  if (!items.ok()) return items.status();
  if (!counts.ok()) return counts.status();
  if (!failures.ok()) return failures.status();
  if (!last.ok()) return last.status();
  r.items = *items;
  r.counts = std::move(counts).value();
  r.failures = std::move(failures).value();
  r.last_run = std::move(last).value();
  auto times = store.RecentJobTimes(kJobTimesShown);
  if (!times.ok()) return times.status();
  for (const auto& [key, summary] : SummariseJobTimes(*times)) r.times[key.first][key.second] = summary;
  auto clips = CountClips(store);
  if (!clips.ok()) return clips.status();
  r.clips = *clips;
  r.now_ms = SystemClock()->NowMs();
  return r;
}

// Of the downloading stage, when the build has one and the store has its jobs.
std::optional<FetchSummary> SummariseFetch(const StatusReport& r, const StageGraph& graph) {
  const StageSpec* downloader = graph.Downloader();
  if (downloader == nullptr) return std::nullopt;
  std::optional<FetchSummary> f;
  for (const StageCounts& c : r.counts)
    if (c.stage == downloader->name) f = FetchSummary{c.done, c.failed, {}};
  if (!f) return f;
  for (const auto& e : r.failures)
    if (e.stage == downloader->name) f->failures.emplace_back(e.error_class, e.count);
  return f;
}

double RateOf(const StageCounts& c) { return c.window_s > 0 ? c.done_recent / c.window_s : 0.0; }

// Seconds left at the recent rate; -1 when unknown (work left, nothing done lately).
double EtaOf(const StageCounts& c) {
  const int64_t left = c.pending + c.running + c.waiting;
  const double r = RateOf(c);
  return left == 0 ? 0.0 : (r > 0 ? static_cast<double>(left) / r : -1.0);
}

nlohmann::json OrNull(bool present, nlohmann::json v) { return present ? v : nlohmann::json(nullptr); }

// A stage's ms_per_item and time_split_ms (CONTRACT.md), per media kind.
void AddTimes(const std::map<MediaKind, JobTimeSummary>& kinds, nlohmann::json* stage) {
  for (const auto& [kind, t] : kinds) {
    const std::string k(MediaKindName(kind));
    (*stage)["ms_per_item"][k] = static_cast<double>(t.median_ms);
    const JobTimeSplit& s = t.median_split;
    (*stage)["time_split_ms"][k] = {{"decode", s.decode_ms}, {"host", s.host_ms},
                                    {"device", s.device_ms}, {"wait", s.wait_ms}};
  }
}

nlohmann::json StatusJson(const std::string& db, const StatusReport& r,
                          const std::optional<FetchSummary>& fetch) {
  nlohmann::json j;
  j["db"] = db;
  if (fetch) {
    auto rate = fetch->SuccessRate();
    nlohmann::json fj = {{"success_rate", OrNull(rate.has_value(), rate.value_or(0))},
                         {"done", fetch->done}, {"failed", fetch->failed},
                         {"failures", nlohmann::json::object()}};
    for (const auto& [cls, n] : fetch->failures) fj["failures"][cls] = n;
    j["fetch"] = fj;
  }
  j["items"] = r.items;
  j["clips"] = {{"clips", r.clips.clips}, {"seconds", r.clips.seconds}};
  j["stages"] = nlohmann::json::object();
  for (const StageCounts& c : r.counts) {
    const double eta = EtaOf(c);
    j["stages"][c.stage] = {{"retry_later", c.retry_later},
                            {"next_retry_at_ms", OrNull(c.retry_later > 0, c.next_retry_at)},
                            {"pending", c.pending}, {"running", c.running},
                            {"done", c.done},       {"failed", c.failed},
                            {"skipped", c.skipped}, {"waiting", c.waiting},
                            {"throughput_per_s", RateOf(c)},
                            {"eta_s", OrNull(eta >= 0, eta)},
                            {"ms_per_item", nlohmann::json::object()},
                            {"time_split_ms", nlohmann::json::object()}};
    if (auto it = r.times.find(c.stage); it != r.times.end()) AddTimes(it->second, &j["stages"][c.stage]);
  }
  j["failures"] = nlohmann::json::array();
  for (const auto& e : r.failures)
    j["failures"].push_back({{"stage", e.stage}, {"error_class", e.error_class},
                             {"count", e.count}, {"example", e.example}});
  if (r.last_run) {
    const RunRecord& run = *r.last_run;
    j["last_run"] = {{"id", run.id}, {"started_at_ms", run.started_at},
                     {"finished_at_ms", OrNull(run.finished_at != 0, run.finished_at)},
                     {"workers", run.workers}, {"jobs_done", run.jobs_done},
                     {"jobs_failed", run.jobs_failed},
                     {"oom_events", run.oom_events}, {"cpu_fallbacks", run.cpu_fallbacks},
                     {"exit_code", OrNull(run.exit_code >= 0, run.exit_code)},
                     {"devices", nlohmann::json::array()}};
    for (const RunDevice& d : run.devices)
      j["last_run"]["devices"].push_back(
          {{"id", d.id}, {"total_mb", d.total_mb}, {"peak_planned_mb", d.peak_planned_mb},
           {"workers", d.workers}, {"oom_events", d.oom_events},
           {"cpu_fallbacks", d.cpu_fallbacks}, {"busy_share", run.BusyShare(d, r.now_ms)}});
  }
  return j;
}

void PrintStageTable(const std::string& db, const StatusReport& r) {
  std::printf("store %s: %lld items\n\n", db.c_str(), static_cast<long long>(r.items));
  std::printf("%-14s %8s %8s %8s %8s %8s %8s %10s %8s\n", "stage", "pending", "running",
              "waiting", "done", "failed", "skipped", "jobs/s(5m)", "ETA");
  for (const StageCounts& c : r.counts) {
    std::printf("%-14s %8lld %8lld %8lld %8lld %8lld %8lld %10.2f %8s\n", c.stage.c_str(),
                static_cast<long long>(c.pending), static_cast<long long>(c.running),
                static_cast<long long>(c.waiting), static_cast<long long>(c.done),
                static_cast<long long>(c.failed), static_cast<long long>(c.skipped),
                RateOf(c), FormatDuration(EtaOf(c)).c_str());
  }
  if (r.counts.empty()) std::printf("(no jobs: run `framemill enqueue SOURCE...`)\n");
  if (r.clips.clips > 0)
    std::printf("\nclips: %lld made, %.2f hours of video\n", static_cast<long long>(r.clips.clips),
                r.clips.seconds / 3600);
  if (!r.times.empty())
    std::printf("\ntime per item (median of recent jobs' own times; the median job's decode, "
                "host, device, wait in ms):\n");
  for (const auto& [stage, kinds] : r.times) {
    std::printf("  %-14s", stage.c_str());
    for (const auto& [kind, t] : kinds) {
      const double ms = static_cast<double>(t.median_ms);
      const JobTimeSplit& s = t.median_split;
      std::printf("  %s %s (%lld/%lld/%lld/%lld)", std::string(MediaKindName(kind)).c_str(),
                  ms < 1000 ? (std::to_string(static_cast<int>(ms)) + " ms").c_str() : FormatDuration(ms / 1000).c_str(),
                  static_cast<long long>(s.decode_ms), static_cast<long long>(s.host_ms),
                  static_cast<long long>(s.device_ms), static_cast<long long>(s.wait_ms));
    }
    std::printf("\n");
  }
  for (const StageCounts& c : r.counts) {
    if (c.retry_later == 0) continue;
    const time_t t = static_cast<time_t>(c.next_retry_at / 1000);
    struct tm tm {};
    localtime_r(&t, &tm);
    char due[64];
    std::strftime(due, sizeof due, "%Y-%m-%d %H:%M:%S", &tm);
    std::printf("%s: %lld pending job(s) wait for a retry, the first due at %s\n",
                c.stage.c_str(), static_cast<long long>(c.retry_later), due);
  }
}

void PrintFetch(const FetchSummary& f) {
  auto rate = f.SuccessRate();
  std::printf("\nfetch: %lld downloaded, %lld failed", static_cast<long long>(f.done),
              static_cast<long long>(f.failed));
  if (rate) std::printf(", success rate %.1f%%", 100.0 * *rate);
  std::printf("\n");
  for (const auto& [cls, n] : f.failures)
    std::printf("  %-14s %8lld  (%.1f%% of fetches that ended)\n", cls.c_str(),
                static_cast<long long>(n),
                100.0 * static_cast<double>(n) / static_cast<double>(f.done + f.failed));
}

void PrintFailures(const std::vector<ErrorClassCount>& failures) {
  if (failures.empty()) return;
  std::printf("\nfailures by error class:\n");
  // Quoted as a JSON string: a message can carry a file name's or a server's bytes
  // (terminal escapes, bytes that are not UTF-8), which must not reach the terminal raw.
  for (const auto& e : failures)
    std::printf("  %-12s %-18s %6lld  e.g. %s\n", e.stage.c_str(), e.error_class.c_str(),
                static_cast<long long>(e.count), JsonDump(nlohmann::json(e.example)).c_str());
  std::printf("  (details: framemill export is for results; `framemill retry --failed` re-queues)\n");
}

void PrintLastRun(const RunRecord& r, int64_t now_ms) {
  const std::string ended =
      r.finished_at == 0 ? "unfinished or running" : "exit " + std::to_string(r.exit_code);
  std::printf("\nlast run #%lld: %d worker(s), %s, %lld done, %lld failed, "
              "%lld out-of-memory event(s), %lld item(s) fell back to the CPU\n",
              static_cast<long long>(r.id), r.workers, ended.c_str(),
              static_cast<long long>(r.jobs_done), static_cast<long long>(r.jobs_failed),
              static_cast<long long>(r.oom_events), static_cast<long long>(r.cpu_fallbacks));
  for (const RunDevice& d : r.devices)
    std::printf("  %s: %d worker(s), busy %.0f%% of the run, at most %lld of %lld MiB planned "
                "at once, %lld out-of-memory event(s), %lld CPU fallback(s)\n",
                d.id.c_str(), d.workers, 100 * r.BusyShare(d, now_ms),
                static_cast<long long>(d.peak_planned_mb), static_cast<long long>(d.total_mb),
                static_cast<long long>(d.oom_events), static_cast<long long>(d.cpu_fallbacks));
}

}  // namespace

int CmdStatus(const Flags& f) {
  auto env = ResolveExisting(f);
  if (!env.ok()) return UsageError(env.status().message());
  auto store = OpenStore(*env);
  if (!store.ok()) return StoreError(store.status());
  auto report = ReadStatus(**store);
  if (!report.ok()) return StoreError(report.status());
  const std::string db = RedactedUri(env->config.db());
  const std::optional<FetchSummary> fetch = SummariseFetch(*report, env->registry->graph());
  if (f.json) {
    std::cout << JsonDump(StatusJson(db, *report, fetch), 2) << "\n";
    return ToInt(ExitCode::kOk);
  }
  PrintStageTable(db, *report);
  if (fetch) PrintFetch(*fetch);
  PrintFailures(report->failures);
  if (report->last_run) PrintLastRun(*report->last_run, report->now_ms);
  return ToInt(ExitCode::kOk);
}

}  // namespace framemill
