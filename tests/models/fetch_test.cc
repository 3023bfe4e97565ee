// Fetching the pinned model packages: sha256 checks with OpenSSL against sha256sum,
// a corrupted tarball detected and replaced by a real `npm pack` download, a download
// that fails its checksum refused, and a real conversion through tools/models/convert.py.
// The npm registry is reachable in CI; tests that need npm skip only when it is absent.
#include "models/fetch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "models/catalog.h"
#include "models/model_store.h"
#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill::models {
namespace {
namespace fs = std::filesystem;
using framemill::testing::TempDir;
using framemill::testing::WriteFile;

const std::string kCache = std::string(FRAMEMILL_SOURCE_DIR) + "/.cache/models/packages";

bool OnPath(const std::string& prog) {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    if (!dir.empty() && access((dir + "/" + prog).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

// The sha256 that coreutils computes, independently of OpenSSL.
std::string Sha256sum(const std::string& path) {
  auto r = RunChild({"sha256sum", path}, nullptr);
  if (!r.ok() || r->exit_code != 0) return "";
  return r->tail.substr(0, 64);
}

// The cached tarball of a pinned package, hard-linked into dir (a copy across devices).
// Returns false when this checkout has no cache.
bool LinkCached(const PackageSpec& pkg, const std::string& dir) {
  const std::string src = kCache + "/" + pkg.TgzName();
  if (!fs::exists(src)) return false;
  fs::create_directories(dir);
  std::error_code ec;
  fs::create_hard_link(src, dir + "/" + pkg.TgzName(), ec);
  if (ec) fs::copy_file(src, dir + "/" + pkg.TgzName(), ec);
  return !ec;
}

bool PythonHasOnnx() {
  auto r = RunChild({"/usr/bin/python3", "-c", "import onnx, numpy"}, nullptr);
  return r.ok() && r->exit_code == 0;
}

using testing::ModelsRequired;

std::vector<std::string> Leftovers(const std::string& packages_dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(packages_dir))
    if (e.path().filename().string().rfind(".download-", 0) == 0) out.push_back(e.path());
  return out;
}

TEST(FetchTest, Sha256AgreesWithSha256sum) {
  TempDir t;
  std::string bytes;
  for (uint32_t i = 0; i < 3'000'000; ++i) bytes += static_cast<char>((i * 7919u) >> 3);
  WriteFile(t / "blob", bytes);
  WriteFile(t / "empty", "");
  for (const std::string& f : {t / "blob", t / "empty"}) {
    auto sha = Sha256File(f);
    ASSERT_TRUE(sha.ok()) << sha.status().ToString();
    EXPECT_EQ(*sha, Sha256sum(f));
  }
  EXPECT_TRUE(Sha256File(t / "missing").status().IsNotFound());
}

TEST(FetchTest, CorruptedTarballIsCorruptionAndADownloadReplacesIt) {
  const PackageSpec& pkg = *FindPackage("@imgly/background-removal-data");
  const std::string src = kCache + "/" + pkg.TgzName();
  if (!fs::exists(src)) GTEST_SKIP() << "no cached " << src;
  TempDir t;
  const std::string packages = t / "packages";
  fs::create_directories(packages);
  const std::string tgz = packages + "/" + pkg.TgzName();
  fs::copy_file(src, tgz);  // a copy: the flip must not reach the cache
  {
    std::fstream f(tgz, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(fs::file_size(tgz) / 2);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x20);
    f.seekp(fs::file_size(tgz) / 2);
    f.write(&c, 1);
  }
  const std::string actual = Sha256sum(tgz);
  ASSERT_EQ(actual.size(), 64u);
  ASSERT_NE(actual, pkg.sha256);

  Status st = VerifyPackage(tgz, pkg);
  ASSERT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.message().find(tgz), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("expected " + pkg.sha256), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("actual " + actual), std::string::npos) << st.message();

  if (!OnPath("npm")) GTEST_SKIP() << "npm is not installed: cannot test the download";
  FetchOptions o;
  std::vector<std::string> lines;
  o.progress = [&](const std::string& l) { lines.push_back(l); };
  bool downloaded = false, replaced = false;
  auto t0 = std::chrono::steady_clock::now();
  Status got = EnsurePackage(packages, pkg, o, &downloaded, &replaced);
  ASSERT_TRUE(got.ok()) << got.ToString();
  EXPECT_TRUE(downloaded);
  EXPECT_TRUE(replaced);
  EXPECT_EQ(Sha256sum(tgz), pkg.sha256);
  EXPECT_TRUE(Leftovers(packages).empty());
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  EXPECT_NE(all.find("sha256 mismatch"), std::string::npos) << all;
  std::cerr << "npm pack of " << pkg.name << ": "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s\n";
}

TEST(FetchTest, DownloadFailingItsChecksumIsRefusedAndNotKept) {
  if (!OnPath("npm")) GTEST_SKIP() << "npm is not installed";
  TempDir t;
  // A real, tiny package pinned to a hash it cannot have.
  PackageSpec pkg{"is-number", "7.0.0", std::string(64, '0'), {}};
  bool downloaded = true, replaced = true;
  Status st = EnsurePackage(t.path(), pkg, FetchOptions{}, &downloaded, &replaced);
  ASSERT_TRUE(st.IsInvalidArgument()) << st.ToString();  // `models fetch` exits 2
  EXPECT_NE(st.message().find("expected " + pkg.sha256), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("npm config get registry"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("actual "), std::string::npos) << st.message();
  EXPECT_FALSE(downloaded);
  EXPECT_FALSE(fs::exists(t / pkg.TgzName()));
  EXPECT_TRUE(Leftovers(t.path()).empty());
}

TEST(FetchTest, NpmFailuresAreIOErrorsInNpmsOwnWords) {
  TempDir t;
  PackageSpec missing_npm{"is-number", "7.0.0", std::string(64, '0'), {}};
  FetchOptions o;
  o.npm = t / "no-npm-here";
  bool d, r;
  Status st = EnsurePackage(t.path(), missing_npm, o, &d, &r);
  EXPECT_EQ(st.code(), Status::Code::kIOError) << st.ToString();
  EXPECT_NE(st.message().find("not found"), std::string::npos) << st.message();

  if (!OnPath("npm")) GTEST_SKIP() << "npm is not installed";
  PackageSpec no_version{"is-number", "999.999.999", std::string(64, '0'), {}};
  st = EnsurePackage(t.path(), no_version, FetchOptions{}, &d, &r);
  EXPECT_EQ(st.code(), Status::Code::kIOError) << st.ToString();
  EXPECT_NE(st.message().find("npm pack is-number@999.999.999"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("999.999.999", st.message().find("failed")), std::string::npos)
      << "npm's own explanation is missing: " << st.message();
  EXPECT_TRUE(Leftovers(t.path()).empty());
}

TEST(FetchTest, UnknownModelIsInvalidArgument) {
  TempDir t;
  FetchOptions o;
  o.dir = t / "models";
  o.only = {"mobilefacenet", "nosuch"};
  auto r = FetchModels(o);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument());
  EXPECT_NE(r.status().message().find("nosuch"), std::string::npos);
}

TEST(FetchTest, FetchConvertsOnceAndThenOnlyVerifies) {
  const PackageSpec& pkg = *FindPackage(FindModel("mobilefacenet")->package);
  TempDir t;
  if (!LinkCached(pkg, t / "models/packages")) GTEST_SKIP() << "no cached " << pkg.TgzName();
  if (!PythonHasOnnx()) {
    if (ModelsRequired()) FAIL() << "FRAMEMILL_REQUIRE_MODELS=1 but /usr/bin/python3 lacks onnx";
    GTEST_SKIP() << "/usr/bin/python3 cannot import onnx: cannot convert";
  }
  FetchOptions o;
  o.dir = t / "models";
  o.only = {"mobilefacenet"};
  std::string log;
  o.progress = [&](const std::string& l) { log += l + "\n"; };
  auto first = FetchModels(o);
  ASSERT_TRUE(first.ok()) << first.status().ToString() << "\n" << log;
  EXPECT_EQ(first->packages_verified, std::vector<std::string>{pkg.TgzName()});
  EXPECT_TRUE(first->packages_downloaded.empty());
  EXPECT_EQ(first->models_converted, std::vector<std::string>{"mobilefacenet"});
  EXPECT_EQ(first->models_ready, std::vector<std::string>{"mobilefacenet"});
  auto m = ModelStore(o.dir).Open("mobilefacenet");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->operation, "FACE_EMBEDDING");

  log.clear();
  auto second = FetchModels(o);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second->models_converted.empty()) << log;
  EXPECT_EQ(second->models_ready, std::vector<std::string>{"mobilefacenet"});

  // An engine graph that does not load, under an intact manifest, is converted again.
  WriteFile(m->graph_file, "not a graph");
  log.clear();
  auto repaired = FetchModels(o);
  ASSERT_TRUE(repaired.ok()) << repaired.status().ToString() << "\n" << log;
  EXPECT_EQ(repaired->models_converted, std::vector<std::string>{"mobilefacenet"});
  EXPECT_NE(log.find("the engine cannot load " + m->graph_file), std::string::npos) << log;
  EXPECT_GT(fs::file_size(m->graph_file), 1000u);
}

}  // namespace
}  // namespace framemill::models
