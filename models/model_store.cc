#include "models/model_store.h"

#include <algorithm>
#include <filesystem>

namespace framemill::models {
namespace {
namespace fs = std::filesystem;

std::string InstallHint(const std::string& name) {
  return "run `framemill models fetch` (or `framemill models fetch --only " + name +
         "`; the model directory is set by FRAMEMILL_MODELS or the `models` config key)";
}

}  // namespace

int64_t DirectoryBytes(const std::string& dir) {
  std::error_code ec;
  int64_t total = 0;
  fs::recursive_directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code fe;
    if (it->is_regular_file(fe)) {
      auto n = it->file_size(fe);
      if (!fe) total += static_cast<int64_t>(n);
    }
  }
  return total;
}

ModelStore::ModelStore(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  dir_ = (ec ? fs::path(dir) : p).lexically_normal().string();
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
}

ModelEntry ModelStore::Inspect(const std::string& name, const ModelSpec* spec) const {
  ModelEntry e;
  e.name = name;
  e.spec = spec;
  const std::string dir = ModelDir(name);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return e;
  e.bytes = DirectoryBytes(dir);
  auto m = LoadManifest(dir);
  if (!m.ok()) {
    e.problem = m.status();
    return e;
  }
  if (m->name != name) {
    e.problem = Status::Corruption(m->manifest_file + ": names model '" + m->name +
                                   "', but it is in the directory of '" + name + "'");
    return e;
  }
  e.installed = true;
  if (spec != nullptr) {
    const PackageSpec* pkg = FindPackage(spec->package);
    e.stale = pkg != nullptr && (m->package != pkg->name || m->package_version != pkg->version);
  }
  e.manifest = std::move(m).value();
  return e;
}

std::vector<ModelEntry> ModelStore::List() const {
  std::vector<ModelEntry> out;
  for (const ModelSpec& s : CatalogModels()) out.push_back(Inspect(s.name, &s));
  std::vector<std::string> extra;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code fe;
    const std::string name = it->path().filename().string();
    // <model>.tmp is the converter's work in progress (docs/MODELS.md), not a model.
    const bool in_progress = name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0;
    if (!it->is_directory(fe) || FindModel(name) != nullptr || in_progress || name[0] == '.') continue;
    if (fs::exists(it->path() / "manifest.json", fe)) extra.push_back(name);
  }
  std::sort(extra.begin(), extra.end());
  for (const std::string& name : extra) out.push_back(Inspect(name, nullptr));
  return out;
}

Result<ModelManifest> ModelStore::Open(const std::string& name) const {
  const ModelSpec* spec = FindModel(name);
  std::error_code ec;
  const bool has_dir = !name.empty() && name.find('/') == std::string::npos && name != "." &&
                       name != ".." && fs::exists(ModelDir(name) + "/manifest.json", ec);
  if (spec == nullptr && !has_dir)
    return Status::InvalidArgument("unknown model '" + name + "' (models: " +
                                   CatalogModelNames() + ")");
  ModelEntry e = Inspect(name, spec);
  if (e.installed) return std::move(e.manifest);
  if (e.problem.ok() || (e.problem.IsNotFound() && !fs::exists(ModelDir(name) + "/manifest.json", ec)))
    return Status::NotFound("model '" + name + "' is not installed in " + dir_ + ": " +
                            InstallHint(name));
  if (e.problem.IsNotFound())
    return Status::NotFound(e.problem.message() + ": " + InstallHint(name));
  return Status(e.problem.IsCorruption()
                    ? Status::Corruption(e.problem.message() +
                                         "; `framemill models fetch --force --only " + name +
                                         "` converts it again")
                    : e.problem);
}

}  // namespace framemill::models
