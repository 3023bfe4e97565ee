#include "cli/command.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "base/clock.h"
#include "cli/options.h"
#include "models/catalog.h"

namespace framemill {
namespace {

void SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("framemill");
  logger->set_pattern(isatty(STDERR_FILENO) ? "%^[%H:%M:%S.%e %L]%$ %v" : "[%Y-%m-%dT%H:%M:%S.%e %L %P] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

}  // namespace

Result<Env> Resolve(const Flags& f) {
  ConfigInputs in;
  in.env = ProcessEnvironment();
  in.config_file_flag = f.config;
  if (!f.db.empty()) in.flags["db"] = f.db;
  if (!f.out.empty()) in.flags["out"] = f.out;
  if (!f.stages.empty()) in.flags["run.stages"] = f.stages;
  if (f.workers) in.flags["workers"] = std::to_string(*f.workers);
  if (f.batch) in.flags["run.batch"] = std::to_string(*f.batch);
  if (!f.metrics.empty()) in.flags["run.metrics"] = f.metrics;
  if (f.priority) in.flags["enqueue.priority"] = std::to_string(*f.priority);
  auto cfg = LoadSettings(in);
  if (!cfg.ok()) return cfg.status();
  Env env;
  env.config = std::move(cfg).value();
  SetUpLogging(env.config.log_level);
  auto registry = MakeDefaultRegistry(env.config.stage);
  if (!registry.ok()) return registry.status();
  env.registry = std::move(registry).value();
  return env;
}

Result<std::vector<std::string>> ResolveStages(const Env& env) {
  std::string err;
  auto names = env.registry->graph().Closure(env.config.stages, &err);
  if (names.empty()) return Status::InvalidArgument(err.empty() ? "no stages selected" : err);
  return names;
}

Result<std::unique_ptr<JobStore>> OpenStore(const Env& env) {
  return OpenJobStore(env.config.db(), &env.registry->graph(), SystemClock());
}

Status CheckStoreExists(const Env& env) {
  // An empty store made here would hide the mistake. A PostgreSQL database is made by
  // its administrator (createdb): opening it says whether it is there.
  if (IsPostgresUri(env.config.db()) || std::filesystem::exists(env.config.db())) return Status::OK();
  return Status::InvalidArgument("no job store at " + env.config.db() +
                                 " (set by --db or FRAMEMILL_DB; `framemill enqueue` creates one)");
}

Result<Env> ResolveExisting(const Flags& f) {
  auto env = Resolve(f);
  if (env.ok()) FM_RETURN_IF_ERROR(CheckStoreExists(*env));
  return env;
}

Status CheckStageFlag(const Env& env, const std::string& stage) {
  if (stage.empty() || env.registry->graph().Find(stage) != nullptr) return Status::OK();
  std::string err;
  env.registry->graph().Closure({stage}, &err);
  return Status::InvalidArgument("--stage: " + err);
}

int UsageError(const std::string& msg) {
  std::fprintf(stderr, "framemill: %s\n", msg.c_str());
  return ToInt(ExitCode::kUsage);
}

void PrintModelPrecisions(const std::string& setting, const std::string& cpu_setting) {
  std::printf("\n%-18s %-9s %s\n", "model on a device", "precision", "why (GPU_PRECISION)");
  for (const models::ModelSpec& m : models::CatalogModels()) {
    const models::DevicePrecision p = models::PrecisionOnDevice(m.name, setting);
    std::printf("%-18s %-9s %s\n", m.name.c_str(), p.precision.c_str(), p.why.c_str());
  }
  std::printf("\n%-18s %-9s %s\n", "model on the CPU", "precision", "why (CPU_PRECISION)");
  for (const models::ModelSpec& m : models::CatalogModels()) {
    const models::DevicePrecision p = models::PrecisionOnCpu(m.name, cpu_setting);
    std::printf("%-18s %-9s %s\n", m.name.c_str(), p.precision.c_str(), p.why.c_str());
  }
}

nlohmann::json ModelPrecisionsJson(const std::string& setting, const std::string& cpu_setting) {
  nlohmann::json j = nlohmann::json::object();
  for (const models::ModelSpec& m : models::CatalogModels()) {
    const models::DevicePrecision p = models::PrecisionOnDevice(m.name, setting);
    const models::DevicePrecision c = models::PrecisionOnCpu(m.name, cpu_setting);
    j[m.name] = {{"precision", p.precision}, {"why", p.why}, {"cpu_precision", c.precision}, {"cpu_why", c.why}};
  }
  return j;
}

int StoreError(const Status& s) {
  std::fprintf(stderr, "framemill: %s\n", s.ToString().c_str());
  return ToInt(s.IsInvalidArgument() ? ExitCode::kUsage : ExitCode::kStoreFailed);
}

}  // namespace framemill
