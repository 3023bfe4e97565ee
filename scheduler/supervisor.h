// `framemill run`: forks the worker processes, shows progress, replaces workers
// that crash, and turns SIGINT/SIGTERM into a graceful stop (a second one stops at
// once). Runs in the main thread of the CLI process.
#pragma once

#include <string>
#include <vector>

#include "configs/config.h"
#include "stages/registry.h"

namespace framemill {

struct RunRequest {
  std::vector<std::string> stages;  // resolved, dependency-closed names
  bool forever = false;
};

// Returns the process exit code of the contract: 0 all done, 3 some jobs failed
// permanently, 130 interrupted, 1 the store failed.
int RunWorkers(const Config& config, const StageRegistry& registry, const RunRequest& request);

}  // namespace framemill
