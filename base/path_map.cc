#include "base/path_map.h"

#include <algorithm>

namespace framemill {

namespace {
std::string TrimSlash(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}
}  // namespace

Result<PathMap> PathMap::Parse(std::string_view spec) {
  PathMap m;
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t end = std::min(spec.find(';', start), spec.size());
    std::string_view rule = spec.substr(start, end - start);
    start = end + 1;
    while (!rule.empty() && rule.front() == ' ') rule.remove_prefix(1);
    while (!rule.empty() && rule.back() == ' ') rule.remove_suffix(1);
    if (rule.empty()) continue;
    const size_t eq = rule.find('=');
    if (eq == std::string_view::npos)
      return Status::InvalidArgument("path map rule '" + std::string(rule) +
                                     "' is not canonical=local");
    std::string from = TrimSlash(std::string(rule.substr(0, eq)));
    std::string to = TrimSlash(std::string(rule.substr(eq + 1)));
    if (from.empty() || to.empty() || from[0] != '/' || to[0] != '/')
      return Status::InvalidArgument("path map rule '" + std::string(rule) +
                                     "' needs two absolute paths");
    m.rules_.emplace_back(std::move(from), std::move(to));
  }
  return m;
}

bool PathMap::Replace(const std::string& path, const std::string& from, const std::string& to,
                      std::string* out) {
  if (path.compare(0, from.size(), from) != 0) return false;
  if (path.size() > from.size() && path[from.size()] != '/' && from != "/") return false;
  *out = to + path.substr(from.size());
  return true;
}

std::string PathMap::Map(const std::string& path, bool to_local) const {
  size_t best = 0;  // the longest matching prefix so far
  std::string out = path, candidate;
  for (const auto& [canonical, local] : rules_) {
    const std::string& from = to_local ? canonical : local;
    if ((best == 0 || from.size() > best) &&
        Replace(path, from, to_local ? local : canonical, &candidate)) {
      best = from.size();
      out = candidate;
    }
  }
  return out;
}

std::string PathMap::ToLocal(const std::string& canonical) const { return Map(canonical, true); }

std::string PathMap::ToCanonical(const std::string& local) const { return Map(local, false); }

}  // namespace framemill
