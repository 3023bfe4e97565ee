// TopKSimilarCpu: the CPU twin of the device's similarity blocks, and the CPU backend's
// own implementation. Compiled with -O3 (CMakeLists.txt) so the dot product vectorises.
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include <tbb/parallel_for.h>

#include "gpu/ops.h"

namespace framemill::gpu {
namespace {

constexpr int kLanes = 64;          // independent accumulators: 4 AVX-512 or 8 AVX2 registers
constexpr int64_t kQueryTile = 16;  // queries that share each base row while it is in L1
constexpr int64_t kBaseTile = 256;  // base rows per pass (1 MB at 1024-d: stays in L2)

bool Better(float s, int32_t id, float than_s, int32_t than_id) {
  return s > than_s || (s == than_s && than_id >= 0 && id < than_id);
}

// One query's k best, kept sorted (best first) in its slice of the output.
void Offer(float s, int32_t id, int k, float* sims, int32_t* ids) {
  if (!Better(s, id, sims[k - 1], ids[k - 1])) return;
  int j = k - 1;
  for (; j > 0 && Better(s, id, sims[j - 1], ids[j - 1]); --j) {
    sims[j] = sims[j - 1];
    ids[j] = ids[j - 1];
  }
  sims[j] = s;
  ids[j] = id;
}

}  // namespace

__attribute__((target_clones("arch=skylake-avx512", "arch=haswell", "default")))
float DotCpu(const float* a, const float* b, int dim) {
  float acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= dim; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  float tail = 0;
  for (; i < dim; ++i) tail += a[i] * b[i];
  for (int j = 0; j < kLanes; ++j) tail += acc[j];
  return tail;
}

Status CheckSimilarityQuery(const SimilarityQuery& q) {
  if (q.k < 1 || q.k > 256) return Status::InvalidArgument("TopKSimilar: k must be in [1, 256]");
  if (q.dim < 1) return Status::InvalidArgument("TopKSimilar: rows need at least one dimension");
  if (q.nq < 0 || q.nb < 0 || q.nb > INT32_MAX)
    return Status::InvalidArgument("TopKSimilar: row counts must be in [0, 2^31)");
  if ((q.nq > 0 && q.queries == nullptr) || (q.nb > 0 && q.base == nullptr))
    return Status::InvalidArgument("TopKSimilar: rows missing");
  return Status::OK();
}

TopK TopKSimilarCpu(const SimilarityQuery& q) {
  if (!CheckSimilarityQuery(q).ok()) throw std::invalid_argument(CheckSimilarityQuery(q).ToString());
  TopK out;
  out.k = q.k;
  out.ids.assign(static_cast<size_t>(q.nq) * q.k, -1);
  out.sims.assign(static_cast<size_t>(q.nq) * q.k, kNoSimilarity);
  const int64_t tiles = (q.nq + kQueryTile - 1) / kQueryTile;
  tbb::parallel_for(int64_t{0}, tiles, [&](int64_t t) {
    const int64_t q0 = t * kQueryTile, q1 = std::min(q.nq, q0 + kQueryTile);
    for (int64_t b0 = 0; b0 < q.nb; b0 += kBaseTile) {
      const int64_t b1 = std::min(q.nb, b0 + kBaseTile);
      for (int64_t b = b0; b < b1; ++b) {
        const float* brow = q.base + b * q.dim;
        for (int64_t i = q0; i < q1; ++i) {
          if (q.self != nullptr && q.self[i] == b) continue;
          const float s = DotCpu(q.queries + i * q.dim, brow, q.dim);
          Offer(s, static_cast<int32_t>(b), q.k, &out.sims[i * q.k], &out.ids[i * q.k]);
        }
      }
    }
  });
  return out;
}

int64_t TopKSimilarBytes(const SimilarityQuery& q) {
  // The CUDA backend's one block: the base rows, the query rows unless they are the
  // base, the skip list, one tile of similarities, the k results per query.
  const bool same = q.queries == q.base && q.nq == q.nb;
  return 4 * q.nb * q.dim + (same ? 0 : 4 * q.nq * q.dim) + (q.self != nullptr ? 8 * q.nq : 0) +
         4 * std::min(q.nq, kSimilarityQueryRows) * std::min(q.nb, kSimilarityBaseRows) +
         8 * q.nq * q.k + 5 * 256;  // each part aligned to 256 bytes
}

}  // namespace framemill::gpu
