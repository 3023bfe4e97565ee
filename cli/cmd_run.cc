#include "cli/command.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "cli/options.h"
#include "cli/preflight.h"
#include "fetch/fetcher.h"
#include "scheduler/supervisor.h"

namespace framemill {

int CmdRun(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  auto stages = ResolveStages(*env);
  if (!stages.ok()) return UsageError(stages.status().message());
  if (Status st = CheckStoreExists(*env); !st.ok()) return UsageError(st.message());
  const Settings& config = env->config;
  std::vector<std::string> run_stages = *stages;
  if (const StageSpec* downloader = env->registry->graph().Downloader()) {
    // Whatever stages are asked for, a URL item's media arrive only through its download.
    if (std::find(run_stages.begin(), run_stages.end(), downloader->name) == run_stages.end())
      run_stages.insert(run_stages.begin(), downloader->name);
    // Named temporaries (only where O_TMPFILE is missing) of transfers that cannot still
    // be running: every transfer ends within its total timeout.
    const int64_t stale_s = std::max<int64_t>(60, 2 * config.stage.fetch.total_timeout_ms / 1000);
    Status tmp = fetch::RemoveStaleTempFiles(config.out(), stale_s);
    if (!tmp.ok()) spdlog::warn("could not clean fetch temporaries: {}", tmp.ToString());
  }
  PreflightOptions pre;
  pre.fetch_models = f.fetch_models;
  pre.forever = f.forever;
  if (Status st = Preflight(*env, run_stages, pre); !st.ok())
    return st.IsInvalidArgument() ? UsageError(st.message()) : StoreError(st);
  const ExitCode code =
      RunWorkers(ToRunOptions(config, run_stages, f.forever), *env->registry);
  if (code == ExitCode::kOk || code == ExitCode::kSomeFailed) {
    std::fprintf(stderr, "results: framemill export --db %s (artifacts under %s)\n",
                 RedactedUri(config.db()).c_str(), config.out().c_str());
  }
  return ToInt(code);
}

}  // namespace framemill
