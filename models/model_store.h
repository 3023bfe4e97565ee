// The model directory (FRAMEMILL_MODELS, docs/MODELS.md): which models are installed,
// and opening one by name with an error that says how to install it.
// A ModelStore only reads the directory; `framemill models fetch` (models/fetch.h)
// writes it. Thread-compatible: const methods may run concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "models/catalog.h"
#include "models/manifest.h"

namespace framemill::models {

struct ModelEntry {
  std::string name;
  const ModelSpec* spec = nullptr;  // nullptr: a directory with a manifest, not in the catalog
  bool installed = false;           // manifest.json parsed and every file it names exists
  Status problem;                   // when not installed but its directory exists: why
  bool stale = false;               // converted from a package version other than the pinned one
  ModelManifest manifest;           // valid when installed
  int64_t bytes = 0;                // all files under the model's directory
};

class ModelStore {
 public:
  // dir need not exist (then nothing is installed); it is made absolute.
  explicit ModelStore(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::string PackagesDir() const { return dir_ + "/packages"; }
  std::string ModelDir(const std::string& name) const { return dir_ + "/" + name; }

  // Every catalog model in catalog order, then any other directory holding a manifest.json.
  std::vector<ModelEntry> List() const;

  // The installed model's manifest. InvalidArgument for a name that is neither in the
  // catalog nor installed; NotFound, saying which command installs it, when it is not
  // installed; Corruption/Unsupported for a damaged or too new manifest.
  Result<ModelManifest> Open(const std::string& name) const;

 private:
  ModelEntry Inspect(const std::string& name, const ModelSpec* spec) const;
  std::string dir_;
};

// Total bytes of the regular files under dir (0 when it does not exist).
int64_t DirectoryBytes(const std::string& dir);

}  // namespace framemill::models
