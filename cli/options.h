// The configuration turned into each module's own options: the one place that knows
// both the settings (configs/) and the modules they configure, so that no module below
// the CLI includes configs/. tests/cli/options_test.cc checks that the defaults agree.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "configs/config.h"
#include "gpu/policy.h"
#include "scheduler/supervisor.h"
#include "stages/registry.h"
#include "storage/job_store.h"

namespace framemill {

StageOptions ToStageOptions(const Config& c);
gpu::GpuOptions ToGpuOptions(const Config& c);
// `stages`: resolved and dependency-closed; `forever`: --forever.
RunOptions ToRunOptions(const Config& c, const std::vector<std::string>& stages, bool forever);
EnqueueOptions ToEnqueueOptions(const Config& c, const std::vector<std::string>& stages);

}  // namespace framemill
