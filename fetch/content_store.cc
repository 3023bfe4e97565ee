#include "fetch/content_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

namespace framemill::fetch {
namespace {

namespace fs = std::filesystem;

std::string ExtensionFor(const std::string& format) {
  if (format == "jpeg") return ".jpg";
  if (format == "mpegts") return ".ts";
  if (format == "mpeg") return ".mpg";
  if (format == "tiff") return ".tif";
  if (format.empty()) return "";
  return "." + format;
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

std::string ContentPath(const std::string& out_dir, const std::string& hash,
                        const std::string& format) {
  return (fs::path(out_dir) / "fetched" / hash.substr(0, 2) / (hash + ExtensionFor(format)))
      .string();
}

Status RemoveStaleTempFiles(const std::string& out_dir, int64_t max_age_s) {
  std::error_code ec;
  fs::path dir = fs::path(out_dir) / "fetched" / "tmp";
  if (!fs::exists(dir, ec)) return Status::OK();
  const auto now = fs::file_time_type::clock::now();
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    if (it->path().extension() != ".part") continue;
    auto mtime = fs::last_write_time(it->path(), ec);
    if (ec) continue;  // gone meanwhile: another process finished with it
    if (now - mtime >= std::chrono::seconds(max_age_s)) fs::remove(it->path(), ec);
  }
  if (ec) return Status::IOError("cleaning " + dir.string() + ": " + ec.message());
  return Status::OK();
}


ContentStore::ContentStore(const std::string& out_dir)
    : tmp_dir_((fs::path(out_dir) / "fetched" / "tmp").string()),
      // Naming an O_TMPFILE file goes through /proc/self/fd (no CAP_DAC_READ_SEARCH).
      tmpfile_ok_(::access("/proc/self/fd", F_OK) == 0) {}

Status ContentStore::EnsureDir(const std::string& dir) {
  if (made_dirs_.count(dir)) return Status::OK();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError("creating " + dir + ": " + ec.message());
  made_dirs_.insert(dir);
  return Status::OK();
}

Status ContentStore::OpenTemp(TempFile* f) {
  FM_RETURN_IF_ERROR(EnsureDir(tmp_dir_));
  if (tmpfile_ok_) {
    f->fd = ::open(tmp_dir_.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
    if (f->fd >= 0) return Status::OK();
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
      return Status::IOError("temporary file in " + tmp_dir_ + ": " + std::strerror(errno));
    tmpfile_ok_ = false;
  }
  f->path = tmp_dir_ + "/" + std::to_string(::getpid()) + "-" + std::to_string(++tmp_counter_) + ".part";
  f->fd = ::open(f->path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (f->fd < 0) {
    std::string err = std::strerror(errno);
    f->path.clear();
    return Status::IOError("creating " + tmp_dir_ + "/*.part: " + err);
  }
  return Status::OK();
}

Status ContentStore::Append(TempFile* f, std::string* bytes) {
  if (bytes->empty()) return Status::OK();
  if (f->fd < 0) FM_RETURN_IF_ERROR(OpenTemp(f));
  if (!WriteAll(f->fd, bytes->data(), bytes->size()))
    return Status::IOError("writing a temporary file in " + tmp_dir_ + ": " + std::strerror(errno));
  bytes->clear();
  return Status::OK();
}

Status ContentStore::Publish(TempFile* f, const std::string& target) {
  if (f->fd < 0) FM_RETURN_IF_ERROR(OpenTemp(f));  // unreachable for a sniffed body
  FM_RETURN_IF_ERROR(EnsureDir(fs::path(target).parent_path().string()));
  if (f->path.empty()) {
    std::string proc = "/proc/self/fd/" + std::to_string(f->fd);
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, target.c_str(), AT_SYMLINK_FOLLOW) != 0 &&
        errno != EEXIST)
      return Status::IOError("linking " + target + ": " + std::strerror(errno));
  } else {
    struct stat st;
    if (::stat(target.c_str(), &st) == 0) {
      ::unlink(f->path.c_str());
    } else if (::rename(f->path.c_str(), target.c_str()) != 0) {
      return Status::IOError("renaming to " + target + ": " + std::strerror(errno));
    }
    f->path.clear();
  }
  ::close(f->fd);
  f->fd = -1;
  return Status::OK();
}

void ContentStore::Drop(TempFile* f) {
  if (f->fd >= 0) ::close(f->fd);
  f->fd = -1;
  if (!f->path.empty()) ::unlink(f->path.c_str());
  f->path.clear();
}

}  // namespace framemill::fetch
