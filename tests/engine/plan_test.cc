// The planner: shapes at several batch sizes, fusion, memory reuse in the arena, and
// DeviceBytes that grows linearly in the batch on top of constant weights.
#include "engine/plan.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/reference/cpu_kernels.h"
#include "tests/support/model_test_support.h"

namespace framemill::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A chain of convolutions with a residual, a shape-only subgraph (Shape -> Gather ->
// Concat -> Reshape) that must fold, and a Transpose to NHWC at the end.
struct Chain {
  json j;
  std::string bin;
  void Init(const std::string& name, std::vector<int64_t> shape, bool ints = false,
            std::vector<int64_t> values = {}) {
    while (bin.size() % 64) bin.push_back('\0');
    int64_t n = 1;
    for (auto d : shape) n *= d;
    int64_t bytes = n * (ints ? 8 : 4);
    j["initializers"].push_back({{"name", name}, {"dtype", ints ? "int64" : "float32"},
                                 {"shape", shape}, {"offset", bin.size()}, {"bytes", bytes}});
    if (ints) {
      bin.append(reinterpret_cast<const char*>(values.data()), values.size() * 8);
    } else {
      std::vector<float> v(static_cast<size_t>(n));
      for (size_t k = 0; k < v.size(); ++k) v[k] = 0.01f * static_cast<float>(k % 7) - 0.02f;
      bin.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    }
  }
  void Node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
            json attrs = json::object()) {
    j["nodes"].push_back({{"op", op}, {"name", "n" + std::to_string(j["nodes"].size())},
                          {"inputs", in}, {"outputs", out}, {"attrs", attrs}});
  }
  Chain() {
    j = json{{"format", "framemill-graph"}, {"version", 2}, {"opset", 10},
             {"inputs", {{{"name", "x"}, {"shape", {-1, 3, 32, 32}}}}},
             {"outputs", {{{"name", "flat"}}, {{"name", "nhwc"}}}},
             {"initializers", json::array()}, {"nodes", json::array()}};
    Init("w0", {16, 3, 3, 3}); Init("b0", {16});
    Init("w1", {16, 1, 3, 3}); Init("b1", {16});
    Init("w2", {16, 16, 1, 1});
    Init("w3", {8, 16, 3, 3});
    Init("idx0", {}, true, {0});
    Init("minus1", {1}, true, {-1});
    Node("Conv", {"x", "w0", "b0"}, {"c0"}, {{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
    Node("Clip", {"c0"}, {"r0"}, {{"min", 0.0}, {"max", 6.0}});
    Node("Conv", {"r0", "w1", "b1"}, {"c1"}, {{"group", 16}, {"pads", {1, 1, 1, 1}}});
    Node("Relu", {"c1"}, {"r1"});
    Node("Conv", {"r1", "w2"}, {"c2"});
    Node("Add", {"r0", "c2"}, {"s2"});
    Node("Conv", {"s2", "w3"}, {"c3"}, {{"strides", {2, 2}}, {"pads", {0, 0, 1, 1}}});
    Node("Shape", {"c3"}, {"shp"});
    Node("Gather", {"shp", "idx0"}, {"n"}, {{"axis", 0}});
    Node("Unsqueeze", {"n"}, {"n1"}, {{"axes", {0}}});
    Node("Concat", {"n1", "minus1"}, {"target"}, {{"axis", 0}});
    Node("Reshape", {"c3", "target"}, {"flat"});
    Node("Transpose", {"c3"}, {"nhwc"}, {{"perm", {0, 2, 3, 1}}});
  }
  Graph Parse() const {
    auto g = ParseGraph(j.dump(), bin);
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return g.ok() ? *g : Graph{};
  }
};

TEST(PlanTest, ShapesFollowTheBatch) {
  Graph g = Chain().Parse();
  for (int n : {1, 4}) {
    auto p = BuildPlan(g, n, StorageType::kFloat32);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ASSERT_EQ(p->outputs.size(), 2u);
    EXPECT_EQ(p->outputs[0].shape, (std::vector<int64_t>{n, 8 * 8 * 8}));
    EXPECT_EQ(p->outputs[1].shape, (std::vector<int64_t>{n, 8, 8, 8}));
    EXPECT_EQ(p->inputs[0].shape, (std::vector<int64_t>{n, 3, 32, 32}));
    // Clip, Relu and the residual Add are fused; the shape subgraph folds; the Reshape
    // is a view: Conv x4 + Transpose remain.
    EXPECT_EQ(p->fused, 3);
    ASSERT_EQ(p->steps.size(), 5u);
    EXPECT_EQ(p->steps[4].kind, StepKind::kTranspose);
    const auto& c2 = std::get<Conv2dParams>(p->steps[2].params);
    EXPECT_EQ(p->steps[2].inputs[3], p->steps[0].output) << "the residual is r0";
    EXPECT_EQ(c2.act.kind, Activation::kNone);
    const auto& c0 = std::get<Conv2dParams>(p->steps[0].params);
    EXPECT_EQ(c0.act.kind, Activation::kClip);
    EXPECT_EQ(c0.act.hi, 6.0f);
    EXPECT_EQ(std::get<Conv2dParams>(p->steps[1].params).groups, 16);
  }
}

// Keras' ZeroPadding2D before a valid strided convolution, and YOLOv8's SiLU after one: the
// Pad is the convolution's own padding, Sigmoid -> Mul one swish; one step is left. (Whole
// models through both plans: GoldenTest and DnnlKernelsTest.WholeModelsAgreeWithTheReference.)
TEST(PlanTest, AZeroPadGoesIntoTheConvolutionAndSigmoidMulIsOneSwish) {
  Chain c;
  c.j["opset"] = 11;  // Pad's pads as an input
  c.j["nodes"] = json::array();
  c.j["outputs"] = {{{"name", "y"}}};
  c.Init("pads", {8}, true, {0, 0, 0, 1, 0, 0, 1, 2});
  c.Node("Pad", {"x", "pads"}, {"xp"}, {{"mode", "constant"}});
  c.Node("Conv", {"xp", "w0", "b0"}, {"c"}, {{"strides", {2, 2}}});
  c.Node("Sigmoid", {"c"}, {"s"});
  c.Node("Mul", {"c", "s"}, {"y"});
  Graph g = c.Parse();
  auto p = BuildPlan(g, 1, StorageType::kFloat32);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->steps.size(), 1u);
  EXPECT_EQ(p->fused, 3);  // the Pad, the Sigmoid and the Mul
  const auto& conv = std::get<Conv2dParams>(p->steps[0].params);
  EXPECT_EQ(conv.act.kind, Activation::kSwish);
  EXPECT_EQ(std::vector<int>({conv.pad_t, conv.pad_l, conv.pad_b, conv.pad_r}), std::vector<int>({0, 1, 1, 2}));
  EXPECT_EQ(p->outputs[0].shape, (std::vector<int64_t>{1, 16, 16, 17}));
}

// x -> Conv = c -> Relu = pos, a slope k [16, 1, 1], and outputs y and z: the start of a PReLU.
Chain ConvThenRelu() {
  Chain c;
  c.j["nodes"] = json::array();
  c.j["outputs"] = {{{"name", "y"}}, {{"name", "z"}}};
  c.Init("k", {16, 1, 1});
  c.Node("Conv", {"x", "w0", "b0"}, {"c"}, {{"pads", {1, 1, 1, 1}}});
  c.Node("Relu", {"c"}, {"pos"});
  return c;
}

// A PReLU as TF.js converters write it (Relu(x) + k * Clip(x, max 0), facemesh's), and ONNX's
// own PRelu: each one kPRelu step; x's other uses keep it unfused.
TEST(PlanTest, ReluPlusSlopeTimesNegativePartIsOnePRelu) {
  Chain c = ConvThenRelu();
  c.Node("Clip", {"c"}, {"neg"}, {{"max", 0.0}});
  c.Node("Mul", {"neg", "k"}, {"m"});
  c.Node("Add", {"pos", "m"}, {"y"});
  c.Node("PRelu", {"y", "k"}, {"z"});
  Graph g = c.Parse();
  auto p = BuildPlan(g, 2, StorageType::kFloat32);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->steps.size(), 3u);  // the conv, the fused PReLU, ONNX's PRelu
  EXPECT_EQ(p->fused, 3);
  for (int s : {1, 2}) {
    ASSERT_EQ(p->steps[s].kind, StepKind::kBinary);
    const auto& b = std::get<BinaryParams>(p->steps[s].params);
    EXPECT_EQ(b.op, BinaryOp::kPRelu);
    EXPECT_EQ(std::vector<int64_t>(b.b_strides, b.b_strides + 4), (std::vector<int64_t>{0, 1, 0, 0}));
  }
  EXPECT_EQ(p->steps[2].inputs[0], p->steps[1].output);
  // The Clip's input used elsewhere too: no fusion, four steps as written.
  c.Node("Sigmoid", {"c"}, {"other"});
  c.j["outputs"].push_back({{"name", "other"}});
  auto q = BuildPlan(c.Parse(), 1, StorageType::kFloat32);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->steps.size(), 7u);
}

// mobilefacenet's form, Relu(x) + k * (x - Abs(x)): one PReLU of slope 2k; faceres' Relu ->
// Clip -> Clip after a convolution: one clamp to the ranges' intersection.
TEST(PlanTest, TheAbsFormOfPReluAndClampsInARowFuse) {
  Chain c = ConvThenRelu();
  c.Node("Abs", {"c"}, {"a"});
  c.Node("Sub", {"c", "a"}, {"neg2"});
  c.Node("Mul", {"neg2", "k"}, {"m"});
  c.Node("Add", {"pos", "m"}, {"y"});
  c.Node("Conv", {"y", "w2"}, {"d"});
  c.Node("Relu", {"d"}, {"r"});
  c.Node("Clip", {"r"}, {"r6"}, {{"min", -1.0}, {"max", 6.0}});
  c.Node("Clip", {"r6"}, {"z"}, {{"min", 0.5}, {"max", 8.0}});
  Graph g = c.Parse();
  auto p = BuildPlan(g, 1, StorageType::kFloat32);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->steps.size(), 3u);  // conv, PReLU, conv with its one clamp
  const auto& b = std::get<BinaryParams>(p->steps[1].params);
  EXPECT_EQ(b.op, BinaryOp::kPRelu);
  const auto& conv = std::get<Conv2dParams>(p->steps[2].params);
  EXPECT_EQ(conv.act.kind, Activation::kClip);
  EXPECT_EQ(conv.act.lo, 0.5f);
  EXPECT_EQ(conv.act.hi, 6.0f);
  // The slope doubled (x - |x| = 2 min(x, 0); k * 2x and 2k * x round alike). Whole models
  // through the fused plan: GoldenTest, ModelTest, DnnlKernelsTest.WholeModelsAgreeWithTheReference.
  const HostTensor& k = g.initializers.at("k");
  const HostTensor& slope = p->constants[p->buffers[p->steps[1].inputs[1]].host_const];
  ASSERT_EQ(slope.f.size(), k.f.size());
  for (size_t e = 0; e < k.f.size(); ++e) EXPECT_EQ(slope.f[e], 2 * k.f[e]);
}

TEST(PlanTest, ArenaReusesDeadBuffersAndNoLiveBuffersOverlap) {
  Graph g = Chain().Parse();
  auto p = BuildPlan(g, 2, StorageType::kFloat32);
  ASSERT_TRUE(p.ok());
  EXPECT_LT(p->arena_bytes, p->activation_bytes);
  // Any two arena buffers alive at the same step occupy disjoint bytes.
  for (size_t a = 0; a < p->buffers.size(); ++a)
    for (size_t b = a + 1; b < p->buffers.size(); ++b) {
      const Buffer &x = p->buffers[a], &y = p->buffers[b];
      if (x.weight || y.weight) continue;
      bool live_together = x.first_step <= y.last_step && y.first_step <= x.last_step;
      bool overlap = x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes;
      EXPECT_FALSE(live_together && overlap) << x.name << " / " << y.name;
      EXPECT_EQ(x.offset % kPlanAlignment, 0);
    }
}

TEST(PlanTest, DeviceBytesIsWeightsPlusLinearArena) {
  Graph g = Chain().Parse();
  auto p1 = BuildPlan(g, 1, StorageType::kFloat32);
  ASSERT_TRUE(p1.ok());
  int64_t w = p1->weight_bytes;
  // Weights: every float initializer rounded to the alignment, the int64 ones folded away.
  int64_t want_w = 0;
  for (int64_t n : {16 * 27, 16, 16 * 9, 16, 16 * 16, 8 * 16 * 9})
    want_w += (n * 4 + kPlanAlignment - 1) / kPlanAlignment * kPlanAlignment;
  EXPECT_EQ(w, want_w);
  int64_t per = p1->DeviceBytes() - w;
  for (int n : {2, 4, 8, 16}) {
    int64_t b = DeviceBytes(g, n, StorageType::kFloat32);
    EXPECT_EQ(b - w, n * per) << "batch " << n;  // buffer sizes are multiples of 256 here
  }
  // fp16 storage halves weights and activations.
  auto h = BuildPlan(g, 4, StorageType::kFloat16);
  ASSERT_TRUE(h.ok());
  EXPECT_LT(h->DeviceBytes(), DeviceBytes(g, 4, StorageType::kFloat32) * 6 / 10);
}

TEST(PlanTest, KernelScratchIsCounted) {
  Graph g = Chain().Parse();
  auto cpu = MakeCpuKernels();
  auto p = BuildPlan(g, 1, StorageType::kFloat32, cpu.get());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->DeviceBytes(), p->weight_bytes + p->arena_bytes + p->scratch_bytes);
}

TEST(PlanTest, ShapeErrorsNameTheNode) {
  Chain c;
  c.j["initializers"][4]["shape"] = {16, 8, 1, 1};  // w2 for 8 input channels, gets 16
  c.j["initializers"][4]["bytes"] = 16 * 8 * 4;
  auto g = ParseGraph(c.j.dump(), c.bin);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto p = BuildPlan(*g, 1, StorageType::kFloat32);
  EXPECT_TRUE(p.status().IsInvalidArgument()) << p.status().ToString();
  EXPECT_NE(p.status().message().find("n4"), std::string::npos) << p.status().message();
}

// Real converted models, when present.
using testing::ModelsDir;

TEST(PlanTest, ConvertedModelsPlanAtBatchOneAndFour) {
  int seen = 0;
  for (const char* name : {"mobilefacenet", "blazeface", "selfie", "movenet-lightning",
                           "movenet-multipose", "faceres",
                           "blazepose-full", "centernet", "isnet"}) {
    fs::path dir = fs::path(ModelsDir()) / name;
    if (!fs::exists(dir / "model.fmg.json")) continue;
    ++seen;
    auto g = LoadGraph((dir / "model.fmg.json").string());
    ASSERT_TRUE(g.ok()) << name << ": " << g.status().ToString();
    json manifest;
    std::ifstream(dir / "manifest.json") >> manifest;
    bool batchable = manifest["input"].value("batchable", false);
    auto p1 = BuildPlan(*g, 1, StorageType::kFloat32);
    ASSERT_TRUE(p1.ok()) << name << ": " << p1.status().ToString();
    EXPECT_LT(p1->arena_bytes, p1->activation_bytes) << name;
    for (const auto& o : p1->outputs) {
      bool found = false;
      for (const auto& mo : manifest["outputs"]) {
        if (mo["name"] != o.name) continue;
        found = true;
        auto want = mo["shape"].get<std::vector<int64_t>>();
        if (!want.empty() && want[0] < 0) want[0] = 1;
        EXPECT_EQ(o.shape, want) << name << " " << o.name;
      }
      EXPECT_TRUE(found) << name << " " << o.name;
    }
    if (!batchable) continue;
    auto p4 = BuildPlan(*g, 4, StorageType::kFloat32);
    ASSERT_TRUE(p4.ok()) << name << ": " << p4.status().ToString();
    EXPECT_EQ(p4->weight_bytes, p1->weight_bytes);
    for (const auto& o : p4->outputs) EXPECT_EQ(o.shape[0], 4) << name << " " << o.name;
    double ratio = static_cast<double>(p4->BatchBytes()) / p1->BatchBytes();
    EXPECT_NEAR(ratio, 4.0, 0.05) << name;
  }
  if (seen == 0) GTEST_SKIP() << "no converted models in " << ModelsDir();
}

}  // namespace
}  // namespace framemill::engine
