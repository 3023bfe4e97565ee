// Where a shared store's item files are on this machine. With workers on many machines
// the store keeps one canonical path per file; each machine maps a canonical prefix to
// where it mounts that storage (FRAMEMILL_PATH_MAP="/data=/mnt/nfs/data"). Enqueue records
// canonical paths, so the same file enqueued from two machines is one item; workers open
// local ones. Plain value; thread-safe to share once built.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace framemill {

class PathMap {
 public:
  PathMap() = default;
  // "canonical=local" pairs separated by ';', both absolute. Empty: the identity.
  static Result<PathMap> Parse(std::string_view spec);

  // The longest canonical prefix that matches whole path components is replaced.
  std::string ToLocal(const std::string& canonical) const;
  std::string ToCanonical(const std::string& local) const;
  bool empty() const { return rules_.empty(); }

 private:
  static bool Replace(const std::string& path, const std::string& from, const std::string& to,
                      std::string* out);
  // The rule whose side (canonical, or local) is the longest prefix of `path`, applied.
  std::string Map(const std::string& path, bool to_local) const;
  std::vector<std::pair<std::string, std::string>> rules_;  // (canonical, local)
};

}  // namespace framemill
