// What the commands hand the modules besides their settings (cli/settings.h holds those,
// in each module's own options): the stages resolved for this command, --forever, the
// path map, and the few values one module takes from another's settings (the fetch stage's
// batch and time budget, the face clusters' budget). Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "cli/settings.h"

namespace framemill {

// `stages`: resolved and dependency-closed; `forever`: --forever.
RunOptions ToRunOptions(const Settings& s, const std::vector<std::string>& stages, bool forever);
EnqueueOptions ToEnqueueOptions(const Settings& s, const std::vector<std::string>& stages);

}  // namespace framemill
