// EngineModel: a converted model through our own engine on a backend's device. Here the
// backends are the CPU (the oneDNN kernels, against cv::dnn as an independent reference) and
// the simulated device (reference kernels behind a VRAM budget); the CUDA backend runs the same code in framemill_gpu_tests'
// engine tests on a GPU machine. Needs installed models (FRAMEMILL_MODELS); skips when
// absent unless FRAMEMILL_REQUIRE_MODELS=1.
#include "models/engine_model.h"

#include <cmath>
#include <cstdlib>

#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>

#include "engine/dnnl/dnnl_kernels.h"
#include "gpu/compute_backend.h"
#include "gpu/device_ledger.h"
#include "gpu/shared_device.h"
#include "models/catalog.h"
#include "models/decode.h"
#include "tests/support/dnn_model.h"
#include "models/manifest.h"
#include "models/model_cache.h"
#include "tests/support/model_test_support.h"

namespace framemill::models {
namespace {

cv::Mat Photo(const char* name) {
  return cv::imread(std::string("/usr/share/doc/opencv-doc/examples/data/") + name, cv::IMREAD_COLOR);
}

// `pictures` through the model on our engine over the CPU backend (oneDNN kernels) and
// through cv::dnn. `engine` (where given) gets the engine's model; outputs are empty where
// either failed (the failure is recorded).
struct EngineAndDnn {
  std::vector<std::vector<OutputTensor>> ours, ref;  // per picture, per output
};
EngineAndDnn OnEngineAndDnn(const ModelManifest& m, const std::vector<cv::Mat>& pictures,
                            std::unique_ptr<EngineModel>* engine = nullptr) {
  static const std::unique_ptr<gpu::ComputeBackend> cpu = gpu::MakeCpuBackend();
  EngineAndDnn out;
  auto ours = EngineModel::Open(m, *cpu);  // fp32, as cv::dnn
  auto dnn = DnnModel::Open(m);
  EXPECT_TRUE(ours.ok()) << ours.status().ToString();
  EXPECT_TRUE(dnn.ok()) << dnn.status().ToString();
  if (!ours.ok() || !dnn.ok()) return out;
  auto a = (*ours)->Run(pictures);
  auto b = (*dnn)->Run(pictures);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  if (a.ok() && b.ok()) out = {std::move(a).value(), std::move(b).value()};
  if (engine != nullptr) *engine = std::move(ours).value();
  return out;
}

TEST(EngineModelTest, CpuBackendMatchesOpenCvDnnPerImageInABatch) {
  FM_LOAD_MODEL_OR_SKIP(m, "mobilefacenet");
  std::vector<cv::Mat> faces = {Photo("messi5.jpg")(cv::Rect(206, 82, 56, 56)).clone(),
                                Photo("basketball1.png")(cv::Rect(72, 88, 48, 48)).clone(),
                                Photo("baboon.jpg")};
  std::unique_ptr<EngineModel> engine;
  const EngineAndDnn r = OnEngineAndDnn(m, faces, &engine);
  ASSERT_EQ(r.ours.size(), 3u);
  ASSERT_EQ(r.ref.size(), 3u);
  double rel = testing::RelMaxDiff(r.ours, r.ref);
  std::printf("mobilefacenet, engine on the CPU backend vs cv::dnn, batch 3: rel max diff %.2e\n", rel);
  EXPECT_LT(rel, 2e-4);
  EXPECT_EQ(engine->device(), "cpu");
  EXPECT_GT(engine->BatchBytesPerImage(), 0);
}

// nsfwjs's converted MobileNetV2 (categorize's content model): what CATEGORIZE_GPU runs on a
// device is the same graph; on the CPU reference kernels it must give cv::dnn's classes and
// the same photo-or-drawing verdict.
TEST(EngineModelTest, ContentModelMatchesOpenCvDnnAndDecodesTheSame) {
  FM_LOAD_MODEL_OR_SKIP(m, "nsfw");
  std::vector<cv::Mat> pictures = {Photo("messi5.jpg"), Photo("HappyFish.jpg"), Photo("fruits.jpg")};
  const EngineAndDnn r = OnEngineAndDnn(m, pictures);
  ASSERT_EQ(r.ours.size(), pictures.size());
  ASSERT_EQ(r.ref.size(), pictures.size());
  for (size_t i = 0; i < pictures.size(); ++i) {
    auto a = DecodeContent(m, r.ours[i]);
    auto b = DecodeContent(m, r.ref[i]);
    ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.status() : a.status()).ToString();
    for (size_t k = 0; k < a->classes.size(); ++k) EXPECT_NEAR(a->classes[k], b->classes[k], 1e-3) << i;
    EXPECT_NEAR(a->photo, b->photo, 1e-3) << i;
    EXPECT_EQ(a->is_photo, b->is_photo) << i;
  }
}

// selfie's graph is fixed at batch 1. On a device the engine runs a batch of photos as one
// (models/catalog.cc engine_batches; tests/engine/engine_test.cc BatchOfFourEqualsFourSingleRuns);
// on the CPU image by image (a batch is no faster there), and each mask is cv::dnn's.
TEST(EngineModelTest, AFixedBatchGraphRunsImageByImageOnTheCpuAndDecodesTheSame) {
  FM_LOAD_MODEL_OR_SKIP(m, "selfie");
  ASSERT_FALSE(m.batchable);
  std::vector<cv::Mat> photos = {Photo("messi5.jpg"), Photo("basketball1.png")};
  std::unique_ptr<EngineModel> engine;
  const EngineAndDnn r = OnEngineAndDnn(m, photos, &engine);
  ASSERT_NE(engine, nullptr);
  EXPECT_FALSE(engine->batched());
  auto sim = gpu::MakeSimBackend(512);
  auto on_device = EngineModel::Open(m, *sim);
  ASSERT_TRUE(on_device.ok()) << on_device.status().ToString();
  EXPECT_TRUE((*on_device)->batched());
  ASSERT_EQ(r.ours.size(), photos.size());
  ASSERT_EQ(r.ref.size(), photos.size());
  for (size_t i = 0; i < photos.size(); ++i) {
    auto a = DecodeMask(r.ours[i][0], photos[i].size());
    auto b = DecodeMask(r.ref[i][0], photos[i].size());
    ASSERT_TRUE(a.ok() && b.ok());
    const float iou = testing::MaskIoU(a->binary, b->binary);
    std::printf("selfie mask IoU, engine vs cv::dnn, image %zu: %.5f\n", i, iou);
    EXPECT_GE(iou, 0.98f);
  }
}

// YOLOv8n (categorize.detector yolov8n): the letterboxed input through the engine gives
// cv::dnn's heads, and the same objects: labels equal, scores and boxes within float noise.
TEST(EngineModelTest, YoloHeadsMatchOpenCvDnnAndDecodeToTheSameObjects) {
  FM_LOAD_MODEL_OR_SKIP(m, "yolov8n");
  std::vector<cv::Mat> photos = {Photo("messi5.jpg"), Photo("fruits.jpg")};
  const EngineAndDnn r = OnEngineAndDnn(m, photos);
  ASSERT_EQ(r.ours.size(), photos.size());
  ASSERT_EQ(r.ref.size(), photos.size());
  const double rel = testing::RelMaxDiff(r.ours, r.ref);
  std::printf("yolov8n, engine on the CPU backend vs cv::dnn: rel max diff %.2e\n", rel);
  EXPECT_LT(rel, 1e-3);
  DetectionOptions opt;
  opt.min_score = 0.25f;
  opt.iou_threshold = 0.7f;
  for (size_t i = 0; i < photos.size(); ++i) {
    auto a = DecodeYolo(m, r.ours[i], photos[i].size(), opt);
    auto b = DecodeYolo(m, r.ref[i], photos[i].size(), opt);
    ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.status() : a.status()).ToString();
    ASSERT_EQ(a->size(), b->size()) << i;
    ASSERT_FALSE(a->empty()) << i;
    for (size_t k = 0; k < a->size(); ++k) {
      EXPECT_EQ((*a)[k].class_id, (*b)[k].class_id) << i << " " << k;
      EXPECT_NEAR((*a)[k].score, (*b)[k].score, 1e-3) << i << " " << k;
      EXPECT_NEAR((*a)[k].x1, (*b)[k].x1, 0.5) << i << " " << k;
      EXPECT_NEAR((*a)[k].y2, (*b)[k].y2, 0.5) << i << " " << k;
    }
  }
}

TEST(EngineModelTest, WeightsThatDoNotFitTheSimulatedDeviceAreOutOfMemory) {
  FM_LOAD_MODEL_OR_SKIP(m, "centernet");  // 8 MB of weights, 34 MiB with its activations
  auto sim = gpu::MakeSimBackend(/*vram_mb=*/4);
  auto engine = EngineModel::Open(m, *sim);
  ASSERT_FALSE(engine.ok());
  EXPECT_TRUE(engine.status().IsOutOfMemory()) << engine.status().ToString();

  auto roomy = gpu::MakeSimBackend(/*vram_mb=*/256);
  auto ok = EngineModel::Open(m, *roomy);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  auto out = (*ok)->Run({Photo("messi5.jpg")});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_GT(roomy->LastBatchBytes(), 0);  // what the batch tuner learns from
  EXPECT_EQ((*ok)->device(), "sim:0");
}

// GPU_PRECISION auto (the default): each model's own precision on a device, the simulated one
// included (models/catalog.cc: faceres fp16, pose fp32, as measured); fp16 or fp32 forces one
// for every model, but a model whose numbers overflow half (silero-vad) stays in fp32. The CPU
// always computes in fp32.
TEST(EngineModelTest, EachModelStoresInItsOwnPrecisionUnlessGpuPrecisionForcesOne) {
  FM_LOAD_MODEL_OR_SKIP(pose, "movenet-multipose");
  FM_LOAD_MODEL_OR_SKIP(faces, "faceres");
  FM_LOAD_MODEL_OR_SKIP(vad, "silero-vad");
  using gpu::EngineStorage;
  using engine::StorageType;
  auto storage_of = [](const ModelManifest& m, std::optional<EngineStorage> forced) {
    auto device = gpu::MakeSharedSimBackend(gpu::DeviceLedger::Private("sim:0", int64_t{512} << 20), 1.0, forced);
    auto e = EngineModel::Open(m, *device);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? (*e)->engine().storage() : StorageType::kFloat32;
  };
  EXPECT_EQ(storage_of(pose, EngineStorage::kModelsOwn), StorageType::kFloat32);
  EXPECT_EQ(storage_of(faces, EngineStorage::kModelsOwn), StorageType::kFloat16);
  EXPECT_EQ(storage_of(pose, EngineStorage::kFp16), StorageType::kFloat16);
  EXPECT_EQ(storage_of(faces, EngineStorage::kFp32), StorageType::kFloat32);
  EXPECT_EQ(storage_of(vad, EngineStorage::kFp16), StorageType::kFloat32) << "fp16 overflows in it";
  EXPECT_EQ(storage_of(faces, std::nullopt), StorageType::kFloat32) << "the simulated device alone is fp32";
  auto cpu = gpu::MakeCpuBackend();
  auto on_cpu = EngineModel::Open(faces, *cpu);
  ASSERT_TRUE(on_cpu.ok());
  EXPECT_EQ((*on_cpu)->engine().storage(), StorageType::kFloat32);
}

// CPU_PRECISION auto: each model's own precision on a CPU with bf16 (YOLOv8 in bf16, the rest
// fp32); a setting forces one; a CPU without bf16 runs fp32 whatever is set. The bf16 model's
// heads stay close to fp32's (the pipeline's decisions: bench/README "bf16 on the CPU").
TEST(EngineModelTest, TheCpuRunsEachModelInItsOwnPrecisionWhereItHasBf16) {
  FM_LOAD_MODEL_OR_SKIP(yolo, "yolov8n");
  const bool bf16 = engine::CpuHasBf16();
  EXPECT_EQ(PrecisionOnCpu("yolov8n", "auto").precision, bf16 ? "bf16" : "fp32");
  EXPECT_EQ(PrecisionOnCpu("faceres", "auto").precision, "fp32");
  EXPECT_EQ(PrecisionOnCpu("faceres", "bf16").precision, bf16 ? "bf16" : "fp32");
  EXPECT_EQ(PrecisionOnCpu("yolov8n", "fp32").precision, "fp32");
  if (!bf16) {
    EXPECT_EQ(PrecisionOnCpu("yolov8n", "bf16").why, "this CPU has neither AVX512-BF16 nor AMX");
    GTEST_SKIP() << "this CPU has no bf16: the bf16 run is not possible here";
  }
  auto in_bf16 = OpenRunner(yolo, nullptr, "auto");
  auto in_fp32 = OpenRunner(yolo, nullptr, "fp32");
  ASSERT_TRUE(in_bf16.ok() && in_fp32.ok());
  const std::vector<cv::Mat> photo = {Photo("messi5.jpg")};
  auto a = (*in_bf16)->Run(photo);
  auto b = (*in_fp32)->Run(photo);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t o = 0; o < (*b)[0].size(); ++o) {
    const auto& x = (*a)[0][o].data;
    const auto& y = (*b)[0][o].data;
    ASSERT_EQ(x.size(), y.size());
    double dot = 0, nx = 0, ny = 0;
    bool differ = false;
    for (size_t i = 0; i < x.size(); ++i) {
      dot += double{x[i]} * y[i]; nx += double{x[i]} * x[i]; ny += double{y[i]} * y[i];
      differ = differ || x[i] != y[i];
    }
    const double cosine = dot / std::sqrt(nx * ny);
    EXPECT_GE(cosine, 0.999) << (*b)[0][o].name;
    EXPECT_TRUE(differ) << (*b)[0][o].name << ": bf16 gave fp32's bits, so it did not run in bf16";
    std::printf("yolov8n %s: bf16 against fp32 on the CPU, cosine %.6f\n", (*b)[0][o].name.c_str(), cosine);
  }
}

}  // namespace
}  // namespace framemill::models
