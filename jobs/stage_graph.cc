#include "jobs/stage_graph.h"

#include <algorithm>
#include <set>

namespace framemill {

bool StageGraph::Add(StageSpec spec, std::string* error) {
  if (Find(spec.name) != nullptr) {
    *error = "stage '" + spec.name + "' registered twice";
    return false;
  }
  if (spec.downloads && Downloader() != nullptr) {
    *error = "stage '" + spec.name + "' downloads URL items, as '" + Downloader()->name +
             "' already does";
    return false;
  }
  for (const std::string& d : spec.deps) {
    if (Find(d) == nullptr) {
      *error = "stage '" + spec.name + "' depends on unknown stage '" + d + "'";
      return false;
    }
  }
  stages_.push_back(std::move(spec));
  return true;
}

const StageSpec* StageGraph::Find(const std::string& name) const {
  for (const StageSpec& s : stages_)
    if (s.name == name) return &s;
  return nullptr;
}

const StageSpec* StageGraph::Downloader() const {
  for (const StageSpec& s : stages_)
    if (s.downloads) return &s;
  return nullptr;
}

std::vector<std::string> StageGraph::Names() const {
  std::vector<std::string> out;
  for (const StageSpec& s : stages_) out.push_back(s.name);
  return out;
}

std::vector<std::string> StageGraph::Closure(const std::vector<std::string>& selected,
                                             std::string* error) const {
  std::set<std::string> want;
  std::vector<std::string> stack;
  for (const std::string& s : selected) {
    if (s == "all") {
      for (const StageSpec& st : stages_) stack.push_back(st.name);
      continue;
    }
    if (Find(s) == nullptr) {
      std::string valid;
      for (const StageSpec& st : stages_) valid += (valid.empty() ? "" : ", ") + st.name;
      *error = "unknown or unavailable stage '" + s + "'; valid stages: " + valid + " (or all)";
      return {};
    }
    stack.push_back(s);
  }
  while (!stack.empty()) {
    std::string s = stack.back();
    stack.pop_back();
    if (!want.insert(s).second) continue;
    for (const std::string& d : Find(s)->deps) stack.push_back(d);
  }
  std::vector<std::string> out;
  for (const StageSpec& st : stages_)
    if (want.count(st.name)) out.push_back(st.name);
  return out;
}

}  // namespace framemill
