#include "cli/preflight.h"

#include <cstdio>
#include <set>

#include "cli/options.h"
#include "models/fetch.h"
#include "models/model_store.h"

namespace framemill {
namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// The stages that have jobs to do now (pending, waiting or running): a model missing
// for a stage with nothing queued stops nobody.
Result<std::set<std::string>> StagesWithWork(const Env& env) {
  auto store = OpenStore(env);
  if (!store.ok()) return store.status();
  auto counts = (*store)->Counts(0);
  if (!counts.ok()) return counts.status();
  std::set<std::string> busy;
  for (const StageCounts& c : *counts)
    if (c.pending + c.waiting + c.running > 0) busy.insert(c.stage);
  return busy;
}

struct ModelProblems {
  std::vector<std::string> missing;             // fetchable
  std::vector<std::string> needed_by;           // stages that need them
  std::vector<std::string> broken;              // "<name>: why"
};

ModelProblems CheckModels(const Env& env, const std::vector<std::string>& stages) {
  ModelProblems p;
  models::ModelStore store(env.config.models());
  std::set<std::string> seen;
  for (const std::string& name : stages) {
    const Stage* stage = env.registry->Find(name);
    if (stage == nullptr) continue;
    bool needs = false;
    for (const std::string& model : stage->Models()) {
      auto m = store.Open(model);
      if (m.ok()) continue;
      needs = true;
      if (!seen.insert(model).second) continue;
      if (m.status().IsNotFound() || m.status().IsCorruption()) p.missing.push_back(model);
      else p.broken.push_back(model + ": " + m.status().message());
    }
    if (needs) p.needed_by.push_back(name);
  }
  return p;
}

Status FetchMissing(const Env& env, const std::vector<std::string>& missing) {
  models::FetchOptions o;
  o.dir = env.config.models();
  o.only = missing;
  o.force = true;  // a damaged model is converted again, not trusted
  o.progress = [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  };
  std::fprintf(stderr, "fetching model(s) %s into %s (--fetch-models)\n", Join(missing).c_str(),
               env.config.models().c_str());
  auto r = models::FetchModels(o);
  if (!r.ok())
    return Status::InvalidArgument("--fetch-models: " + r.status().ToString());
  return Status::OK();
}

}  // namespace

Status Preflight(const Env& env, const std::vector<std::string>& stages,
                 const PreflightOptions& options) {
  std::vector<std::string> check = stages;
  if (!options.forever) {
    auto busy = StagesWithWork(env);
    if (!busy.ok()) return busy.status();
    std::erase_if(check, [&](const std::string& s) { return busy->count(s) == 0; });
  }
  for (const std::string& name : check) {
    const Stage* stage = env.registry->Find(name);
    if (stage == nullptr) continue;
    if (Status s = stage->CheckSettings(); !s.ok())
      return Status::InvalidArgument("stage " + name + " cannot run: " + s.message());
  }
  ModelProblems p = CheckModels(env, check);
  if (!p.broken.empty())
    return Status::InvalidArgument("stage(s) " + Join(p.needed_by) + " cannot run: " + p.broken.front());
  if (p.missing.empty()) return Status::OK();
  if (options.fetch_models) {
    FM_RETURN_IF_ERROR(FetchMissing(env, p.missing));
    p = CheckModels(env, check);
    if (p.missing.empty() && p.broken.empty()) return Status::OK();
  }
  return Status::InvalidArgument(
      "stage(s) " + Join(p.needed_by) + " need model(s) not installed in " + env.config.models() +
      ": " + Join(p.missing) + ". Install them with:\n  framemill models fetch --only " +
      Join(p.missing) + "\n(or run with --fetch-models; FRAMEMILL_MODELS sets the model directory)");
}

}  // namespace framemill
