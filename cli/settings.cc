#include "cli/settings.h"

#include <algorithm>
#include <thread>

namespace framemill {
namespace {

// The table: the CLI's own rows, then each module's, in the order `framemill config` lists.
OptionRows SettingRows(Settings* s) {
  OptionRows rows;
  rows.push_back(TextRow("out", "FRAMEMILL_OUT", "--out", &s->stage.out_dir));
  AddRunRows(&s->run, &rows);  // db, workers, run.batch, ...
  rows.push_back(OptionalTextRow("path_map", "FRAMEMILL_PATH_MAP", &s->path_map));
  rows.push_back(TextRow("models", "FRAMEMILL_MODELS", "", &s->stage.models_dir));
  rows.push_back(TextChoiceRow("cpu_precision", "CPU_PRECISION", "", &s->stage.cpu_precision,
                               {"auto", "bf16", "fp32"}));
  rows.push_back(TextChoiceRow("log_level", "LOG_LEVEL", "", &s->log_level,
                               {"trace", "debug", "info", "warn", "error"}));
  rows.push_back(ListRow("run.stages", "FRAMEMILL_STAGES", "--stages", &s->stages,
                         "a comma-separated list of stage names, or all"));
  AddEnqueueRows(&s->enqueue, &rows);
  AddStageRows(&s->stage, &rows);
  rows.push_back(IntRow("fetch.batch", "FRAMEMILL_FETCH_BATCH", "", {&s->fetch_batch}, 1, 4096));
  rows.push_back(NumberRow("nsfw.unsafe_threshold", "FRAMEMILL_UNSAFE_THRESHOLD", &s->unsafe.threshold, 0, 1));
  gpu::AddGpuRows(&s->run.gpu, &rows);
  return rows;
}

}  // namespace

std::vector<std::string> SettingKeys() {
  Settings s;
  std::vector<std::string> keys;
  for (const OptionRow& r : SettingRows(&s)) keys.push_back(r.key);
  return keys;
}

Result<Settings> LoadSettings(const ConfigInputs& in) {
  Settings s;
  s.run.workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  s.stage.models_dir = DefaultModelsDir(in.env);
  auto resolved = ResolveRows(SettingRows(&s), in);
  if (!resolved.ok()) return resolved.status();
  s.config_file = resolved->config_file;
  s.provenance = std::move(resolved->provenance);
  const RetryPolicy& retry = s.run.worker.retry;
  if (retry.max_delay_ms < retry.base_delay_ms)
    return Status::InvalidArgument("run.retry_max_ms must be at least run.retry_base_ms");
  auto paths = PathMap::Parse(s.path_map);
  if (!paths.ok())
    return Status::InvalidArgument("path_map (FRAMEMILL_PATH_MAP): " + paths.status().message());
  s.paths = std::move(paths).value();
  return s;
}

}  // namespace framemill
