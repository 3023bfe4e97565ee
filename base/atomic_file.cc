#include "base/atomic_file.h"

#include <filesystem>
#include <fstream>

namespace framemill {
namespace fs = std::filesystem;

Status WriteFileAtomically(const std::string& path, std::string_view bytes,
                           std::string_view tag) {
  std::error_code ec;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) return Status::IOError("cannot create " + parent.string() + ": " + ec.message());
  const std::string temp = path + ".tmp" + std::string(tag);
  {
    std::ofstream f(temp, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f) {
      fs::remove(temp, ec);
      return Status::IOError("cannot write " + temp);
    }
  }
  return RenameIntoPlace(temp, path);
}

Status RenameIntoPlace(const std::string& temp, const std::string& path) {
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (!ec) return Status::OK();
  const std::string why = ec.message();
  fs::remove(temp, ec);
  return Status::IOError("cannot rename " + temp + " to " + path + ": " + why);
}

}  // namespace framemill
