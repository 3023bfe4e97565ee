// The job store: every item, every (item, stage) job, their leases, results and
// history. JobStore is the seam (tests wrap it to inject faults); SqliteJobStore is
// the implementation. Thread-safety: one JobStore per thread or process; processes
// share the database file, and every write is one IMMEDIATE transaction.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/option_rows.h"
#include "base/path_map.h"
#include "base/status.h"
#include "jobs/job.h"
#include "jobs/outcome.h"
#include "jobs/result_reader.h"
#include "jobs/stage_graph.h"

namespace framemill {

struct ItemRecord {
  int64_t id = 0;
  std::string source;
  MediaKind kind = MediaKind::kImage;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  std::string content_hash;
};

struct NewItem {
  std::string source;  // absolute path, or the URL for a URL item
  MediaKind kind = MediaKind::kImage;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  std::string content_hash;
  std::string media_info = "{}";  // JSON
  // A URL item gets a job of the graph's downloading stage (StageGraph::Downloader) and
  // every other job waits on it; its kind is known only once fetched. Enqueueing the
  // same URL again changes nothing but adds missing stage jobs.
  bool is_url = false;
  std::string metadata = "{}";  // JSON: the URL list's other columns or keys
};

struct EnqueueOptions {
  std::vector<std::string> stages;  // already closed over dependencies
  int priority = 0;
  int max_attempts = 3;
  PathMap path_map;  // local paths are recorded in their canonical form
};

// enqueue.priority and run.max_attempts, bound to `o` (storage/job_store.cc).
void AddEnqueueRows(EnqueueOptions* o, OptionRows* rows);

struct EnqueueStats {
  int64_t items_added = 0;
  int64_t items_changed = 0;    // content differs: jobs queued again
  int64_t items_unchanged = 0;
  int64_t jobs_added = 0;
  int64_t jobs_requeued = 0;
  int64_t jobs_not_applicable = 0;  // inserted as skipped
};

struct CompleteStats {
  int done = 0, skipped = 0, failed = 0, retried = 0;
  int stale = 0;  // rejected: the lease was lost (expired and rescued, or item changed)
  std::vector<int64_t> stale_jobs;  // their ids: the worker removes what they wrote
};

struct StageCounts {
  std::string stage;
  int64_t pending = 0, running = 0, done = 0, failed = 0, skipped = 0, waiting = 0;
  int64_t retry_later = 0;   // of pending: waiting for a retry not yet due
  int64_t next_retry_at = 0; // when the first of those is due (ms since the epoch)
  int64_t done_recent = 0;   // done within the throughput window
  double window_s = 0;       // length of that window actually covered, seconds
};

// The done jobs of `stage` in `counts` (0 when it has none).
inline int64_t DoneOf(const std::vector<StageCounts>& counts, const std::string& stage) {
  for (const StageCounts& c : counts)
    if (c.stage == stage) return c.done;
  return 0;
}

struct ErrorClassCount {
  std::string stage, error_class, example;
  int64_t count = 0;
};

// What `framemill gc` removes: history older than `before_ms`, never what explains the
// present (each job's latest error, a worker holding a lease, the newest runs).
struct GcOptions {
  int64_t before_ms = 0;  // rows older than this (ms since the epoch)
  // A worker not marked stopped is live while its heartbeat (every lease_ms/3) is newer
  // than this, whatever before_ms says: its row names it in lease rescues.
  int64_t silent_before_ms = 0;
  int keep_runs = 10;     // the newest runs stay whatever their age
  bool dry_run = false;   // count only
};
struct GcStats {
  int64_t job_errors = 0, workers = 0, runs = 0;
};

// A worker's use of its device (AddGpuEvents): events since the last call, and the
// device's memory as the worker last saw it.
struct DeviceUse {
  std::string device;             // "cuda:0", "sim:0"
  int64_t total_mb = 0;
  int64_t peak_planned_mb = 0;    // the most planned at once on the device, all its workers
  int64_t oom_events = 0, cpu_fallbacks = 0;  // since the last call
  // The device's busy time (DeviceLedger::BusyNs, ms) when the worker joined it and now;
  // -1: not known (kept as it was).
  int64_t busy_from_ms = -1, busy_to_ms = -1;
};

// One device of a run: its workers' rows together.
struct RunDevice {
  std::string id;                 // "cuda:0", "sim:0"
  int64_t total_mb = 0, peak_planned_mb = 0;
  int workers = 0;
  int64_t oom_events = 0, cpu_fallbacks = 0;
  int64_t busy_ms = 0;  // how long any of its workers had a batch on it during the run
};

struct RunRecord {
  int64_t id = 0, started_at = 0, finished_at = 0, jobs_done = 0, jobs_failed = 0;
  int workers = 0, exit_code = -1;
  int64_t oom_events = 0, cpu_fallbacks = 0;
  std::string stages;
  std::vector<RunDevice> devices;  // the devices its workers used, by id

  // The share (0-1) of the run's wall time, up to `now_ms` while it runs, in which `device`
  // had work in flight (status --json: last_run.devices[].busy_share, the report's runs).
  double BusyShare(const RunDevice& device, int64_t now_ms) const;
};

// One job of an item as the report and the WebDataset export read it.
struct JobView {
  int64_t id = 0;
  std::string stage;
  JobState state = JobState::kPending;
  int64_t attempts = 0, started_at = 0, finished_at = 0;
  std::string device, error_class, last_error;
  std::string result_json, artifacts_json;  // empty unless done
};

// An item with every job it has (ordered by stage name).
struct ItemView {
  int64_t id = 0;
  std::string source;  // the path or URL, as `export` names the item
  MediaKind kind = MediaKind::kImage;
  std::string content_hash, media_info;
  std::string fetched_path;  // URL items: the downloaded file, once fetched
  bool is_url = false;
  std::vector<JobView> jobs;
};

// One done job's own time (results.run_ms), with its stage and item: status's
// ms_per_item and the claims' cost model (scheduler/cost_model.h) are made of these.
struct JobTime {
  std::string stage;
  MediaKind kind = MediaKind::kImage;
  int64_t run_ms = 0;
  double media_seconds = -1;  // -1: unknown
  int64_t bytes = 0;          // the item's file size
  std::string device;         // who ran it: "cpu", "cuda:0", "sim:0" ("" when not known)
  JobTimeSplit split;         // where run_ms went (a job done before splits were kept: all host)
};

// The newest done jobs' own times per stage and media kind, as `status` (ms_per_item) and
// the report ("Where the time goes") both show them: one sample, one median.
constexpr int64_t kJobTimesShown = 2'000;  // each stage's newest done jobs read for them
struct JobTimeSummary {
  int64_t jobs = 0;
  int64_t median_ms = 0;  // of an even count, the upper of the middle two
  int64_t total_ms = 0;
  JobTimeSplit median_split;  // the median job's split (it sums to median_ms)
};
std::map<std::pair<std::string, MediaKind>, JobTimeSummary> SummariseJobTimes(
    const std::vector<JobTime>& times);

// One failed attempt (job_errors), with its job's item and stage.
struct ErrorRecord {
  int64_t job_id = 0, attempt = 0, at = 0;
  std::string source, stage, worker, error_class, message;
  bool transient = false;
  JobState job_state = JobState::kFailed;  // the job's state now
};

// A batch size the GPU batch tuner settled on (see gpu/batch_tuner.h).
struct TuningRecord {
  std::string op, device;
  int size_bucket = 0, batch = 0;
  int64_t bytes_per_item = 0;
};

class JobStore : public ResultReader {
 public:
  virtual ~JobStore() = default;

  // --- enqueue ---
  // Every known item by source, for change detection without re-reading files.
  virtual Result<std::unordered_map<std::string, ItemRecord>> LoadItems() = 0;
  // Adds new items with their jobs, queues changed ones again (same source, other
  // content hash), adds missing stage jobs to unchanged ones. Idempotent.
  virtual Result<EnqueueStats> Enqueue(const std::vector<NewItem>& items,
                                       const EnqueueOptions& options) = 0;

  // --- workers ---
  // Rescues expired leases, then leases up to `limit` claimable jobs of `stages` to
  // `worker` under one fresh token. Empty when nothing is claimable now. A rescued job
  // (its worker died holding it) comes back alone, ahead of the rest, until it is
  // done: an input that kills workers then fails by itself, not with its batch.
  virtual Result<std::vector<ClaimedJob>> Claim(const std::string& worker,
                                                const std::vector<std::string>& stages,
                                                int limit, int64_t lease_ms) = 0;
  // As Claim, but by item: the items of the first `items` claimable jobs (in claim order),
  // each with every claimable job of `stages` it has, so that one worker runs an item's
  // stages together and decodes its media once (a worker's claims, issue 38). A rescued
  // job still comes back alone.
  virtual Result<std::vector<ClaimedJob>> ClaimItems(const std::string& worker,
                                                     const std::vector<std::string>& stages,
                                                     int items, int64_t lease_ms) = 0;
  // Extends the leases of every job `worker` holds; records the worker's heartbeat.
  virtual Result<int> Heartbeat(const std::string& worker, int64_t lease_ms) = 0;
  // Returns jobs whose lease expired to pending (or failed, at max attempts).
  virtual Result<int> RescueExpired() = 0;
  // The worker process `pid` of run `run_id` is gone; its leases need not wait to expire.
  // Rescue: as if they had expired now (suspects, an attempt spent, failed at max
  // attempts), recording `error_class` and `reason`: the supervisor killed it for
  // exceeding its time budget. Release: back to pending without spending an attempt: it
  // stopped because the store failed, which is no fault of its inputs.
  virtual Result<int> RescueWorkerJobs(int64_t run_id, int pid, const std::string& error_class,
                                       const std::string& reason) = 0;
  virtual Result<int> ReleaseWorkerJobs(int64_t run_id, int pid) = 0;
  // Records outcomes in one transaction, each fenced by its lease token, as they are
  // given: a failure with a retry time goes back to pending then, one without fails
  // (the retry decision is the worker's). A done outcome with a fetched file makes the
  // item that file, and skips the stages that do not apply to its kind.
  virtual Result<CompleteStats> Complete(const std::vector<FinishedJob>& batch) = 0;
  // Gives unstarted or interrupted jobs back without spending an attempt.
  virtual Result<int> Release(const std::vector<ClaimedJob>& jobs) = 0;
  // Pending + running jobs of `stages` (whether a worker should keep going), and
  // the earliest time one in backoff becomes claimable (0 if none).
  struct Outstanding {
    int64_t pending = 0, running = 0, next_run_at = 0;
    int64_t now = 0;  // the store's clock at the count: next_run_at is on it, not the worker's
  };
  virtual Result<Outstanding> CountOutstanding(const std::vector<std::string>& stages) = 0;
  // Waits up to `ms` for a sign that jobs may have become claimable: an enqueue, a
  // promotion, a retry or a release by any process on any machine. PostgreSQL is woken
  // by LISTEN/NOTIFY; SQLite cannot be, and sleeps the whole time. True when woken.
  virtual Result<bool> WaitForWork(int64_t ms) = 0;

  // --- runs and workers bookkeeping ---
  virtual Result<int64_t> BeginRun(int workers, const std::string& stages) = 0;
  virtual Status EndRun(int64_t run_id, int exit_code) = 0;
  virtual Status RegisterWorker(const std::string& worker, int64_t run_id, int pid,
                                const std::string& host) = 0;
  virtual Status WorkerStopped(const std::string& worker) = 0;
  // Adds to the worker's out-of-memory events and items that fell back to the CPU, and
  // records its device, the device's total and the largest peak it has seen.
  virtual Status AddGpuEvents(const std::string& worker, const DeviceUse& use) = 0;

  // --- the batch tuner's memory ---
  virtual Result<std::optional<TuningRecord>> LoadTuning(const std::string& op,
                                                         const std::string& device,
                                                         int size_bucket) = 0;
  virtual Status SaveTuning(const TuningRecord& record) = 0;

  // --- user commands ---
  // Failed jobs of `stage` whose error_class is `error_class` (empty: any) go back to
  // pending, their failed dependants waiting again.
  virtual Result<int64_t> RetryFailed(const std::string& stage, const std::string& error_class) = 0;
  // Deletes old history (see GcOptions) in one transaction; counts what it removed (or
  // would remove, with dry_run).
  virtual Result<GcStats> CollectGarbage(const GcOptions& options) = 0;
  virtual Result<std::vector<StageCounts>> Counts(int64_t window_ms) = 0;
  virtual Result<int64_t> ItemCount() = 0;
  virtual Result<std::vector<ErrorClassCount>> FailuresByClass() = 0;
  // Failed attempts of `error_class` ("lease_expired": leases rescued) recorded at or after
  // `since_ms` (the store's clock, as RunRecord::started_at).
  virtual Result<int64_t> CountErrorsSince(const std::string& error_class, int64_t since_ms) = 0;
  // The newest `limit` runs, newest first.
  virtual Result<std::vector<RunRecord>> Runs(int limit) = 0;
  Result<std::optional<RunRecord>> LastRun();
  // Every item (the dataset item too) with its jobs and their results, in item order,
  // read in pages each in its own read transaction as ForEachResult reads.
  virtual Status ForEachItem(const std::function<Status(const ItemView&)>& fn) = 0;
  // The newest `limit` failed attempts, newest first.
  virtual Result<std::vector<ErrorRecord>> ErrorHistory(int64_t limit) = 0;
  // The own times of each stage's `limit` newest done jobs (by job id) that have one, each
  // stage's newest first: every stage with done jobs has its figure however many jobs later
  // stages finished since. Reads index entries, not the whole table.
  virtual Result<std::vector<JobTime>> RecentJobTimes(int64_t limit) = 0;
  // ForEachResult: see ResultReader.
};

struct StoreOptions {
  int busy_wait_ms = 2000;  // one lock wait inside SQLite before the transaction restarts
  // PostgreSQL: leases, backoff and history are timed by the server's clock, so workers on
  // machines whose clocks disagree cannot steal live leases. false: by the Clock given
  // to the store (tests that drive time).
  bool server_time = true;
  int reconnect_for_ms = 60'000;  // PostgreSQL: how long a lost server is waited for
  // PostgreSQL: how long opening waits for a server that is not up (yet); a worker started
  // while the server restarts waits, a command with a mistyped URI fails at once.
  int connect_wait_ms = 0;
  int export_page_rows = 1000;  // ForEachResult's rows per read transaction
};

// Opens the job store `db` names (FRAMEMILL_DB, --db): a PostgreSQL connection URI
// (postgresql://user@host:5432/framemill), or else a SQLite file; created (SQLite) and
// migrated if needed. The one place a store is chosen by its name, so callers work on
// whichever store the user configured. `graph` and `clock` must outlive the store.
Result<std::unique_ptr<JobStore>> OpenJobStore(const std::string& db, const StageGraph* graph,
                                               const Clock* clock,
                                               const StoreOptions& options = {});

// Opens (creating and migrating if needed) the SQLite store at `path`.
// `graph` and `clock` must outlive the store.
Result<std::unique_ptr<JobStore>> OpenSqliteJobStore(const std::string& path,
                                                     const StageGraph* graph,
                                                     const Clock* clock,
                                                     const StoreOptions& options = {});

// Whether `db` names a PostgreSQL server (postgresql:// or postgres://) rather than a file.
bool IsPostgresUri(std::string_view db);
// `db` with a URI's password replaced by "***", for messages and logs.
std::string RedactedUri(const std::string& db);

// Connects to the PostgreSQL database `uri` names and migrates it if needed.
// `graph` and `clock` must outlive the store.
Result<std::unique_ptr<JobStore>> OpenPgJobStore(const std::string& uri, const StageGraph* graph,
                                                 const Clock* clock,
                                                 const StoreOptions& options = {});

}  // namespace framemill
