// Job store benchmark, after leveldb's benchmarks/db_bench.cc: a plain executable
// that prints its setup and then one line per named workload. It measures only;
// nothing is asserted about timings. The one hard failure is a correctness check:
// the multi-process workloads verify every job was claimed and done exactly once.
//
//   store_bench [--benchmarks=enqueue,claim_complete_16,...] [--num=50000]
//               [--db_dir=DIR] [--latency_reps=2000] [--big=1000000]
//               [--pg=postgresql://user@host:port]
//
// With --pg every workload runs on that PostgreSQL server instead of SQLite files, each in
// a database of its own (fmbench_<workload>, dropped afterwards); scripts/pg-bench.sh starts
// a server with the settings bench/README.md reports and runs both stores in one go.
//
// Workloads (default: all, in this order):
//   enqueue               Enqueue --num items (one "lighting" job each), 10,000 per call
//   reenqueue             the same --num items again into that store (as `framemill enqueue`
//                         of a folder passes its known files, so that missing jobs are added):
//                         nothing is added; timed is the second pass only
//   claim_complete_1      one process: Claim(limit=1) + Complete, until --num jobs done
//   claim_complete_16     the same in batches of 16 (one Complete call per batch)
//   claim_complete_64     the same in batches of 64
//   contend_2, contend_4  fork 2 / 4 processes on one db file, each Claim(16)+Complete
//                         until nothing is left; verifies exactly-once afterwards
//   contend_<P>_b<B>      the same with P processes and batches of B (contend_16_b64)
//   claim_latency_10k     10,000 pending jobs: per-call latency of Claim(16) (+Complete)
//   claim_latency_1m      the same with --big (1,000,000) pending jobs
//   claim_latency_1m_mostly_done
//                         --big jobs of which all but 10,000 are already done
//
// Every workload uses a fresh database file under --db_dir; setup (filling the store,
// generating items) happens outside the timed region.
#include <sqlite3.h>

#include <nlohmann/json.hpp>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "jobs/job.h"
#include "jobs/stage_graph.h"
#include "storage/job_store.h"
#include "storage/pg_db.h"

namespace framemill {
namespace {

// ---------------------------------------------------------------- flags

struct Flags {
  int64_t num = 50000;
  std::string db_dir;  // empty: a fresh temp dir
  std::string benchmarks =
      "enqueue,reenqueue,claim_complete_1,claim_complete_16,claim_complete_64,contend_2,contend_4,"
      "claim_latency_10k,claim_latency_1m,claim_latency_1m_mostly_done";
  int latency_reps = 2000;
  int64_t big = 1000000;  // jobs in the "1m" latency stores
  std::string pg;         // a PostgreSQL server URI without a database: run there
};
Flags FLAGS;

constexpr char kStage[] = "lighting";
constexpr int kChunk = 10000;              // items per Enqueue call, as the CLI does
constexpr int64_t kLeaseMs = 10 * 60 * 1000;
constexpr char kResult[] = "{\"mean_luminance\":0.5}";
constexpr char kMediaInfo[] = "{\"format\":\"jpeg\",\"width\":1920,\"height\":1080}";
constexpr int kLatencyBatch = 16;
constexpr int64_t kLatencyPending = 10000;

[[noreturn]] void Fail(const char* fmt, ...) {
  std::fflush(stdout);
  std::fprintf(stderr, "\n*** FAILED: ");
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "\n");
  std::exit(1);
}

template <typename T>
T Check(Result<T> r, const char* what) {
  if (!r.ok()) Fail("%s: %s", what, r.status().ToString().c_str());
  return std::move(r).value();
}

// ---------------------------------------------------------------- clocks

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t ProcessCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int64_t ChildrenCpuNs() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  auto ns = [](const timeval& tv) { return int64_t{tv.tv_sec} * 1'000'000'000 + tv.tv_usec * 1000; };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

// ---------------------------------------------------------------- setup helpers

const StageGraph& Graph() {
  static const StageGraph* g = [] {
    auto* graph = new StageGraph();
    std::string err;
    StageSpec s;
    s.name = kStage;
    if (!graph->Add(s, &err)) Fail("stage graph: %s", err.c_str());
    return graph;
  }();
  return *g;
}

EnqueueOptions Options() {
  EnqueueOptions o;
  o.stages = {kStage};
  return o;
}

// Items numbered [first, first + count): "/data/img-000123.jpg", random size and hash.
std::vector<NewItem> MakeItems(int64_t first, int64_t count, std::mt19937_64& rng) {
  std::vector<NewItem> out;
  out.reserve(static_cast<size_t>(count));
  char buf[64];
  for (int64_t i = first; i < first + count; ++i) {
    NewItem it;
    std::snprintf(buf, sizeof buf, "/data/img-%06" PRId64 ".jpg", i);
    it.source = buf;
    it.kind = MediaKind::kImage;
    it.size = 100000 + static_cast<int64_t>(rng() % 5000000);
    it.mtime_ns = 1'700'000'000'000'000'000 + static_cast<int64_t>(rng() % 1'000'000'000'000);
    std::snprintf(buf, sizeof buf, "%016" PRIx64, static_cast<uint64_t>(rng()));
    it.content_hash = buf;
    it.media_info = kMediaInfo;
    out.push_back(std::move(it));
  }
  return out;
}

std::string DbPath(const std::string& name) {
  if (!FLAGS.pg.empty()) return FLAGS.pg + "/fmbench_" + name;
  return FLAGS.db_dir + "/" + name + ".db";
}

// A statement on the server's maintenance database (CREATE/DROP DATABASE).
void PgAdmin(const std::string& sql) {
  auto db = PgDb::Open(FLAGS.pg + "/postgres");
  if (!db.ok()) Fail("%s", db.status().ToString().c_str());
  Status s = (*db)->Exec(sql);
  if (!s.ok()) Fail("%s: %s", sql.c_str(), s.ToString().c_str());
}
std::string PgName(const std::string& path) { return path.substr(path.rfind('/') + 1); }

void RemoveDb(const std::string& path) {
  if (!FLAGS.pg.empty()) return PgAdmin("DROP DATABASE IF EXISTS " + PgName(path));
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((path + suffix).c_str());
}

// A copy of the store at `from` under `to`.
void CopyDb(const std::string& from, const std::string& to) {
  if (!FLAGS.pg.empty())
    return PgAdmin("CREATE DATABASE " + PgName(to) + " TEMPLATE " + PgName(from));
  std::filesystem::copy_file(from, to);
}

std::string FreshDb(const std::string& name) {
  std::string path = DbPath(name);
  RemoveDb(path);
  if (!FLAGS.pg.empty()) PgAdmin("CREATE DATABASE " + PgName(path));
  return path;
}

std::unique_ptr<JobStore> Open(const std::string& path) {
  return Check(OpenJobStore(path, &Graph(), SystemClock()), "open store");
}

// Enqueues items [first, first + count) in calls of kChunk; returns seconds taken.
double Fill(JobStore& store, int64_t first, int64_t count, std::mt19937_64& rng) {
  double secs = 0;
  for (int64_t at = first; at < first + count; at += kChunk) {
    auto items = MakeItems(at, std::min<int64_t>(kChunk, first + count - at), rng);
    int64_t t0 = NowNs();
    auto st = Check(store.Enqueue(items, Options()), "enqueue");
    secs += (NowNs() - t0) / 1e9;
    if (st.jobs_added != static_cast<int64_t>(items.size()))
      Fail("enqueue added %" PRId64 " jobs for %zu items", st.jobs_added, items.size());
  }
  return secs;
}

// A connection to the PostgreSQL store at `path`, or the benchmark ends saying why not.
std::unique_ptr<PgDb> PgOrFail(const std::string& path) {
  auto pg = PgDb::Open(path);
  if (!pg.ok()) Fail("%s", pg.status().ToString().c_str());
  return std::move(pg).value();
}

// A direct read-only connection, for verification and counting.
int64_t CountSql(const std::string& path, const std::string& sql) {
  if (!FLAGS.pg.empty()) {
    auto pg = PgOrFail(path);
    auto st = pg->Prepare(sql);
    if (!st.ok()) Fail("%s: %s", sql.c_str(), st.status().ToString().c_str());
    auto row = st->Step();
    if (!row.ok() || !*row) Fail("%s: no row", sql.c_str());
    return st->Int(0);
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
    Fail("open %s: %s", path.c_str(), sqlite3_errmsg(db));
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
    Fail("prepare %s: %s", sql.c_str(), sqlite3_errmsg(db));
  if (sqlite3_step(st) != SQLITE_ROW) Fail("step %s: %s", sql.c_str(), sqlite3_errmsg(db));
  int64_t n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

void ExecSql(const std::string& path, const std::string& sql) {
  if (!FLAGS.pg.empty()) {
    auto pg = PgOrFail(path);
    Status s = pg->Exec(sql);
    if (!s.ok()) Fail("%s: %s", sql.c_str(), s.ToString().c_str());
    return;
  }
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) Fail("open %s", path.c_str());
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK)
    Fail("exec %s: %s", sql.c_str(), err ? err : "?");
  sqlite3_close(db);
}

std::vector<FinishedJob> DoneFor(const std::vector<ClaimedJob>& jobs) {
  static const nlohmann::json result = nlohmann::json::parse(kResult);
  std::vector<FinishedJob> out;
  out.reserve(jobs.size());
  for (const ClaimedJob& j : jobs)
    out.push_back({j.id, j.lease_token, Outcome::Done(result), 0, 0, j.stage});
  return out;
}

// ---------------------------------------------------------------- reporting

void Report(const char* name, int64_t ops, double wall_s, double cpu_s, const std::string& extra) {
  const double us_op = wall_s * 1e6 / static_cast<double>(ops);
  std::printf("%-29s: %9.2f µs/op %10.0f ops/s", name, us_op, ops / wall_s);
  if (cpu_s >= 0) std::printf("  cpu %7.2f µs/job", cpu_s * 1e6 / static_cast<double>(ops));
  if (!extra.empty()) std::printf("  (%s)", extra.c_str());
  std::printf("\n");
  std::fflush(stdout);
}

std::string Fmt(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

// ---------------------------------------------------------------- workloads

// --num items in calls of kChunk, as the CLI enqueues them (the same items every call).
std::vector<std::vector<NewItem>> ItemChunks() {
  std::mt19937_64 rng(1);
  std::vector<std::vector<NewItem>> chunks;
  for (int64_t at = 0; at < FLAGS.num; at += kChunk)
    chunks.push_back(MakeItems(at, std::min<int64_t>(kChunk, FLAGS.num - at), rng));
  return chunks;
}

void BenchEnqueue() {
  std::string path = FreshDb("enqueue");
  auto store = Open(path);
  const std::vector<std::vector<NewItem>> chunks = ItemChunks();
  int64_t c0 = ProcessCpuNs(), t0 = NowNs();
  int64_t added = 0;
  for (const auto& items : chunks) added += Check(store->Enqueue(items, Options()), "enqueue").jobs_added;
  int64_t t1 = NowNs(), c1 = ProcessCpuNs();
  if (added != FLAGS.num) Fail("enqueue: %" PRId64 " jobs added, want %" PRId64, added, FLAGS.num);
  Report("enqueue", FLAGS.num, (t1 - t0) / 1e9, (c1 - c0) / 1e9,
         Fmt("%" PRId64 " items in calls of %d", FLAGS.num, kChunk));
}

void BenchReenqueue() {
  std::string path = FreshDb("reenqueue");
  auto store = Open(path);
  const std::vector<std::vector<NewItem>> chunks = ItemChunks();
  for (const auto& items : chunks) Check(store->Enqueue(items, Options()), "enqueue");
  int64_t c0 = ProcessCpuNs(), t0 = NowNs();
  int64_t unchanged = 0, added = 0;
  for (const auto& items : chunks) {
    EnqueueStats st = Check(store->Enqueue(items, Options()), "reenqueue");
    unchanged += st.items_unchanged;
    added += st.items_added + st.jobs_added;
  }
  int64_t t1 = NowNs(), c1 = ProcessCpuNs();
  if (unchanged != FLAGS.num || added != 0)
    Fail("reenqueue: %" PRId64 " unchanged and %" PRId64 " added, want %" PRId64 " and 0",
         unchanged, added, FLAGS.num);
  Report("reenqueue", FLAGS.num, (t1 - t0) / 1e9, (c1 - c0) / 1e9,
         Fmt("%" PRId64 " known items again in calls of %d", FLAGS.num, kChunk));
}

void BenchClaimComplete(const char* name, int batch) {
  std::string path = FreshDb(name);
  auto store = Open(path);
  std::mt19937_64 rng(2);
  Fill(*store, 0, FLAGS.num, rng);
  const std::vector<std::string> stages = {kStage};
  int64_t done = 0, calls = 0;
  int64_t c0 = ProcessCpuNs(), t0 = NowNs();
  while (done < FLAGS.num) {
    auto jobs = Check(store->Claim("bench-worker", stages, batch, kLeaseMs), "claim");
    if (jobs.empty()) Fail("%s: nothing claimable after %" PRId64 " of %" PRId64, name, done, FLAGS.num);
    auto st = Check(store->Complete(DoneFor(jobs)), "complete");
    if (st.done != static_cast<int>(jobs.size()))
      Fail("%s: Complete recorded %d of %zu (stale %d)", name, st.done, jobs.size(), st.stale);
    done += st.done;
    ++calls;
  }
  int64_t t1 = NowNs(), c1 = ProcessCpuNs();
  Report(name, done, (t1 - t0) / 1e9, (c1 - c0) / 1e9,
         Fmt("%" PRId64 " jobs, %" PRId64 " Claim+Complete pairs of %d", done, calls, batch));
}

// One child of a contend_* run: claims batches of 16 until nothing is left, writing the
// ids it completed to `ids_path`. Exit status 0 when all went well.
int ContendChild(const std::string& path, const std::string& ids_path, int ready_fd, int go_fd,
                 int batch) {
  auto store_r = OpenJobStore(path, &Graph(), SystemClock());
  if (!store_r.ok()) {
    std::fprintf(stderr, "child %d: open: %s\n", getpid(), store_r.status().ToString().c_str());
    return 2;
  }
  auto store = std::move(store_r).value();
  std::string worker = "bench-" + std::to_string(getpid());
  std::vector<int64_t> ids;
  char c = 'r';
  if (write(ready_fd, &c, 1) != 1) return 3;
  if (read(go_fd, &c, 1) != 1) return 3;
  const std::vector<std::string> stages = {kStage};
  int rc = 0;
  for (;;) {
    auto jobs = store->Claim(worker, stages, batch, kLeaseMs);
    if (!jobs.ok()) {
      std::fprintf(stderr, "child %d: claim: %s\n", getpid(), jobs.status().ToString().c_str());
      rc = 4;
      break;
    }
    if (jobs->empty()) break;
    auto st = store->Complete(DoneFor(*jobs));
    if (!st.ok()) {
      std::fprintf(stderr, "child %d: complete: %s\n", getpid(), st.status().ToString().c_str());
      rc = 5;
      break;
    }
    if (st->done != static_cast<int>(jobs->size())) {
      std::fprintf(stderr, "child %d: Complete recorded %d of %zu (stale %d)\n", getpid(),
                   st->done, jobs->size(), st->stale);
      rc = 6;
    }
    for (const ClaimedJob& j : *jobs) ids.push_back(j.id);
  }
  store.reset();
  std::ofstream f(ids_path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(ids.data()),
          static_cast<std::streamsize>(ids.size() * sizeof(int64_t)));
  if (!f) return 7;
  return rc;
}

void BenchContend(const char* name, int procs, int batch) {
  std::string path = FreshDb(name);
  {
    auto store = Open(path);
    std::mt19937_64 rng(3);
    Fill(*store, 0, FLAGS.num, rng);
  }  // closed (and checkpointed) before forking: children must not inherit a connection
  int ready[2], go[2];
  if (pipe(ready) != 0 || pipe(go) != 0) Fail("pipe: %s", std::strerror(errno));
  std::vector<pid_t> pids;
  std::vector<std::string> id_files;
  for (int p = 0; p < procs; ++p) {
    id_files.push_back(FLAGS.db_dir + "/" + name + ".ids." + std::to_string(p));
    std::remove(id_files.back().c_str());
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) Fail("fork: %s", std::strerror(errno));
    if (pid == 0) {
      close(ready[0]);
      close(go[1]);
      _exit(ContendChild(path, id_files.back(), ready[1], go[0], batch));
    }
    pids.push_back(pid);
  }
  close(ready[1]);
  close(go[0]);
  for (int p = 0; p < procs; ++p) {
    char c;
    if (read(ready[0], &c, 1) != 1) Fail("%s: a child died before starting", name);
  }
  // Children have opened their stores; the clock starts when they are let go.
  int64_t cpu0 = ChildrenCpuNs(), t0 = NowNs();
  std::string go_bytes(static_cast<size_t>(procs), 'g');
  if (write(go[1], go_bytes.data(), go_bytes.size()) != static_cast<ssize_t>(procs))
    Fail("write go pipe");
  bool child_failed = false;
  for (pid_t pid : pids) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) Fail("waitpid: %s", std::strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "%s: child %d exited with status %d\n", name, pid, status);
      child_failed = true;
    }
  }
  int64_t t1 = NowNs(), cpu1 = ChildrenCpuNs();
  close(ready[0]);
  close(go[1]);

  // Verify: every job done exactly once, and claimed by exactly one child.
  std::vector<int64_t> all;
  std::string per_child;
  for (const std::string& f : id_files) {
    std::ifstream in(f, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t n = bytes.size() / sizeof(int64_t);
    size_t old = all.size();
    all.resize(old + n);
    std::memcpy(all.data() + old, bytes.data(), n * sizeof(int64_t));
    per_child += (per_child.empty() ? "" : "/") + std::to_string(n);
    std::remove(f.c_str());
  }
  std::sort(all.begin(), all.end());
  const int64_t dup = static_cast<int64_t>(all.size()) -
                      (std::unique(all.begin(), all.end()) - all.begin());
  const int64_t jobs = CountSql(path, "SELECT count(*) FROM jobs");
  const int64_t done = CountSql(path, "SELECT count(*) FROM jobs WHERE state = 2");
  const int64_t results = CountSql(path, "SELECT count(*) FROM results");
  const int64_t once = CountSql(path, "SELECT count(*) FROM jobs WHERE state = 2 AND attempts = 1");
  if (child_failed || dup != 0 || jobs != FLAGS.num || done != FLAGS.num ||
      results != FLAGS.num || once != FLAGS.num) {
    std::printf("%-29s: FAILED FAILED FAILED  jobs=%" PRId64 " done=%" PRId64 " results=%" PRId64
                " done_first_attempt=%" PRId64 " claimed_twice=%" PRId64 " want %" PRId64
                "%s\n",
                name, jobs, done, results, once, dup, FLAGS.num,
                child_failed ? " (a child failed)" : "");
    Fail("%s: not every job was done exactly once", name);
  }
  Report(name, FLAGS.num, (t1 - t0) / 1e9, (cpu1 - cpu0) / 1e9,
         Fmt("%d processes, batches of %d, jobs per process %s; verified exactly once", procs,
             batch, per_child.c_str()));
}

// ---- claim latency

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, max = 0;
};
Percentiles Pct(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]; };
  return {at(0.50), at(0.90), at(0.99), v.back()};
}

// A store holding `jobs` pending jobs, filled once per run through Enqueue and copied
// for each workload that needs it. Removed at the end of the run.
std::vector<std::pair<std::string, std::string>> g_templates;  // path, how it was filled

std::string Template(int64_t jobs, std::string* how) {
  std::string path = DbPath("template_" + std::to_string(jobs));
  for (auto& [p, h] : g_templates)
    if (p == path) {
      *how = h;
      return p;
    }
  path = FreshDb("template_" + std::to_string(jobs));
  std::mt19937_64 rng(4);
  double secs;
  {
    auto store = Open(path);
    secs = Fill(*store, 0, jobs, rng);
  }  // closing checkpoints the WAL into the file, so a plain copy is complete
  *how = Fmt("filled via Enqueue in %.2f s", secs);
  g_templates.emplace_back(path, *how);
  return path;
}

// History: the oldest `done` jobs finished, with results, via direct SQL.
void MarkDone(const std::string& path, int64_t done, std::string* how) {
  int64_t t0 = NowNs();
  ExecSql(path, Fmt("BEGIN;"
                    "UPDATE jobs SET state = 2, attempts = 1, started_at = created_at,"
                    " finished_at = created_at, device = 'cpu' WHERE id <= %" PRId64 ";"
                    "INSERT INTO results (job_id, device, result, artifacts, created_at)"
                    " SELECT id, 'cpu', '%s', '[]', created_at FROM jobs WHERE id <= %" PRId64 ";"
                    "COMMIT;",
                    done, kResult, done));
  *how += Fmt(", oldest %" PRId64 " then marked done via SQL in %.2f s", done,
              (NowNs() - t0) / 1e9);
  if (FLAGS.pg.empty()) return;
  // Done one by one, those jobs would have been vacuumed away as they went (the jobs
  // table's autovacuum settings); done in one statement, their dead index entries are all
  // still there. Wait, as a real run would, for autovacuum to clear them (no manual VACUUM).
  const int64_t w0 = NowNs();
  int64_t dead = 0;
  do {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    dead = CountSql(path, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'jobs'");
  } while (dead > done / 100 && NowNs() - w0 < 300'000'000'000);
  *how += Fmt(", then autovacuum left %" PRId64 " dead tuples after %.0f s", dead,
              (NowNs() - w0) / 1e9);
}

// Returns the claim p50 in µs.
double BenchClaimLatency(const char* name, int64_t jobs, int64_t done) {
  std::string how;
  std::string tmpl = Template(jobs, &how);
  std::string path = FreshDb(name);
  RemoveDb(path);
  CopyDb(tmpl, path);
  if (done > 0) MarkDone(path, done, &how);
  const int64_t pending = CountSql(path, "SELECT count(*) FROM jobs WHERE state = 0");
  if (!FLAGS.pg.empty()) {
    // A store just filled or copied is vacuumed and analysed by autovacuum (a million rows
    // take seconds of this machine's two cores): time the claims, not that, by starting
    // once no autovacuum worker has been busy for two seconds (at most a minute).
    const int64_t w0 = NowNs();
    int quiet = 0;
    while (quiet < 2 && NowNs() - w0 < 60'000'000'000) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      quiet = CountSql(path, "SELECT count(*) FROM pg_stat_activity WHERE backend_type ="
                             " 'autovacuum worker'") == 0 ? quiet + 1 : 0;
    }
    how += Fmt(", autovacuum quiet after %.0f s", (NowNs() - w0) / 1e9);
  }
  auto store = Open(path);
  std::mt19937_64 rng(5);
  const std::vector<std::string> stages = {kStage};
  const int warmup = 20;
  std::vector<double> claim_us, complete_us;
  int64_t next_item = jobs;
  for (int rep = 0; rep < warmup + FLAGS.latency_reps; ++rep) {
    int64_t t0 = NowNs();
    auto got = Check(store->Claim("bench-worker", stages, kLatencyBatch, kLeaseMs), "claim");
    int64_t t1 = NowNs();
    if (static_cast<int>(got.size()) != kLatencyBatch) Fail("%s: claimed %zu", name, got.size());
    auto st = Check(store->Complete(DoneFor(got)), "complete");
    int64_t t2 = NowNs();
    if (st.done != kLatencyBatch) Fail("%s: completed %d", name, st.done);
    if (rep >= warmup) {
      claim_us.push_back((t1 - t0) / 1e3);
      complete_us.push_back((t2 - t1) / 1e3);
    }
    // Untimed: top the queue up so the pending count stays where it started.
    auto items = MakeItems(next_item, kLatencyBatch, rng);
    next_item += kLatencyBatch;
    Check(store->Enqueue(items, Options()), "enqueue top-up");
  }
  Percentiles c = Pct(claim_us), k = Pct(complete_us);
  std::printf("%-29s: claim(16) p50 %8.1f  p90 %8.1f  p99 %8.1f  max %8.1f µs;"
              "  complete(16) p50 %7.1f  p99 %7.1f µs\n"
              "%-29s  (%" PRId64 " jobs, %" PRId64 " pending; %d reps after %d warm-up,"
              " queue topped up after each; %s)\n",
              name, c.p50, c.p90, c.p99, c.max, k.p50, k.p99, "", jobs, pending,
              FLAGS.latency_reps, warmup, how.c_str());
  std::fflush(stdout);
  return c.p50;
}

// ---------------------------------------------------------------- header

std::string FsType(const std::string& dir) {
  struct statfs s{};
  if (statfs(dir.c_str(), &s) != 0) return "?";
  switch (static_cast<unsigned long>(s.f_type)) {
    case 0xEF53: return "ext2/3/4";
    case 0x01021994: return "tmpfs";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x794c7630: return "overlayfs";
    default: return Fmt("0x%lx", static_cast<unsigned long>(s.f_type));
  }
}

void PrintHeader() {
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", std::localtime(&now));
  std::string model = "?", cache;
  int cores = 0;
  std::ifstream cpu("/proc/cpuinfo");
  for (std::string line; std::getline(cpu, line);) {
    auto val = [&] {
      auto p = line.find(':');
      return p == std::string::npos ? std::string() : line.substr(p + 2);
    };
    if (line.rfind("model name", 0) == 0) {
      model = val();
      ++cores;
    } else if (line.rfind("cache size", 0) == 0) {
      cache = val();
    }
  }
  std::printf("framemill store_bench\n");
  std::printf("Date:       %s\n", date);
  std::printf("CPU:        %d * %s\n", cores, model.c_str());
  if (!cache.empty()) std::printf("CPUCache:   %s\n", cache.c_str());
  if (FLAGS.pg.empty()) {
    std::printf("SQLite:     %s (WAL, synchronous=NORMAL, set by the store)\n", sqlite3_libversion());
    std::printf("DB dir:     %s (%s)\n", FLAGS.db_dir.c_str(), FsType(FLAGS.db_dir).c_str());
  } else {
    auto db = PgDb::Open(FLAGS.pg + "/postgres");
    if (!db.ok()) Fail("%s", db.status().ToString().c_str());
    std::string settings;
    // reset_val: the server's setting, not this session's (the store turns
    // synchronous_commit off for its autocommitted claims, on again for durable writes).
    for (const char* s : {"server_version", "fsync", "synchronous_commit", "shared_buffers",
                          "wal_buffers", "max_wal_size", "autovacuum_naptime"}) {
      auto q = (*db)->Prepare(std::string("SELECT reset_val || coalesce(' x ' || unit, '')"
                                          " FROM pg_settings WHERE name = '") + s + "'");
      if (q.ok() && q->Step().ok()) settings += Fmt("%s%s=%s", settings.empty() ? "" : ", ", s,
                                                    q->Text(0).c_str());
    }
    std::printf("PostgreSQL: %s on %s (jobs table: the migration's autovacuum settings)\n",
                settings.c_str(), RedactedUri(FLAGS.pg).c_str());
  }
  std::printf("Jobs:       %" PRId64 " per throughput workload; 1 stage \"%s\", 1 job per item\n",
              FLAGS.num, kStage);
  std::printf("Items:      source ~20 bytes (\"/data/img-000123.jpg\"), image, 16-hex hash,"
              " media_info %zu bytes\n", std::strlen(kMediaInfo));
  std::printf("Results:    %zu bytes (%s)\n", std::strlen(kResult), kResult);
  std::printf("Latency:    %d reps of Claim(%d)+Complete; stores of %" PRId64 " and %" PRId64
              " jobs\n", FLAGS.latency_reps, kLatencyBatch, kLatencyPending, FLAGS.big);
  std::printf("------------------------------------------------\n");
  std::fflush(stdout);
}

bool ParseFlag(const char* arg, const char* name, std::string* out) {
  size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *out = arg + n + 1;
  return true;
}

int Main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (ParseFlag(argv[i], "--num", &v)) {
      FLAGS.num = std::stoll(v);
    } else if (ParseFlag(argv[i], "--db_dir", &v)) {
      FLAGS.db_dir = v;
    } else if (ParseFlag(argv[i], "--benchmarks", &v)) {
      FLAGS.benchmarks = v;
    } else if (ParseFlag(argv[i], "--latency_reps", &v)) {
      FLAGS.latency_reps = std::stoi(v);
    } else if (ParseFlag(argv[i], "--big", &v)) {
      FLAGS.big = std::stoll(v);
    } else if (ParseFlag(argv[i], "--pg", &v)) {
      FLAGS.pg = v;
      while (!FLAGS.pg.empty() && FLAGS.pg.back() == '/') FLAGS.pg.pop_back();
    } else {
      std::fprintf(stderr, "unknown flag %s\nusage: %s [--benchmarks=a,b] [--num=N] [--db_dir=DIR]"
                   " [--latency_reps=N] [--big=N]\n", argv[i], argv[0]);
      return 2;
    }
  }
  if (FLAGS.num <= 0 || FLAGS.latency_reps <= 0 || FLAGS.big < 2 * kLatencyPending) {
    std::fprintf(stderr, "--num and --latency_reps must be > 0, --big >= %" PRId64 "\n",
                 2 * kLatencyPending);
    return 2;
  }
  bool temp_dir = false;
  if (FLAGS.db_dir.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "store_bench-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) Fail("mkdtemp: %s", std::strerror(errno));
    FLAGS.db_dir = tmpl;
    temp_dir = true;
  } else {
    std::filesystem::create_directories(FLAGS.db_dir);
  }
  PrintHeader();

  double p50_10k = -1, p50_1m = -1;
  std::string list = FLAGS.benchmarks;
  for (size_t pos = 0; pos <= list.size();) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    std::string name = list.substr(pos, end - pos);
    pos = end + 1;
    if (name.empty()) continue;
    if (name == "enqueue") {
      BenchEnqueue();
    } else if (name == "reenqueue") {
      BenchReenqueue();
    } else if (name == "claim_complete_1") {
      BenchClaimComplete("claim_complete_1", 1);
    } else if (name == "claim_complete_16") {
      BenchClaimComplete("claim_complete_16", 16);
    } else if (name == "claim_complete_64") {
      BenchClaimComplete("claim_complete_64", 64);
    } else if (name == "contend_2") {
      BenchContend("contend_2", 2, 16);
    } else if (name == "contend_4") {
      BenchContend("contend_4", 4, 16);
    } else if (int procs = 0, batch = 0;
               std::sscanf(name.c_str(), "contend_%d_b%d", &procs, &batch) == 2 && procs > 0 &&
               batch > 0) {
      BenchContend(name.c_str(), procs, batch);
    } else if (name == "claim_latency_10k") {
      p50_10k = BenchClaimLatency("claim_latency_10k", kLatencyPending, 0);
    } else if (name == "claim_latency_1m") {
      p50_1m = BenchClaimLatency("claim_latency_1m", FLAGS.big, 0);
    } else if (name == "claim_latency_1m_mostly_done") {
      BenchClaimLatency("claim_latency_1m_mostly_done", FLAGS.big, FLAGS.big - kLatencyPending);
    } else {
      std::fprintf(stderr, "unknown benchmark '%s'\n", name.c_str());
      return 2;
    }
    RemoveDb(DbPath(name));
  }
  if (p50_10k > 0 && p50_1m > 0)
    std::printf("claim_latency ratio 1m/10k p50 = %.2f\n", p50_1m / p50_10k);
  for (auto& [p, h] : g_templates) RemoveDb(p);
  if (temp_dir) std::filesystem::remove_all(FLAGS.db_dir);
  return 0;
}

}  // namespace
}  // namespace framemill

int main(int argc, char** argv) { return framemill::Main(argc, argv); }
