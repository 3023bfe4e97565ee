#include "cli/command.h"

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "base/json_text.h"

namespace framemill {

int CmdConfig(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  const Settings& c = env->config;
  if (f.json) {
    nlohmann::json j = nlohmann::json::object();
    j["config_file"] = c.config_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.config_file);
    j["settings"] = nlohmann::json::object();
    for (const auto& p : c.provenance)
      j["settings"][p.key] = {{"value", p.value}, {"source", p.source},
                              {"env", p.env.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.env)}};
    j["stages"] = env->registry->graph().Names();
    j["model_precision"] = ModelPrecisionsJson(c.run.gpu.precision, c.stage.cpu_precision);
    std::cout << JsonDump(j, 2) << "\n";
    return ToInt(ExitCode::kOk);
  }
  std::printf("config file: %s\n\n", c.config_file.empty() ? "(none)" : c.config_file.c_str());
  std::printf("%-26s %-22s %-28s %s\n", "key", "value", "source", "env");
  for (const auto& p : c.provenance)
    std::printf("%-26s %-22s %-28s %s\n", p.key.c_str(), p.value.c_str(), p.source.c_str(),
                p.env.c_str());
  std::string names;
  for (const auto& n : env->registry->graph().Names()) names += (names.empty() ? "" : ", ") + n;
  std::printf("\nstages in this build: %s\n", names.c_str());
  PrintModelPrecisions(c.run.gpu.precision, c.stage.cpu_precision);
  return ToInt(ExitCode::kOk);
}

}  // namespace framemill
