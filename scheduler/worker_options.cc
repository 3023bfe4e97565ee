#include "scheduler/worker_options.h"

#include <sys/stat.h>

#include <chrono>

namespace framemill {
namespace {

// The size in MB of a job's file; 0 for a URL not yet fetched or a file gone.
double SourceMegabytes(const ClaimedJob& job) {
  struct stat st {};
  if (job.source.find("://") != std::string::npos || stat(job.source.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_size) / (1 << 20);
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

}  // namespace framemill
