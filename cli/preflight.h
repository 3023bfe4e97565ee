// What `run` checks before it claims anything: that every stage it would work on can run
// (its settings make sense, its models are installed), so that a first run stops with
// the one command that fixes it instead of failing every job. Main thread only.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "cli/command.h"

namespace framemill {

struct PreflightOptions {
  bool fetch_models = false;  // --fetch-models: install what is missing, then go on
  bool forever = false;       // every selected stage, not only those with work waiting
};

// InvalidArgument (exit 2) naming the stage, the key or the missing models and the
// command that installs them; IOError when the store cannot be read (exit 4).
Status Preflight(const Env& env, const std::vector<std::string>& stages,
                 const PreflightOptions& options);

}  // namespace framemill
