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
  // Pairwise: of the pairs put together, the share that are one person (precision); of
  // the pairs that are one person, the share put together (recall); F their harmonic mean.
  double pair_precision = 1, pair_recall = 1, pair_f = 1;
  // BCubed (Bagga and Baldwin): the same per point, averaged over points.
  double bcubed_precision = 1, bcubed_recall = 1, bcubed_f = 1;
};

Agreement Compare(const std::vector<int>& truth, const std::vector<int>& found);

}  // namespace framemill::cluster
