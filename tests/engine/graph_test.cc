// The fmg loader: well-formed graphs load with their attributes and initializers;
// malformed ones fail with a typed status that names the problem.
#include "engine/graph.h"

#include <filesystem>
#include <fstream>
#include <cstring>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace framemill::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A one-conv graph: weights [2,1,1,1] + bias [2] in the bin.
json ConvGraph() {
  return json{{"format", "framemill-graph"},
              {"version", 2},
              {"opset", 13},
              {"inputs", {{{"name", "x"}, {"shape", {-1, 1, 4, 4}}}}},
              {"outputs", {{{"name", "y"}}}},
              {"initializers",
               {{{"name", "w"}, {"dtype", "float32"}, {"shape", {2, 1, 1, 1}}, {"offset", 0}, {"bytes", 8}},
                {{"name", "b"}, {"dtype", "float32"}, {"shape", {2}}, {"offset", 64}, {"bytes", 8}}}},
              {"nodes",
               {{{"op", "Conv"},
                 {"name", "conv"},
                 {"inputs", {"x", "w", "b"}},
                 {"outputs", {"y"}},
                 {"attrs", {{"strides", {1, 1}}, {"group", 1}, {"pads", {0, 0, 0, 0}}}}}}}};
}

std::string ConvBin() {
  std::string bin(72, '\0');
  float w[2] = {2.0f, -1.0f}, b[2] = {0.5f, 0.25f};
  std::memcpy(bin.data(), w, 8);
  std::memcpy(bin.data() + 64, b, 8);
  return bin;
}

TEST(GraphTest, ParsesNodesAttributesAndInitializers) {
  auto g = ParseGraph(ConvGraph().dump(), ConvBin());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->nodes.size(), 1u);
  EXPECT_EQ(g->nodes[0].op, "Conv");
  EXPECT_EQ(g->nodes[0].AttrInts("strides"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(g->nodes[0].AttrInt("group", 7), 1);
  EXPECT_EQ(g->nodes[0].AttrInt("missing", 7), 7);
  EXPECT_EQ(g->inputs[0].shape, (std::vector<int64_t>{-1, 1, 4, 4}));
  ASSERT_TRUE(g->initializers.count("b"));
  EXPECT_FLOAT_EQ(g->initializers.at("b").f[1], 0.25f);
  EXPECT_FLOAT_EQ(g->initializers.at("w").f[1], -1.0f);
}

TEST(GraphTest, BadJsonIsCorruption) {
  auto g = ParseGraph("{\"format\": \"framemill-graph\", ", ConvBin());
  EXPECT_TRUE(g.status().IsCorruption()) << g.status().ToString();
  json wrong = ConvGraph();
  wrong["format"] = "onnx";
  EXPECT_TRUE(ParseGraph(wrong.dump(), ConvBin()).status().IsCorruption());
  json no_nodes = ConvGraph();
  no_nodes.erase("nodes");
  EXPECT_TRUE(ParseGraph(no_nodes.dump(), ConvBin()).status().IsCorruption());
}

TEST(GraphTest, UnknownOpIsUnsupportedNamingOpAndNode) {
  json j = ConvGraph();
  j["nodes"][0]["op"] = "NonMaxSuppression";
  j["nodes"][0]["name"] = "nms_7";
  auto g = ParseGraph(j.dump(), ConvBin());
  ASSERT_EQ(g.status().code(), Status::Code::kUnsupported) << g.status().ToString();
  EXPECT_NE(g.status().message().find("NonMaxSuppression"), std::string::npos);
  EXPECT_NE(g.status().message().find("nms_7"), std::string::npos);
}

TEST(GraphTest, InitializerBytesMustMatchShapeAndLieInsideTheBin) {
  json j = ConvGraph();
  j["initializers"][0]["shape"] = {3, 1, 1, 1};  // 12 bytes, 8 stated
  EXPECT_TRUE(ParseGraph(j.dump(), ConvBin()).status().IsCorruption());
  json k = ConvGraph();
  k["initializers"][1]["offset"] = 68;  // 68 + 8 > 72
  auto g = ParseGraph(k.dump(), ConvBin());
  EXPECT_TRUE(g.status().IsCorruption());
  EXPECT_NE(g.status().message().find("outside"), std::string::npos);
  json neg = ConvGraph();
  neg["initializers"][0]["shape"] = {-2, 1, 1, 1};
  EXPECT_TRUE(ParseGraph(neg.dump(), ConvBin()).status().IsCorruption());
}

TEST(GraphTest, UseBeforeDefinitionIsRejected) {
  json j = ConvGraph();
  j["nodes"][0]["inputs"] = {"x", "w", "not_yet"};
  auto g = ParseGraph(j.dump(), ConvBin());
  EXPECT_TRUE(g.status().IsInvalidArgument()) << g.status().ToString();
  json k = ConvGraph();
  k["outputs"] = {{{"name", "nowhere"}}};
  EXPECT_TRUE(ParseGraph(k.dump(), ConvBin()).status().IsInvalidArgument());
}

TEST(GraphTest, LoadGraphReadsTheBinBesideTheJson) {
  fs::path dir = fs::temp_directory_path() / ("fmg_graph_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream(dir / "model.fmg.json") << ConvGraph().dump();
  }
  auto missing = LoadGraph((dir / "model.fmg.json").string());
  EXPECT_TRUE(missing.status().IsNotFound()) << missing.status().ToString();
  {
    std::ofstream f(dir / "model.fmg.bin", std::ios::binary);
    std::string bin = ConvBin();
    f.write(bin.data(), static_cast<std::streamsize>(bin.size()));
  }
  auto g = LoadGraph((dir / "model.fmg.json").string());
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(LoadGraph((dir / "absent.fmg.json").string()).status().IsNotFound());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace framemill::engine
