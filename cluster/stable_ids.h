// Cluster ids that outlive a rerun. Each clustering run numbers its clusters afresh;
// this maps them onto the ids of the previous run by shared members, so a gallery built
// on "cluster 7" still finds the same person after new items arrive. A cluster that only
// grew (or shrank) keeps its id; merges and splits are recorded, and a new cluster that
// shares no member gets an id never used before. Pure function.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace framemill::cluster {

struct PreviousIds {
  std::unordered_map<std::string, int64_t> id_of;  // member key -> its cluster id then
  int64_t next_id = 1;                             // no id below this is ever reused
};

struct IdChange {
  int64_t id = 0;                 // merge: the id kept; split: the id split
  std::vector<int64_t> others;    // merge: the ids merged in; split: the ids split off
};

struct StableIds {
  std::vector<int64_t> id;        // per new cluster, in the order given
  std::vector<IdChange> merges;   // a new cluster holding members of several old ones
  std::vector<IdChange> splits;   // an old cluster whose members went to several new ones
  std::vector<int64_t> retired;   // old ids no new cluster carries (members now noise or merged)
  int64_t next_id = 1;
};

// `members[c]`: the member keys of new cluster c. Greedy by overlap, largest first
// (ties: the older id, then the earlier cluster), so the result does not depend on
// hash order.
StableIds AssignStableIds(const std::vector<std::vector<std::string>>& members,
                          const PreviousIds& previous);

}  // namespace framemill::cluster
