#include "stages/artifact.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <functional>

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

namespace {

// The claim's lease token as artifact names carry it: 16 hex digits.
std::string TokenHex(const ClaimedJob& job) {
  char token[24];
  std::snprintf(token, sizeof token, "%016llx", static_cast<unsigned long long>(job.lease_token));
  return token;
}

}  // namespace

std::string ArtifactPath(const std::string& dir, const ClaimedJob& job, int64_t frame,
                         const std::string& ext) {
  std::string name = std::to_string(job.item_id);
  if (frame >= 0) name += "-f" + std::to_string(frame);
  return dir + "/" + name + "-" + TokenHex(job) + "." + ext;
}

namespace {

// Whether `name` is <item>[-f<frame>]-<token>.<ext>[.tmp...] of `item` and another token.
bool EarlierAttempt(const std::string& name, int64_t item, const std::string& token,
                    const std::string& ext) {
  const std::string prefix = std::to_string(item) + "-";
  if (name.rfind(prefix, 0) != 0) return false;
  size_t at = prefix.size();
  if (at < name.size() && name[at] == 'f') {  // -f<frame>-
    size_t digits = at + 1;
    while (digits < name.size() && std::isdigit(static_cast<unsigned char>(name[digits]))) ++digits;
    if (digits == at + 1 || digits >= name.size() || name[digits] != '-') return false;
    at = digits + 1;
  }
  if (name.size() < at + 16 + 1 + ext.size()) return false;
  const std::string theirs = name.substr(at, 16);
  if (theirs.find_first_not_of("0123456789abcdef") != std::string::npos || theirs == token) return false;
  const std::string rest = name.substr(at + 16);
  return rest == "." + ext || rest.rfind("." + ext + ".tmp", 0) == 0;
}

}  // namespace

namespace {

// Removes (unless `dry_run`) each file directly under `dir` whose name `doomed` accepts;
// returns how many there were.
Result<int64_t> RemoveFiles(const std::string& dir, const std::function<bool(const fs::path&)>& doomed,
                            bool dry_run) {
  int64_t found = 0;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!doomed(it->path())) continue;
    ++found;
    std::error_code rm;
    if (!dry_run) fs::remove(it->path(), rm);
    if (rm) return Status::IOError("cannot remove " + it->path().string() + ": " + rm.message());
  }
  if (ec) return Status::IOError("cannot list " + dir + ": " + ec.message());
  return found;
}

}  // namespace

Status RemoveEarlierAttempts(const std::string& dir, const ClaimedJob& job, const std::string& ext) {
  const std::string token = TokenHex(job);
  return RemoveFiles(dir, [&](const fs::path& p) {
    return EarlierAttempt(p.filename().string(), job.item_id, token, ext);
  }, false).status();
}

Result<int64_t> RemoveUnlistedArtifacts(const std::string& dir, int64_t item, const std::string& ext,
                                        const std::set<std::string>& keep, bool dry_run) {
  return RemoveFiles(dir, [&](const fs::path& p) {  // any token is another's: "" is none's
    return EarlierAttempt(p.filename().string(), item, "", ext) && !keep.count(p.string());
  }, dry_run);
}

Status WriteArtifact(const std::string& path, std::string_view bytes) {
  // Two workers (a stale one and its rescuer) may write the same name: each its own temporary.
  return WriteFileAtomically(path, bytes, std::to_string(getpid()));
}

}  // namespace framemill
