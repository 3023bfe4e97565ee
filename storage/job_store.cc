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

std::map<std::pair<std::string, MediaKind>, JobTimeSummary> SummariseJobTimes(
    const std::vector<JobTime>& times) {
  std::map<std::pair<std::string, MediaKind>, std::vector<int64_t>> by;
  for (const JobTime& t : times) by[{t.stage, t.kind}].push_back(t.run_ms);
  std::map<std::pair<std::string, MediaKind>, JobTimeSummary> out;
  for (auto& [key, ms] : by) {
    JobTimeSummary& s = out[key];
    s.jobs = static_cast<int64_t>(ms.size());
    for (int64_t m : ms) s.total_ms += m;
    std::nth_element(ms.begin(), ms.begin() + static_cast<long>(ms.size() / 2), ms.end());
    s.median_ms = ms[ms.size() / 2];
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
