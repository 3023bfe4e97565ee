// TopKSimilar on the device: the similarity matrix in tiles (a shared-memory SGEMM of
// query rows against base rows, fp32 throughout), each tile merged into every query's
// running top-k. The CPU twin is TopKSimilarCpu (gpu/similarity.cc); both keep the k
// best with ties to the lower id, scanning base rows in ascending order, so they agree
// except where two similarities differ by float summation order (~1e-6).
#include <cuda_runtime.h>

#include "gpu/cuda/kernels.h"

namespace framemill::gpu::cuda {
namespace {

constexpr int kBM = 64, kBN = 64, kBK = 16;  // block tile; 256 threads, 4 x 4 outputs each

// St[c * ld + r] = dot(Q[r], B[c]) for r < rows, c < cols: transposed, so that the
// merge kernel's threads (one per query row) read neighbouring addresses.
__global__ void __launch_bounds__(256)
SimilarityTileKernel(const float* __restrict__ q, int64_t rows, const float* __restrict__ b,
                     int64_t cols, int dim, float* __restrict__ st, int64_t ld) {
  __shared__ float as[kBK][kBM + 4];
  __shared__ float bs[kBK][kBN + 4];
  const int ty = threadIdx.x % 16, tx = threadIdx.x / 16;  // rows vary fastest
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kBM;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int lr = threadIdx.x / 4, lk = (threadIdx.x % 4) * 4;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < dim; k0 += kBK) {
    for (int u = 0; u < 4; ++u) {
      const int k = k0 + lk + u;
      const int64_t qr = row0 + lr, br = col0 + lr;
      as[lk + u][lr] = (qr < rows && k < dim) ? q[qr * dim + k] : 0.f;
      bs[lk + u][lr] = (br < cols && k < dim) ? b[br * dim + k] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; ++kk) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = as[kk][ty * 4 + i];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = bs[kk][tx * 4 + j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t r = row0 + ty * 4 + i, c = col0 + tx * 4 + j;
      if (r < rows && c < cols) st[c * ld + r] = acc[i][j];
    }
}

__device__ __forceinline__ bool Better(float s, int32_t id, float than_s, int32_t than_id) {
  return s > than_s || (s == than_s && than_id >= 0 && id < than_id);
}

// One thread per query row: folds the tile's similarities (base ids base0...) into the
// row's sorted top-k, which lives in the output arrays between tiles.
__global__ void MergeTopKKernel(const float* __restrict__ st, int64_t ld, int64_t rows,
                                int64_t cols, int64_t q0, int64_t base0,
                                const int64_t* __restrict__ self, int k,
                                float* __restrict__ sims, int32_t* __restrict__ ids) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float* bs = sims + (q0 + r) * k;
  int32_t* bi = ids + (q0 + r) * k;
  const int64_t skip = self != nullptr ? self[q0 + r] : -1;
  float worst = bs[k - 1];
  int32_t worst_id = bi[k - 1];
  for (int64_t c = 0; c < cols; ++c) {
    const int32_t id = static_cast<int32_t>(base0 + c);
    const float s = st[c * ld + r];
    if (id == skip || !Better(s, id, worst, worst_id)) continue;
    int j = k - 1;
    for (; j > 0 && Better(s, id, bs[j - 1], bi[j - 1]); --j) {
      bs[j] = bs[j - 1];
      bi[j] = bi[j - 1];
    }
    bs[j] = s;
    bi[j] = id;
    worst = bs[k - 1];
    worst_id = bi[k - 1];
  }
}

__global__ void FillTopKKernel(int64_t n, float* sims, int32_t* ids, float empty) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    sims[i] = empty;
    ids[i] = -1;
  }
}

}  // namespace

cudaError_t LaunchTopKSimilarTile(const SimilarityTile& t, cudaStream_t stream) {
  if (t.rows <= 0 || t.cols <= 0) return cudaSuccess;
  dim3 grid(static_cast<unsigned>((t.cols + kBN - 1) / kBN),
            static_cast<unsigned>((t.rows + kBM - 1) / kBM));
  SimilarityTileKernel<<<grid, 256, 0, stream>>>(t.queries, t.rows, t.base, t.cols, t.dim,
                                                 t.scratch, t.rows);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const unsigned blocks = static_cast<unsigned>((t.rows + 127) / 128);
  MergeTopKKernel<<<blocks, 128, 0, stream>>>(t.scratch, t.rows, t.rows, t.cols, t.q0, t.base0,
                                              t.self, t.k, t.sims, t.ids);
  return cudaGetLastError();
}

cudaError_t LaunchTopKFill(int64_t n, float* sims, int32_t* ids, float empty, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  FillTopKKernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(n, sims, ids, empty);
  return cudaGetLastError();
}

}  // namespace framemill::gpu::cuda
