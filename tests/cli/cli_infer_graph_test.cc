// `framemill infer --model FILE.onnx --inputs DIR` through the real binary, on ONNX's own
// conformance cases (tools/onnx/make_cases.sh, FRAMEMILL_ONNX_CASES): an opset-13 Softmax
// over one axis gives ONNX's outputs (the opset-11 reading would normalise over the whole
// tensor), a convolution whose weights come as an input runs, and what the engine does not
// implement exits 2 naming the node, the op and what is missing (../shared/CONTRACT.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "engine/onnx_import.h"
#include "tests/support/model_test_support.h"
#include "tests/support/test_support.h"

namespace framemill::testing {
namespace {
namespace fs = std::filesystem;

std::string Cases() {
  const char* e = std::getenv("FRAMEMILL_ONNX_CASES");
  return std::string(e != nullptr && *e != '\0' ? e : FRAMEMILL_SOURCE_DIR "/.cache/onnx-cases") + "/node";
}

class CliInferGraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::is_directory(Cases())) {
      if (ModelsRequired()) FAIL() << "no ONNX cases in " << Cases() << " (tools/onnx/make_cases.sh)";
      GTEST_SKIP() << "no ONNX cases in " << Cases();
    }
  }
  ProcResult Infer(std::vector<std::string> args) {
    args.insert(args.begin(), {FRAMEMILL_BIN, "infer"});
    return RunProcess(args, {{"FRAMEMILL_DB", dir_ / "fm.db"}, {"LOG_LEVEL", "warn"}}, dir_.path(), 120);
  }
  static std::string Model(const std::string& c) { return Cases() + "/" + c + "/model.onnx"; }
  static std::string Data(const std::string& c) { return Cases() + "/" + c + "/test_data_set_0"; }
  TempDir dir_;
};

// Every output value of `got` (the JSON of one output) against ONNX's output_K.pb.
void ExpectOnnxs(const nlohmann::json& got, const std::string& pb) {
  auto want = engine::ReadOnnxTensor(pb);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  ASSERT_EQ(got["shape"].get<std::vector<int64_t>>(), want->value.shape);
  ASSERT_EQ(got["data"].size(), static_cast<size_t>(want->value.size()));
  for (int64_t k = 0; k < want->value.size(); ++k)
    EXPECT_NEAR(got["data"][k].get<double>(), want->value.At(k), 1e-7 + 1e-3 * std::fabs(want->value.At(k))) << k;
}

TEST_F(CliInferGraphTest, AnOpset13SoftmaxOverOneAxisGivesOnnxsOutputs) {
  const std::string c = "test_softmax_axis_0";
  auto r = Infer({"--model", Model(c), "--inputs", Data(c), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["device"], "cpu");
  EXPECT_EQ(doc["opset"], 13);
  ASSERT_EQ(doc["results"].size(), 1u);
  ExpectOnnxs(doc["results"][0]["outputs"]["y"], Data(c) + "/output_0.pb");
  // Text: each output by name, with its shape.
  auto text = Infer({"--model", Model(c), "--inputs", Data(c)});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("y [3x4x5] float32:"), std::string::npos) << text.out;
}

TEST_F(CliInferGraphTest, WeightsGivenAsAnInputRun) {
  const std::string c = "test_conv_with_strides_and_asymmetric_padding";
  auto r = Infer({"--model", Model(c), "--inputs", Data(c), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectOnnxs(nlohmann::json::parse(r.out)["results"][0]["outputs"]["y"], Data(c) + "/output_0.pb");
}

TEST_F(CliInferGraphTest, WhatTheEngineDoesNotImplementExitsTwoNamingIt) {
  const std::string cubic = "test_resize_upsample_scales_cubic";
  auto r = Infer({"--model", Model(cubic), "--inputs", Data(cubic)});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("(Resize): mode cubic"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;

  const std::string training = "test_batchnorm_example_training_mode";
  auto t = Infer({"--model", Model(training), "--inputs", Data(training)});
  EXPECT_EQ(t.exit_code, 2) << t.err;
  EXPECT_NE(t.err.find("(BatchNormalization): training mode"), std::string::npos) << t.err;

  // An opset newer than the engine knows: refused as a whole, not read by older rules.
  const std::string newer = (dir_ / "opset22.onnx");
  auto make = RunProcess({"/usr/bin/python3", "-c",
                          "import sys, onnx\nfrom onnx import helper, TensorProto as T\n"
                          "g = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'g',\n"
                          "  [helper.make_tensor_value_info('x', T.FLOAT, [1, 2])],\n"
                          "  [helper.make_tensor_value_info('y', T.FLOAT, [1, 2])])\n"
                          "onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 22)]), sys.argv[1])\n",
                          newer});
  ASSERT_EQ(make.exit_code, 0) << make.err;
  auto o = Infer({"--model", newer, "--inputs", Data("test_relu")});
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_NE(o.err.find("opset 22; the engine implements 1 to 21"), std::string::npos) << o.err;
}

TEST_F(CliInferGraphTest, MissingOrMisfitInputsExitTwo) {
  fs::create_directories(dir_ / "empty");
  auto none = Infer({"--model", Model("test_relu"), "--inputs", dir_ / "empty"});
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_NE(none.err.find("input_0.pb"), std::string::npos) << none.err;

  // The data of another case: a shape the graph does not declare.
  auto misfit = Infer({"--model", Model("test_relu"), "--inputs", Data("test_softmax_example")});
  EXPECT_EQ(misfit.exit_code, 2) << misfit.err;
  EXPECT_NE(misfit.err.find("input 'x'"), std::string::npos) << misfit.err;

  auto both = Infer({"--model", Model("test_relu"), "--inputs", Data("test_relu"), "x.jpg"});
  EXPECT_EQ(both.exit_code, 2) << both.err;

  auto not_onnx = Infer({"--model", "mobilefacenet", "--inputs", Data("test_relu")});
  EXPECT_EQ(not_onnx.exit_code, 2) << not_onnx.err;
  EXPECT_NE(not_onnx.err.find("FILE.onnx"), std::string::npos) << not_onnx.err;
}

}  // namespace
}  // namespace framemill::testing
