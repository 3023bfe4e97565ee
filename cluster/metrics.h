// How a clustering compares with known labels: adjusted Rand index, purity, and the
// two faults that matter for identities (people merged, a person split). Labels are
// cluster numbers >= 0, or -1 for noise, which counts as a singleton of its own (a
// face called noise is neither merged nor split). Pure functions.
#pragma once

#include <vector>

namespace framemill::cluster {

struct Agreement {
  double ari = 0;      // adjusted Rand index (Hubert and Arabie), 1 = identical
  double purity = 0;   // share of clustered points whose cluster's majority label is theirs
  int merged = 0;      // found clusters holding more than one true label
  int split = 0;       // true labels spread over more than one found cluster
  int noise = 0;       // labelled points the clustering called noise
};

Agreement Compare(const std::vector<int>& truth, const std::vector<int>& found);

}  // namespace framemill::cluster
