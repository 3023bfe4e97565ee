// Patch search on the device: parallel PatchMatch, one thread per pixel per iteration.
// The CPU twin is PatchMatchCpu (gpu/patch_match.cc): the same candidates in the same
// order, integer costs and a strict "less than", so the two fields are equal, not close.
#include <climits>
#include <utility>

#include "gpu/cuda/kernels.h"

namespace framemill::gpu::cuda {

namespace {

constexpr int kBlockX = 32, kBlockY = 8;

dim3 Grid(int w, int h) { return dim3((w + kBlockX - 1) / kBlockX, (h + kBlockY - 1) / kBlockY); }

// PatchMatchHash and PatchMatchRandom of gpu/ops.h, repeated for the device.
__device__ __forceinline__ uint32_t Hash(uint32_t a) {
  a ^= a >> 16;
  a *= 0x7feb352dU;
  a ^= a >> 15;
  a *= 0x846ca68bU;
  a ^= a >> 16;
  return a;
}
__device__ __forceinline__ uint32_t Random(uint32_t seed, int x, int y, int it, int k) {
  return Hash(seed ^ Hash(uint32_t(x) + Hash(uint32_t(y) + Hash(uint32_t(it) * 64U + uint32_t(k)))));
}

__device__ __forceinline__ int Cost(const PatchMatchPlanes& p, int px, int py, int qx, int qy,
                                    int r, int bound) {
  int sum = 0;
  for (int dy = -r; dy <= r; ++dy) {
    const int ty = py + dy;
    if (ty < 0 || ty >= p.h) continue;
    const uint8_t* a = p.image + size_t(ty) * p.w * 3;
    const uint8_t* b = p.image + size_t(qy + dy) * p.w * 3;
    for (int dx = -r; dx <= r; ++dx) {
      const int tx = px + dx;
      if (tx < 0 || tx >= p.w) continue;
      const uint8_t* pa = a + 3 * tx;
      const uint8_t* pb = b + 3 * (qx + dx);
      const int d0 = int(pa[0]) - int(pb[0]), d1 = int(pa[1]) - int(pb[1]), d2 = int(pa[2]) - int(pb[2]);
      sum += d0 * d0 + d1 * d1 + d2 * d2;
    }
    if (sum >= bound) return bound;
  }
  return sum;
}

__global__ void StartCosts(PatchMatchPlanes p, int r) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= p.w || y >= p.h) return;
  const int i = y * p.w + x;
  if (p.active[i] == 0) {
    p.cost_a[i] = 0;
    return;
  }
  const int2 q = p.nnf_a[i];
  p.cost_a[i] = Cost(p, x, y, q.x, q.y, r, INT_MAX);
}

__global__ void Iterate(PatchMatchPlanes p, const int2* in_nnf, const int* in_cost, int2* out_nnf,
                        int* out_cost, int r, int it, int jump, uint32_t seed) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= p.w || y >= p.h) return;
  const int i = y * p.w + x;
  int2 best = in_nnf[i];
  int best_cost = in_cost[i];
  if (p.active[i] != 0) {
    const int steps[8][2] = {{-1, 0}, {1, 0}, {0, -1}, {0, 1},
                             {-jump, 0}, {jump, 0}, {0, -jump}, {0, jump}};
    const int n_steps = jump == 1 ? 4 : 8;
    for (int s = 0; s < n_steps; ++s) {
      const int nx = x + steps[s][0], ny = y + steps[s][1];
      if (nx < 0 || ny < 0 || nx >= p.w || ny >= p.h || p.active[ny * p.w + nx] == 0) continue;
      const int2 q = in_nnf[ny * p.w + nx];
      const int qx = q.x - steps[s][0], qy = q.y - steps[s][1];
      if (qx < 0 || qy < 0 || qx >= p.w || qy >= p.h || p.source[qy * p.w + qx] == 0) continue;
      const int c = Cost(p, x, y, qx, qy, r, best_cost);
      if (c < best_cost) best = make_int2(qx, qy), best_cost = c;
    }
    int k = 0;
    for (int rad = max(p.w, p.h); rad >= 1; rad /= 2, k += 2) {
      const uint32_t span = 2U * uint32_t(rad) + 1U;
      const int rx = int(Random(seed, x, y, it, k) % span) - rad;
      const int ry = int(Random(seed, x, y, it, k + 1) % span) - rad;
      const int qx = min(max(best.x + rx, 0), p.w - 1), qy = min(max(best.y + ry, 0), p.h - 1);
      if (p.source[qy * p.w + qx] == 0) continue;
      const int c = Cost(p, x, y, qx, qy, r, best_cost);
      if (c < best_cost) best = make_int2(qx, qy), best_cost = c;
    }
  }
  out_nnf[i] = best;
  out_cost[i] = best_cost;
}

}  // namespace

cudaError_t LaunchPatchMatch(const PatchMatchPlanes& p, int radius, int iterations, uint32_t seed,
                             cudaStream_t stream) {
  static constexpr int kJumps[4] = {8, 4, 2, 1};
  const dim3 block(kBlockX, kBlockY), grid = Grid(p.w, p.h);
  StartCosts<<<grid, block, 0, stream>>>(p, radius);
  int2 *in_nnf = p.nnf_a, *out_nnf = p.nnf_b;
  int *in_cost = p.cost_a, *out_cost = p.cost_b;
  for (int it = 0; it < iterations; ++it) {
    Iterate<<<grid, block, 0, stream>>>(p, in_nnf, in_cost, out_nnf, out_cost, radius, it,
                                        kJumps[it % 4], seed);
    std::swap(in_nnf, out_nnf);
    std::swap(in_cost, out_cost);
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || in_nnf == p.nnf_a) return e;
  // An odd count leaves the result in b.
  const size_t n = size_t(p.w) * p.h;
  e = cudaMemcpyAsync(p.nnf_a, in_nnf, sizeof(int2) * n, cudaMemcpyDeviceToDevice, stream);
  if (e != cudaSuccess) return e;
  return cudaMemcpyAsync(p.cost_a, in_cost, sizeof(int) * n, cudaMemcpyDeviceToDevice, stream);
}

}  // namespace framemill::gpu::cuda
