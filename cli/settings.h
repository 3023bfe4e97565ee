// Every setting framemill has, as the options structs of the modules they configure (each
// default written once, in its struct), and the table of rows that binds them to YAML keys,
// environment variables and flags: the CLI's own rows and each module's (AddStageRows,
// AddRunRows, AddEnqueueRows, AddGpuRows). LoadSettings resolves the table (configs/);
// `framemill config` prints the provenance. A plain value once loaded: copy freely.
#pragma once

#include <string>
#include <vector>

#include "base/path_map.h"
#include "configs/config.h"
#include "outputs/unsafe.h"
#include "scheduler/supervisor.h"
#include "stages/stage_options.h"
#include "storage/job_store.h"

namespace framemill {

struct Settings {
  std::string log_level = "info";                // trace | debug | info | warn | error
  std::vector<std::string> stages = {"all"};     // run.stages: what enqueue and run select
  // Where the shared store's canonical paths are on this machine: "canonical=local[;...]",
  // parsed into `paths` when the settings are loaded.
  std::string path_map;
  PathMap paths;
  int fetch_batch = 64;  // fetch jobs a worker claims and downloads at once (run.batch for the rest)
  StageOptions stage;    // out (out_dir), models (models_dir), every stage's settings
  RunOptions run;        // db, workers, the workers' run.* settings, gpu.*
  EnqueueOptions enqueue;  // enqueue.priority, run.max_attempts
  UnsafeOptions unsafe;    // nsfw.unsafe_threshold: the report's blur and export --safe/--unsafe

  std::string config_file;  // empty: none
  std::vector<Provenance> provenance;  // every setting's value and where it came from

  const std::string& db() const { return run.db; }
  const std::string& out() const { return stage.out_dir; }
  const std::string& models() const { return stage.models_dir; }
};

// The settings from the environment, the config file and the flags in `inputs`. The
// defaults that depend on the machine (workers: its cores; models: the user's cache) are
// set before the rows are resolved.
Result<Settings> LoadSettings(const ConfigInputs& inputs);

// Every setting's key, in table order (tests check configs/default.yaml against it).
std::vector<std::string> SettingKeys();

}  // namespace framemill
