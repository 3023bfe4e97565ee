// What the commands share: the flags every subcommand parses into, the resolved
// configuration and stage registry, and the contract's errors; and the commands
// themselves, one cmd_*.cc each, returning the contract's exit code.
// Used from the main thread only.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/exit_code.h"
#include "base/status.h"
#include "cli/settings.h"
#include "stages/registry.h"
#include "storage/job_store.h"

namespace framemill {

// Flags shared by the subcommands; empty/unset means "not given".
struct Flags {
  std::string config, db, out, stages, stage, format = "jsonl", output, error_class, metrics;
  std::optional<int> workers, batch, priority;
  bool forever = false, json = false, failed = false, dry_run = false, fetch_models = false;
  int keep_days = 30, keep_runs = 10;  // gc
  int64_t shard_size = 1000;           // export --format webdataset
  int64_t limit = 0;                   // report
  bool show_nsfw = false;              // report: no picture blurred
  bool unique = false;                 // export: leave out dedup's copies
  // export's filters (outputs/export_filter.h): --label, --no-label, --content, --safe,
  // --unsafe, --faces
  std::string labels, no_labels, content, faces;
  bool safe = false, unsafe = false;
  // export --clips (outputs/clip_records.h): one record per clip, and its filters
  bool clips = false;
  double min_duration = -1, max_duration = -1, min_subject_motion = -1;
  std::string cameras;
  std::vector<std::string> sources;
  // models / infer
  std::string models_action;  // "list" | "fetch"
  std::string only, model, device = "cpu";
  std::string inputs_dir;  // infer --inputs: a user's graph's TensorProto inputs
  bool force = false;
};

// A command's world: the configuration (flags > environment > YAML > defaults) and every
// stage of this build, configured from it.
struct Env {
  Settings config;
  std::unique_ptr<StageRegistry> registry;
};

Result<Env> Resolve(const Flags& f);
// The configured stages (--stages), closed over their dependencies.
Result<std::vector<std::string>> ResolveStages(const Env& env);
Result<std::unique_ptr<JobStore>> OpenStore(const Env& env);
// Only `enqueue` creates a store: elsewhere a missing file is a mistyped path.
Status CheckStoreExists(const Env& env);
// Resolve, for a command that needs the store to exist already (CheckStoreExists).
Result<Env> ResolveExisting(const Flags& f);
// A `--stage S` flag must name a stage of this build; the error lists the valid ones.
Status CheckStageFlag(const Env& env, const std::string& stage);

// Prints the message; returns 2.
int UsageError(const std::string& msg);
// Prints each model's precision on a device under GPU_PRECISION `setting`, and why
// (models/catalog.h PrecisionOnDevice): `gpu` and `config` show it.
void PrintModelPrecisions(const std::string& setting, const std::string& cpu_setting);
// The same as JSON: {"<model>": {"precision", "why"}}.
nlohmann::json ModelPrecisionsJson(const std::string& setting, const std::string& cpu_setting);
// Prints the store's error; returns 2 for InvalidArgument, else 4.
int StoreError(const Status& s);

int CmdEnqueue(const Flags& f);
int CmdRun(const Flags& f);
int CmdStatus(const Flags& f);
int CmdRetry(const Flags& f);
int CmdExport(const Flags& f);
int CmdReport(const Flags& f);
int CmdGc(const Flags& f);
int CmdConfig(const Flags& f);
int CmdGpu(const Flags& f);
int CmdModels(const Flags& f);
int CmdInfer(const Flags& f);

}  // namespace framemill
