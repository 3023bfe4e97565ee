#include "cluster/stable_ids.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace framemill::cluster {

StableIds AssignStableIds(const std::vector<std::vector<std::string>>& members,
                          const PreviousIds& previous) {
  StableIds out;
  out.id.assign(members.size(), 0);
  out.next_id = std::max<int64_t>(1, previous.next_id);
  // Shared members of each (new cluster, old id) pair.
  std::vector<std::map<int64_t, int64_t>> overlap(members.size());
  std::map<int64_t, std::set<size_t>> went_to;  // old id -> new clusters holding its members
  for (size_t c = 0; c < members.size(); ++c) {
    for (const std::string& m : members[c]) {
      auto it = previous.id_of.find(m);
      if (it == previous.id_of.end()) continue;
      ++overlap[c][it->second];
      went_to[it->second].insert(c);
    }
  }
  std::vector<std::tuple<int64_t, int64_t, size_t>> pairs;  // (-shared, old id, cluster)
  for (size_t c = 0; c < members.size(); ++c)
    for (const auto& [old, n] : overlap[c]) pairs.emplace_back(-n, old, c);
  std::sort(pairs.begin(), pairs.end());
  std::set<int64_t> taken;
  for (const auto& [neg, old, c] : pairs) {
    if (out.id[c] != 0 || taken.count(old)) continue;
    out.id[c] = old;
    taken.insert(old);
  }
  for (int64_t& id : out.id)
    if (id == 0) id = out.next_id++;

  for (size_t c = 0; c < members.size(); ++c) {
    if (overlap[c].size() < 2) continue;
    IdChange m{out.id[c], {}};
    for (const auto& [old, n] : overlap[c])
      if (old != out.id[c]) m.others.push_back(old);
    out.merges.push_back(std::move(m));
  }
  for (const auto& [old, clusters] : went_to) {
    if (clusters.size() < 2) continue;
    IdChange s{old, {}};
    for (size_t c : clusters)
      if (out.id[c] != old) s.others.push_back(out.id[c]);
    std::sort(s.others.begin(), s.others.end());
    out.splits.push_back(std::move(s));
  }
  std::set<int64_t> old_ids;
  for (const auto& [m, id] : previous.id_of) old_ids.insert(id);
  for (int64_t id : old_ids)
    if (!taken.count(id)) out.retired.push_back(id);
  return out;
}

}  // namespace framemill::cluster
