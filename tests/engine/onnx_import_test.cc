// A user's ONNX file read straight into the engine (engine/onnx_import.h): a network of two
// inputs made here by Debian's python3-onnx, its initializers in the forms ONNX writes
// (raw bytes, float_data, float16, an int64 Constant), run on the CPU's oneDNN kernels and
// on the reference kernels against numpy's answer; and files that are not networks the
// engine takes, each refused with the reason.
#include "engine/onnx_import.h"

#include <cstring>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "engine/dnnl/dnnl_kernels.h"
#include "engine/engine.h"
#include "engine/reference/cpu_kernels.h"
#include "tests/support/test_support.h"

namespace framemill::engine {
namespace {

// image [N,3,4,4] and mask [N,1,4,4] joined, a 1x1 convolution (weights as raw bytes, bias
// as float_data), times a float16 scalar, reshaped by an int64 Constant to [N,32]; a third
// input that no output depends on. numpy's answer for batch 2 (seeded inputs) beside it.
constexpr const char* kMakeNetwork = R"(
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T
out_dir = sys.argv[1]
rng = np.random.default_rng(int(sys.argv[2]))
W = rng.standard_normal((2, 4, 1, 1)).astype(np.float32)
B = [0.25, -0.5]
inputs = [helper.make_tensor_value_info('image', T.FLOAT, ['n', 3, 4, 4]),
          helper.make_tensor_value_info('mask', T.FLOAT, ['n', 1, 4, 4]),
          helper.make_tensor_value_info('unused', T.FLOAT, [1, 2])]
out = helper.make_tensor_value_info('flat', T.FLOAT, ['n', 32])
inits = [numpy_helper.from_array(W, 'w'), helper.make_tensor('b', T.FLOAT, [2], B),
         helper.make_tensor('half', T.FLOAT16, [1], [0.5])]  # onnx stores its half bits in int32_data
shape = helper.make_tensor('shape', T.INT64, [2], [-1, 32])
nodes = [helper.make_node('Concat', ['image', 'mask'], ['both'], axis=1),
         helper.make_node('Conv', ['both', 'w', 'b'], ['c'], kernel_shape=[1, 1]),
         helper.make_node('Mul', ['c', 'half'], ['h']),
         helper.make_node('Constant', [], ['s'], value=shape),
         helper.make_node('Reshape', ['h', 's'], ['flat'])]
m = helper.make_model(helper.make_graph(nodes, 'two_inputs', inputs, [out], inits),
                      opset_imports=[helper.make_opsetid('', 13)])
onnx.checker.check_model(m)
onnx.save(m, out_dir + '/two_inputs.onnx')
image = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
mask = (rng.random((2, 1, 4, 4)) > 0.5).astype(np.float32)
both = np.concatenate([image, mask], axis=1)
c = np.einsum('oi,nihw->nohw', W[:, :, 0, 0], both) + np.array(B, np.float32)[None, :, None, None]
(c * 0.5).reshape(2, 32).astype(np.float32).tofile(out_dir + '/expected.bin')
image.tofile(out_dir + '/image.bin')
mask.tofile(out_dir + '/mask.bin')
# The same network with its weights in a file beside it (ONNX's external data).
onnx.save(m, out_dir + '/external.onnx', save_as_external_data=True, all_tensors_to_one_file=True,
          location='external.data', size_threshold=0)
# An op the engine does not run.
bad = helper.make_model(helper.make_graph([helper.make_node('Det', ['x'], ['y'])], 'det',
      [helper.make_tensor_value_info('x', T.FLOAT, [1, 3, 3])],
      [helper.make_tensor_value_info('y', T.FLOAT, [1])]), opset_imports=[helper.make_opsetid('', 13)])
onnx.save(bad, out_dir + '/det.onnx')
)";

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

Tensor TensorOf(std::vector<int64_t> shape, const std::vector<float>& v) {
  Tensor t;
  t.shape = std::move(shape);
  t.data.resize(v.size() * 4);
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

class OnnxImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const unsigned seed = std::random_device{}();
    std::printf("[seed] OnnxImportTest: %u\n", seed);
    auto r = testing::RunProcess({"/usr/bin/python3", "-c", kMakeNetwork, dir_.path(), std::to_string(seed)});
    ASSERT_EQ(r.exit_code, 0) << r.err << " (python3-onnx: scripts/install-deps.sh)";
  }
  testing::TempDir dir_;
};

TEST_F(OnnxImportTest, ATwoInputNetworkRunsAsNumpyComputesIt) {
  const Tensor image = TensorOf({2, 3, 4, 4}, ReadFloats(dir_ / "image.bin"));
  const Tensor mask = TensorOf({2, 1, 4, 4}, ReadFloats(dir_ / "mask.bin"));
  const std::vector<float> want = ReadFloats(dir_ / "expected.bin");
  ASSERT_EQ(want.size(), 64u);
  for (const char* backend : {"onednn", "reference"}) {
    SCOPED_TRACE(backend);
    auto kernels = std::string(backend) == "onednn" ? MakeDnnlKernels() : MakeCpuKernels();
    auto e = Engine::Load(dir_ / "two_inputs.onnx", std::move(kernels));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    // The input no output depends on is not asked for.
    EXPECT_EQ((*e)->InputNames(), (std::vector<std::string>{"image", "mask"}));
    auto out = (*e)->Run(std::vector<const Tensor*>{&image, &mask});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const Tensor& flat = out->at("flat");
    ASSERT_EQ(flat.shape, (std::vector<int64_t>{2, 32}));
    const auto* got = reinterpret_cast<const float*>(flat.data.data());
    for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(got[k], want[k], 1e-5) << "element " << k;
    // One input, or a mask of another size, is refused with the reason.
    auto one = (*e)->Run(image);
    ASSERT_FALSE(one.ok());
    EXPECT_NE(one.status().message().find("1 input(s) given, the graph takes 2"), std::string::npos)
        << one.status().ToString();
    const Tensor small = TensorOf({2, 1, 2, 2}, std::vector<float>(8, 1.0f));
    auto wrong = (*e)->Run(std::vector<const Tensor*>{&image, &small});
    ASSERT_FALSE(wrong.ok());
    EXPECT_NE(wrong.status().message().find("input 'mask' shape [2 1 2 2 ]"), std::string::npos)
        << wrong.status().ToString();
  }
}

TEST_F(OnnxImportTest, WhatTheEngineDoesNotTakeIsRefusedWithTheReason) {
  auto missing = LoadOnnxGraph(dir_ / "nowhere.onnx");
  EXPECT_TRUE(missing.status().IsNotFound()) << missing.status().ToString();
  std::ofstream(dir_ / "text.onnx") << "this is not a network, only words in a file\n";
  auto text = LoadOnnxGraph(dir_ / "text.onnx");
  EXPECT_TRUE(text.status().IsCorruption()) << text.status().ToString();
  auto external = LoadOnnxGraph(dir_ / "external.onnx");
  EXPECT_EQ(external.status().code(), Status::Code::kUnsupported) << external.status().ToString();
  EXPECT_NE(external.status().message().find("external file"), std::string::npos);
  auto det = LoadOnnxGraph(dir_ / "det.onnx");
  EXPECT_EQ(det.status().code(), Status::Code::kUnsupported) << det.status().ToString();
  EXPECT_NE(det.status().message().find("op Det"), std::string::npos);
  EXPECT_TRUE(IsOnnxPath("a/B.ONNX"));
  EXPECT_FALSE(IsOnnxPath("model.fmg.json"));
}

}  // namespace
}  // namespace framemill::engine
