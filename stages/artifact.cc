#include "stages/artifact.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "base/atomic_file.h"

namespace framemill {

namespace fs = std::filesystem;

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  return (ec ? fs::path(path) : abs).lexically_normal().string();
}

std::string ArtifactDir(const std::string& out_dir, const std::string& stage) {
  return (fs::path(AbsolutePath(out_dir)) / stage).lexically_normal().string();
}

std::string ArtifactPath(const std::string& dir, const ClaimedJob& job, int64_t frame,
                         const std::string& ext) {
  std::string name = std::to_string(job.item_id);
  if (frame >= 0) name += "-f" + std::to_string(frame);
  char token[24];
  std::snprintf(token, sizeof token, "-%016llx", static_cast<unsigned long long>(job.lease_token));
  return dir + "/" + name + token + "." + ext;
}

Status WriteArtifact(const std::string& path, std::string_view bytes) {
  // Two workers (a stale one and its rescuer) may write the same name: each its own temporary.
  return WriteFileAtomically(path, bytes, std::to_string(getpid()));
}

}  // namespace framemill
