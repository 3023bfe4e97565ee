// `framemill run`: forks the worker processes, shows progress, replaces workers
// that crash, and turns SIGINT/SIGTERM into a graceful stop (a second one stops at
// once). Runs in the main thread of the CLI process.
#pragma once

#include <string>
#include <vector>

#include "configs/config.h"
#include "stages/registry.h"
#include "storage/job_store.h"

namespace framemill {

struct RunRequest {
  std::vector<std::string> stages;  // resolved, dependency-closed names
  bool forever = false;
};

// Opens the configured job store (its path and retry policy) with the real clock.
Result<std::unique_ptr<JobStore>> OpenConfiguredStore(const Config& config,
                                                      const StageRegistry& registry);

// Returns the process exit code of the contract: 0 all done, 3 some jobs failed
// permanently, 130 interrupted, 1 the store failed.
int RunWorkers(const Config& config, const StageRegistry& registry, const RunRequest& request);

}  // namespace framemill
