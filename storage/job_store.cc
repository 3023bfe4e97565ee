#include "storage/job_store.h"

namespace framemill {

Result<std::unique_ptr<JobStore>> OpenJobStore(const std::string& db, const StageGraph* graph,
                                               const Clock* clock, const StoreOptions& options) {
  return OpenSqliteJobStore(db, graph, clock, options);
}

}  // namespace framemill
