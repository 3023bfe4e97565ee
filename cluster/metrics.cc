#include "cluster/metrics.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace framemill::cluster {
namespace {

double Pairs(double n) { return n * (n - 1) / 2; }

// Noise points become singletons, numbered past every real label.
std::vector<long> WithSingletons(const std::vector<int>& labels) {
  std::vector<long> out(labels.size());
  long next = 1 + (labels.empty() ? 0 : *std::max_element(labels.begin(), labels.end()));
  for (size_t i = 0; i < labels.size(); ++i) out[i] = labels[i] >= 0 ? labels[i] : next++;
  return out;
}

double F(double p, double r) { return p + r > 0 ? 2 * p * r / (p + r) : 0; }

// Pairwise and BCubed precision, recall and F from the contingency counts.
void PairScores(const std::map<std::pair<long, long>, double>& both, const std::map<long, double>& rows,
                const std::map<long, double>& cols, size_t n, Agreement* a) {
  double together = 0, same = 0, both_pairs = 0;
  for (auto& [k, v] : both) both_pairs += Pairs(v);
  for (auto& [k, v] : cols) together += Pairs(v);
  for (auto& [k, v] : rows) same += Pairs(v);
  a->pair_precision = together > 0 ? both_pairs / together : 1;
  a->pair_recall = same > 0 ? both_pairs / same : 1;
  a->pair_f = F(a->pair_precision, a->pair_recall);
  if (n == 0) return;
  // Point i in cell (t, f) of size c: precision c / |f|, recall c / |t|; c points share it.
  double p = 0, r = 0;
  for (auto& [k, c] : both) {
    p += c * c / cols.at(k.second);
    r += c * c / rows.at(k.first);
  }
  a->bcubed_precision = p / double(n);
  a->bcubed_recall = r / double(n);
  a->bcubed_f = F(a->bcubed_precision, a->bcubed_recall);
}

}  // namespace

Agreement Compare(const std::vector<int>& truth, const std::vector<int>& found) {
  Agreement a;
  const size_t n = std::min(truth.size(), found.size());
  const std::vector<long> t = WithSingletons(truth), f = WithSingletons(found);
  std::map<std::pair<long, long>, double> both;
  std::map<long, double> rows, cols;
  for (size_t i = 0; i < n; ++i) {
    ++both[{t[i], f[i]}];
    ++rows[t[i]];
    ++cols[f[i]];
  }
  double index = 0, sum_rows = 0, sum_cols = 0;
  for (auto& [k, v] : both) index += Pairs(v);
  for (auto& [k, v] : rows) sum_rows += Pairs(v);
  for (auto& [k, v] : cols) sum_cols += Pairs(v);
  const double expected = Pairs(double(n)) > 0 ? sum_rows * sum_cols / Pairs(double(n)) : 0;
  const double max_index = (sum_rows + sum_cols) / 2;
  a.ari = max_index == expected ? 1.0 : (index - expected) / (max_index - expected);
  PairScores(both, rows, cols, n, &a);

  // Purity, merges and splits over real labels and real clusters only.
  std::map<int, std::map<int, int>> in_cluster;  // found -> truth -> count
  std::map<int, std::set<int>> clusters_of;      // truth -> found clusters
  size_t clustered = 0;
  for (size_t i = 0; i < n; ++i) {
    if (truth[i] >= 0 && found[i] < 0) ++a.noise;
    if (found[i] < 0) continue;
    ++clustered;
    ++in_cluster[found[i]][truth[i]];
    if (truth[i] >= 0) clusters_of[truth[i]].insert(found[i]);
  }
  size_t majority = 0;
  for (auto& [c, counts] : in_cluster) {
    int best = 0, labels = 0;
    for (auto& [label, k] : counts) {
      if (label >= 0) ++labels;
      best = std::max(best, label >= 0 ? k : 0);
    }
    majority += static_cast<size_t>(best);
    a.merged += labels > 1;
  }
  for (auto& [label, cs] : clusters_of) a.split += cs.size() > 1;
  a.purity = clustered == 0 ? 1.0 : double(majority) / double(clustered);
  return a;
}

}  // namespace framemill::cluster
