#include "storage/job_store.h"

#include "storage/pg_db.h"

namespace framemill {

Result<std::optional<RunRecord>> JobStore::LastRun() {
  auto runs = Runs(1);
  if (!runs.ok()) return runs.status();
  if (runs->empty()) return std::optional<RunRecord>();
  return std::optional<RunRecord>(runs->front());
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
