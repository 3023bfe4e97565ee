// docs/REFERENCE.md is the user's reference (issue 40): this fails when a command, a flag, an
// exit code, a setting, an environment variable or a key of `status --json` that the binary
// has is missing from it, and when `--help` does not point to it.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Reference() { return ReadFile(FRAMEMILL_SOURCE_DIR "/docs/REFERENCE.md"); }

std::string Help(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {FRAMEMILL_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--help");
  auto r = RunProcess(argv, {{"LOG_LEVEL", "warn"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

// The words `help` lists under "Subcommands:".
std::vector<std::string> Subcommands(const std::string& help) {
  std::vector<std::string> out;
  std::istringstream in(help);
  bool on = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Subcommands:", 0) == 0) on = true;
    else if (on && line.size() > 2 && line[0] == ' ' && line[2] != ' ') out.push_back(line.substr(2, line.find(' ', 2) - 2));
  }
  return out;
}

// Present as `name` or "name" (a key in JSON).
bool Names(const std::string& doc, const std::string& name) {
  return doc.find("`" + name + "`") != std::string::npos || doc.find("\"" + name + "\"") != std::string::npos;
}

TEST(ReferenceTest, HelpPointsToTheReferenceWhichHasEveryCommandAndFlag) {
  const std::string doc = Reference();
  ASSERT_FALSE(doc.empty());
  const std::string top = Help({});
  EXPECT_NE(top.find("docs/REFERENCE.md"), std::string::npos) << top;
  const std::regex flag("(--[a-z][a-z-]*)");
  std::vector<std::vector<std::string>> commands;
  for (const std::string& c : Subcommands(top)) {
    commands.push_back({c});
    for (const std::string& sub : Subcommands(Help({c}))) commands.push_back({c, sub});
  }
  ASSERT_GE(commands.size(), 11u) << top;
  for (const auto& c : commands) {
    std::string name = "framemill";
    for (const std::string& w : c) name += " " + w;
    EXPECT_NE(doc.find("`" + name), std::string::npos) << name << " is not in docs/REFERENCE.md";
    const std::string help = Help(c);
    for (std::sregex_iterator m(help.begin(), help.end(), flag), end; m != end; ++m) {
      const std::string f = (*m)[1];
      if (f == "--help") continue;
      EXPECT_NE(doc.find(f), std::string::npos) << name << "'s " << f << " is not in docs/REFERENCE.md";
    }
  }
}

TEST(ReferenceTest, EveryExitCodeSettingAndVariableIsInTheReference) {
  const std::string doc = Reference();
  const std::string codes = ReadFile(std::string(FRAMEMILL_SOURCE_DIR) + "/base/exit_code.h");
  const std::regex code("k[A-Za-z]+ = ([0-9]+),");
  int n = 0;
  for (std::sregex_iterator m(codes.begin(), codes.end(), code), end; m != end; ++m, ++n)
    EXPECT_TRUE(Names(doc, (*m)[1])) << "exit code " << (*m)[1];
  EXPECT_GE(n, 5);
  auto config = RunProcess({FRAMEMILL_BIN, "config", "--json"}, {{"LOG_LEVEL", "warn"}});
  ASSERT_EQ(config.exit_code, 0) << config.err;
  const json settings = json::parse(config.out)["settings"];
  ASSERT_GT(settings.size(), 50u);
  for (const auto& [key, s] : settings.items()) {
    if (key.rfind("gpu.ops.", 0) == 0) continue;  // one row per operation: named by pattern
    EXPECT_TRUE(Names(doc, key)) << "setting " << key;
    const std::string env = s["env"].is_string() ? s["env"].get<std::string>() : "";
    if (!env.empty()) {
      EXPECT_TRUE(Names(doc, env)) << "variable " << env << " (" << key << ")";
    }
  }
  EXPECT_TRUE(Names(doc, "FRAMEMILL_CONFIG"));
  auto gpu = RunProcess({FRAMEMILL_BIN, "gpu", "--json"}, {{"LOG_LEVEL", "warn"}, {"GPU_BACKEND", "cpu"}});
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  for (const auto& [op, d] : json::parse(gpu.out)["operations"].items())
    EXPECT_TRUE(Names(doc, op + "_GPU")) << "variable " << op << "_GPU";
}

void Keys(const json& j, std::set<std::string>* out) {
  if (j.is_array()) {
    for (const json& e : j) Keys(e, out);
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      out->insert(k);
      Keys(v, out);
    }
  }
}

TEST(ReferenceTest, EveryKeyOfStatusJsonIsInTheReference) {
  TempDir dir;
  fs::create_directories(dir / "media");
  fs::copy_file(SampleData("fruits.jpg"), dir / "media/fruits.jpg");
  WriteFile(dir / "media/broken.jpg", "not a picture");
  const std::map<std::string, std::string> env = {{"FRAMEMILL_DB", dir / "fm.db"}, {"FRAMEMILL_OUT", dir / "out"},
                                                  {"FRAMEMILL_STAGES", "lighting"}, {"LOG_LEVEL", "warn"},
                                                  {"FRAMEMILL_MAX_ATTEMPTS", "1"}};
  ASSERT_EQ(RunProcess({FRAMEMILL_BIN, "enqueue", dir / "media"}, env).exit_code, 0);
  RunProcess({FRAMEMILL_BIN, "run", "--workers", "1"}, env, "", 300);
  auto status = RunProcess({FRAMEMILL_BIN, "status", "--json"}, env);
  ASSERT_EQ(status.exit_code, 0) << status.err;
  std::set<std::string> keys;
  Keys(json::parse(status.out), &keys);
  EXPECT_TRUE(keys.count("time_split_ms") && keys.count("last_run") && keys.count("failures")) << status.out;
  const std::string doc = Reference();
  for (const std::string& k : keys) EXPECT_TRUE(Names(doc, k)) << "status --json's key " << k;
}

}  // namespace
}  // namespace framemill::testing
