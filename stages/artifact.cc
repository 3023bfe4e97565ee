#include "stages/artifact.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

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
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  fs::create_directories(parent, ec);
  if (ec) return Status::IOError("cannot create " + parent.string() + ": " + ec.message());
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) {
      f.close();
      fs::remove(tmp, ec);
      return Status::IOError("cannot write " + tmp);
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Status::IOError("cannot rename an artifact to " + path + ": " + ec.message());
  }
  return Status::OK();
}

}  // namespace framemill
