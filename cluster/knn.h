// Nearest-neighbour graphs over unit-norm embeddings, by cosine distance (1 - dot):
// exact, in blocks of the similarity matrix on a ComputeBackend (the CPU, or a GPU), or
// approximate with HNSW (hnswlib), which never holds an n x n matrix. Plain functions;
// each call owns what it allocates and is safe to run from any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "gpu/compute_backend.h"

namespace framemill::cluster {

// n rows of `dim` floats, row-major, each of unit length (Normalize makes them so).
struct Embeddings {
  int64_t n = 0;
  int dim = 0;
  std::vector<float> data;
  const float* row(int64_t i) const { return data.data() + i * dim; }
};

// Scales each row to unit length; a zero row stays zero (it is far from everything).
void Normalize(Embeddings* e);

// Each point's k nearest other points, nearest first: ids[i*k + j], dist[i*k + j] (cosine
// distance in [0, 2]). A point with fewer than k others has id -1 and distance 2 past them.
struct KnnGraph {
  int64_t n = 0;
  int k = 0;
  std::vector<int32_t> ids;
  std::vector<float> dist;
  // Edges beyond the k nearest (BridgeGroups): a, b and their cosine distance.
  struct Bridge {
    int32_t a = 0, b = 0;
    float dist = 0;
  };
  std::vector<Bridge> bridges;
};

// Exact: the similarity matrix in blocks of `block` query rows on `backend` (its
// TopKSimilar operation), so memory stays O(block x n). OutOfMemory from a device comes
// back as is, for the caller's ladder to step down.
Result<KnnGraph> ExactKnn(const Embeddings& e, int k, gpu::ComputeBackend& backend,
                          int64_t block = 4096);

struct HnswOptions {
  int m = 16;                 // links per node (hnswlib's M)
  int ef_construction = 200;  // candidate list while building
  int ef_search = 0;          // candidate list while querying; 0: max(2k, 64)
  unsigned seed = 100;
};

// Approximate, with hnswlib (Debian's libhnswlib-dev): memory O(n x (dim + m)).
Result<KnnGraph> HnswKnn(const Embeddings& e, int k, const HnswOptions& options = {});

// The share of the exact graph's neighbours that the approximate graph also found.
double KnnRecall(const KnnGraph& approx, const KnnGraph& exact);

}  // namespace framemill::cluster
