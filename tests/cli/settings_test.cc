#include "cli/settings.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>

#include "tests/support/test_support.h"

namespace framemill {
namespace {

using testing::TempDir;

const Provenance& Find(const Settings& c, const std::string& key) {
  for (const auto& p : c.provenance)
    if (p.key == key) return p;
  static Provenance none;
  ADD_FAILURE() << "no setting " << key;
  return none;
}

TEST(SettingsTest, DefaultsWhenNothingIsGiven) {
  auto c = LoadSettings({});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->db(), "./framemill.db");
  EXPECT_EQ(c->out(), "./framemill-out");
  EXPECT_EQ(c->run.worker.batch, 16);
  EXPECT_GE(c->run.workers, 1);
  EXPECT_EQ(Find(*c, "db").source, "default");
  EXPECT_EQ(c->run.gpu.all, gpu::DeviceChoice::kAuto);
}

TEST(SettingsTest, PrecedenceFlagOverEnvOverYamlOverDefault) {
  TempDir dir;
  std::ofstream(dir / "c.yaml") << "db: from-yaml.db\nout: yaml-out\nrun:\n  batch: 8\n"
                                   "  max_attempts: 7\n";
  ConfigInputs in;
  in.env = {{"FRAMEMILL_CONFIG", dir / "c.yaml"}, {"FRAMEMILL_DB", "from-env.db"},
            {"FRAMEMILL_OUT", "env-out"}};
  in.flags = {{"db", "from-flag.db"}};
  auto c = LoadSettings(in);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->db(), "from-flag.db");
  EXPECT_EQ(Find(*c, "db").source, "flag --db");
  EXPECT_EQ(c->out(), "env-out");
  EXPECT_EQ(Find(*c, "out").source, "env FRAMEMILL_OUT");
  EXPECT_EQ(c->run.worker.batch, 8);
  EXPECT_EQ(Find(*c, "run.batch").source, "config " + (dir / "c.yaml"));
  EXPECT_EQ(c->enqueue.max_attempts, 7);
  EXPECT_EQ(Find(*c, "run.lease_ms").source, "default");
}

TEST(SettingsTest, ConfigFlagBeatsConfigEnvironmentVariable) {
  TempDir dir;
  std::ofstream(dir / "a.yaml") << "db: a.db\n";
  std::ofstream(dir / "b.yaml") << "db: b.db\n";
  ConfigInputs in;
  in.env = {{"FRAMEMILL_CONFIG", dir / "a.yaml"}};
  in.config_file_flag = dir / "b.yaml";
  auto c = LoadSettings(in);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->db(), "b.db");
}

TEST(SettingsTest, BooleansAcceptTheContractSpellingsInAnyCase) {
  for (auto [v, want] : std::vector<std::pair<std::string, gpu::DeviceChoice>>{
           {"true", gpu::DeviceChoice::kGpu}, {"TRUE", gpu::DeviceChoice::kGpu}, {"1", gpu::DeviceChoice::kGpu},
           {"Yes", gpu::DeviceChoice::kGpu}, {"false", gpu::DeviceChoice::kCpu}, {"0", gpu::DeviceChoice::kCpu},
           {"NO", gpu::DeviceChoice::kCpu}, {"auto", gpu::DeviceChoice::kAuto}}) {
    ConfigInputs in;
    in.env = {{"ALL_GPU", v}, {"POSE_GPU", v}};
    auto c = LoadSettings(in);
    ASSERT_TRUE(c.ok()) << v;
    EXPECT_EQ(c->run.gpu.all, want) << v;
    EXPECT_EQ(c->run.gpu.ops.at("POSE"), want) << v;
  }
}

TEST(SettingsTest, InvalidValuesNameTheVariableKeyOrFlag) {
  struct Case {
    std::map<std::string, std::string> env, flags;
    std::string yaml, must_mention;
  };
  std::vector<Case> cases = {
      {{{"ALL_GPU", "maybe"}}, {}, "", "ALL_GPU"},
      {{{"SEGMENTATION_GPU", "2"}}, {}, "", "SEGMENTATION_GPU"},
      {{{"FRAMEMILL_WORKERS", "0"}}, {}, "", "FRAMEMILL_WORKERS"},
      {{{"FRAMEMILL_WORKERS", "four"}}, {}, "", "FRAMEMILL_WORKERS"},
      {{{"LOG_LEVEL", "loud"}}, {}, "", "LOG_LEVEL"},
      {{{"GPU_MEMORY_LIMIT_GB", "-1"}}, {}, "", "GPU_MEMORY_LIMIT_GB"},
      {{}, {{"run.batch", "0"}}, "", "--batch"},
      {{}, {}, "run:\n  batch: lots\n", "run.batch"},
      {{}, {}, "run:\n  batchsize: 4\n", "run.batchsize"},
      {{}, {}, "db: [unclosed\n", "invalid YAML"},
  };
  for (const Case& k : cases) {
    TempDir dir;
    ConfigInputs in;
    in.env = k.env;
    in.flags = k.flags;
    if (!k.yaml.empty()) {
      std::ofstream(dir / "c.yaml") << k.yaml;
      in.config_file_flag = dir / "c.yaml";
    }
    auto c = LoadSettings(in);
    ASSERT_FALSE(c.ok()) << k.must_mention;
    EXPECT_TRUE(c.status().IsInvalidArgument());
    EXPECT_NE(c.status().message().find(k.must_mention), std::string::npos)
        << c.status().message();
  }
}

TEST(SettingsTest, RocmAndMpsAreRecognisedAndRefused) {
  for (const char* b : {"rocm", "mps", "ROCM"}) {
    ConfigInputs in;
    in.env = {{"GPU_BACKEND", b}};
    auto c = LoadSettings(in);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("only CUDA is supported"), std::string::npos);
    EXPECT_NE(c.status().message().find("GPU_BACKEND"), std::string::npos);
  }
  ConfigInputs in;
  in.env = {{"GPU_BACKEND", "sim"}};
  ASSERT_TRUE(LoadSettings(in).ok());
}

TEST(SettingsTest, MissingConfigFileIsAnError) {
  ConfigInputs in;
  in.env = {{"FRAMEMILL_CONFIG", "/nonexistent/framemill.yaml"}};
  auto c = LoadSettings(in);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("FRAMEMILL_CONFIG"), std::string::npos);
}

// Models are fetched once per user (XDG cache), not once per project directory.
TEST(SettingsTest, ModelsDefaultToTheUsersXdgCacheAndFramemillModelsWins) {
  auto models = [](std::map<std::string, std::string> env) {
    ConfigInputs in;
    in.env = std::move(env);
    auto c = LoadSettings(in);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? c->models() : std::string();
  };
  EXPECT_EQ(models({{"XDG_CACHE_HOME", "/x/cache"}, {"HOME", "/home/u"}}), "/x/cache/framemill/models");
  EXPECT_EQ(models({{"HOME", "/home/u"}}), "/home/u/.cache/framemill/models");
  // The specification ignores a relative XDG_CACHE_HOME.
  EXPECT_EQ(models({{"XDG_CACHE_HOME", "cache"}, {"HOME", "/home/u"}}), "/home/u/.cache/framemill/models");
  EXPECT_EQ(models({{"HOME", "/home/u"}, {"FRAMEMILL_MODELS", "/m"}}), "/m");
}

// configs/default.yaml documents every setting with its real default.
TEST(SettingsTest, DefaultYamlListsEverySettingWithItsDefault) {
  const std::string path = std::string(FRAMEMILL_SOURCE_DIR) + "/configs/default.yaml";
  YAML::Node root = YAML::LoadFile(path);
  std::set<std::string> in_file;
  std::function<void(const YAML::Node&, const std::string&)> walk =
      [&](const YAML::Node& n, const std::string& prefix) {
        for (auto it = n.begin(); it != n.end(); ++it) {
          std::string key = (prefix.empty() ? "" : prefix + ".") + it->first.as<std::string>();
          if (it->second.IsMap()) walk(it->second, key);
          else in_file.insert(key);
        }
      };
  walk(root, "");
  std::set<std::string> keys;
  for (const auto& k : SettingKeys()) keys.insert(k);
  EXPECT_EQ(in_file, keys);
  ConfigInputs with_file;
  with_file.config_file_flag = path;
  auto a = LoadSettings(with_file);
  auto b = LoadSettings({});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok());
  for (size_t i = 0; i < a->provenance.size(); ++i)
    EXPECT_EQ(a->provenance[i].value, b->provenance[i].value) << a->provenance[i].key;
}

}  // namespace
}  // namespace framemill
