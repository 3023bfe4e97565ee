#include "storage/job_store.h"

#include <algorithm>

#include "storage/pg_db.h"

namespace framemill {

Result<std::optional<RunRecord>> JobStore::LastRun() {
  auto runs = Runs(1);
  if (!runs.ok()) return runs.status();
  if (runs->empty()) return std::optional<RunRecord>();
  return std::optional<RunRecord>(runs->front());
}

double RunRecord::BusyShare(const RunDevice& device, int64_t now_ms) const {
  const int64_t wall = (finished_at > 0 ? finished_at : now_ms) - started_at;
  if (wall <= 0) return 0;
  return std::clamp(static_cast<double>(device.busy_ms) / static_cast<double>(wall), 0.0, 1.0);
}

std::map<std::pair<std::string, MediaKind>, JobTimeSummary> SummariseJobTimes(
    const std::vector<JobTime>& times) {
  std::map<std::pair<std::string, MediaKind>, std::vector<const JobTime*>> by;
  for (const JobTime& t : times) by[{t.stage, t.kind}].push_back(&t);
  std::map<std::pair<std::string, MediaKind>, JobTimeSummary> out;
  for (auto& [key, jobs] : by) {
    JobTimeSummary& s = out[key];
    s.jobs = static_cast<int64_t>(jobs.size());
    for (const JobTime* t : jobs) s.total_ms += t->run_ms;
    const auto mid = jobs.begin() + static_cast<long>(jobs.size() / 2);
    std::nth_element(jobs.begin(), mid, jobs.end(),
                     [](const JobTime* a, const JobTime* b) { return a->run_ms < b->run_ms; });
    s.median_ms = (*mid)->run_ms;
    s.median_split = (*mid)->split;
  }
  return out;
}

bool IsPostgresUri(std::string_view db) {
  return db.rfind("postgresql://", 0) == 0 || db.rfind("postgres://", 0) == 0;
}

std::string RedactedUri(const std::string& uri) {
  std::string out = uri;
  const size_t scheme = out.find("://");
  if (scheme != std::string::npos) {
    const size_t start = scheme + 3;
    const size_t at = out.find('@', start);
    const size_t slash = out.find('/', start);
    if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
      const size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  for (size_t p = out.find("password="); p != std::string::npos;
       p = out.find("password=", p + 1)) {
    const size_t end = out.find('&', p);
    out.replace(p + 9, (end == std::string::npos ? out.size() : end) - p - 9, "***");
  }
  return out;
}

void AddEnqueueRows(EnqueueOptions* o, OptionRows* rows) {
  rows->push_back(IntRow("enqueue.priority", "", "--priority", {&o->priority}, -1'000'000,
                         1'000'000));
  rows->push_back(IntRow("run.max_attempts", "FRAMEMILL_MAX_ATTEMPTS", "", {&o->max_attempts}, 1,
                         100));
}

Result<std::unique_ptr<JobStore>> OpenJobStore(const std::string& db, const StageGraph* graph,
                                               const Clock* clock, const StoreOptions& options) {
  if (IsPostgresUri(db)) return OpenPgJobStore(db, graph, clock, options);
  return OpenSqliteJobStore(db, graph, clock, options);
}

}  // namespace framemill
