// Links the k-NN graph loses. A group of more than k near-duplicates (one person's burst
// of photos, a long shot sampled densely) spends every point's k neighbours inside
// itself, so the graph has no edge out of it, and the same person's other groups can
// never join it whatever the thresholds. For each such closed group this finds the
// groups whose mean directions are nearest its own and adds the closest pair of points
// it can find between them as a bridge edge, when within max_distance. Bridges carry
// true distances, so they never link what the threshold forbids.
// Pure function of its inputs; thread-compatible.
#pragma once

#include "cluster/knn.h"

namespace framemill::cluster {

struct BridgeOptions {
  float max_distance = 0.4f;  // no bridge is longer
  int partners = 8;           // nearest groups (by mean direction) tried for each closed group
  int sample = 16;            // points of each side tried for the closest pair
};

// Adds graph->bridges; returns how many. `e` holds the graph's points, unit rows.
int BridgeGroups(const Embeddings& e, const BridgeOptions& options, KnnGraph* graph);

}  // namespace framemill::cluster
