// The CPU twin of gpu/cuda/patch_match.cu: the same candidates in the same order with
// the same integer costs, so the device test can hold the two fields equal.
#include <tbb/parallel_for.h>

#include <algorithm>
#include <climits>

#include "gpu/ops.h"

namespace framemill::gpu {

namespace {

constexpr int kJumps[4] = {8, 4, 2, 1};

// The patch cost of matching p to q; stops at `bound` (returning it) once a row's
// partial sum reaches it, which cannot change a strict "less than".
int Cost(const cv::Mat& img, int px, int py, int qx, int qy, int r, int bound) {
  int sum = 0;
  for (int dy = -r; dy <= r; ++dy) {
    const int ty = py + dy;
    if (ty < 0 || ty >= img.rows) continue;
    const uint8_t* a = img.ptr<uint8_t>(ty);
    const uint8_t* b = img.ptr<uint8_t>(qy + dy);
    for (int dx = -r; dx <= r; ++dx) {
      const int tx = px + dx;
      if (tx < 0 || tx >= img.cols) continue;
      const uint8_t* pa = a + 3 * tx;
      const uint8_t* pb = b + 3 * (qx + dx);
      const int d0 = pa[0] - pb[0], d1 = pa[1] - pb[1], d2 = pa[2] - pb[2];
      sum += d0 * d0 + d1 * d1 + d2 * d2;
    }
    if (sum >= bound) return bound;
  }
  return sum;
}

struct Field {
  cv::Mat nnf, cost;
};

// One Jacobi iteration: every active pixel from `in` into `out`.
void Iterate(const PatchMatchTask& t, const PatchMatchSpec& spec, int it, const Field& in,
             Field* out) {
  const int w = t.image.cols, h = t.image.rows, r = spec.radius, jump = kJumps[it % 4];
  const int steps[8][2] = {{-1, 0}, {1, 0}, {0, -1}, {0, 1},
                           {-jump, 0}, {jump, 0}, {0, -jump}, {0, jump}};
  const int n_steps = jump == 1 ? 4 : 8;
  tbb::parallel_for(0, h, [&](int y) {
    for (int x = 0; x < w; ++x) {
      cv::Vec2i best = in.nnf.at<cv::Vec2i>(y, x);
      int best_cost = in.cost.at<int>(y, x);
      if (t.active.at<uint8_t>(y, x) != 0) {
        auto offer = [&](int qx, int qy) {
          if (qx < 0 || qy < 0 || qx >= w || qy >= h || t.source.at<uint8_t>(qy, qx) == 0) return;
          const int c = Cost(t.image, x, y, qx, qy, r, best_cost);
          if (c < best_cost) best = {qx, qy}, best_cost = c;
        };
        for (int s = 0; s < n_steps; ++s) {
          const int nx = x + steps[s][0], ny = y + steps[s][1];
          if (nx < 0 || ny < 0 || nx >= w || ny >= h || t.active.at<uint8_t>(ny, nx) == 0) continue;
          const cv::Vec2i q = in.nnf.at<cv::Vec2i>(ny, nx);
          offer(q[0] - steps[s][0], q[1] - steps[s][1]);
        }
        int k = 0;
        for (int rad = std::max(w, h); rad >= 1; rad /= 2, k += 2) {
          const uint32_t span = 2U * uint32_t(rad) + 1U;
          const int rx = int(PatchMatchRandom(spec.seed, x, y, it, k) % span) - rad;
          const int ry = int(PatchMatchRandom(spec.seed, x, y, it, k + 1) % span) - rad;
          offer(std::clamp(best[0] + rx, 0, w - 1), std::clamp(best[1] + ry, 0, h - 1));
        }
      }
      out->nnf.at<cv::Vec2i>(y, x) = best;
      out->cost.at<int>(y, x) = best_cost;
    }
  });
}

}  // namespace

Status CheckPatchMatchTask(const PatchMatchTask& t, const PatchMatchSpec& spec) {
  if (t.image.empty() || t.image.type() != CV_8UC3)
    return Status::InvalidArgument("PatchMatch needs an 8-bit BGR image");
  const cv::Size s = t.image.size();
  if (t.active.type() != CV_8U || t.source.type() != CV_8U || t.nnf.type() != CV_32SC2 ||
      t.active.size() != s || t.source.size() != s || t.nnf.size() != s)
    return Status::InvalidArgument("PatchMatch needs 8-bit masks and a 32-bit field the image's size");
  if (spec.radius < 1 || spec.radius > 15 || spec.iterations < 1)
    return Status::InvalidArgument("PatchMatch needs a radius in [1, 15] and an iteration");
  if (cv::countNonZero(t.source) == 0) return Status::InvalidArgument("PatchMatch has no source patch");
  for (int y = 0; y < s.height; ++y)
    for (int x = 0; x < s.width; ++x) {
      if (t.active.at<uint8_t>(y, x) == 0) continue;
      const cv::Vec2i q = t.nnf.at<cv::Vec2i>(y, x);
      if (q[0] < 0 || q[1] < 0 || q[0] >= s.width || q[1] >= s.height ||
          t.source.at<uint8_t>(q[1], q[0]) == 0)
        return Status::InvalidArgument("PatchMatch: the starting match of (" + std::to_string(x) +
                                       ", " + std::to_string(y) + ") is not a source patch");
    }
  return Status::OK();
}

PatchMatchResult PatchMatchCpu(const PatchMatchTask& t, const PatchMatchSpec& spec) {
  Field a{t.nnf.clone(), cv::Mat::zeros(t.image.size(), CV_32S)}, b{t.nnf.clone(), a.cost.clone()};
  tbb::parallel_for(0, t.image.rows, [&](int y) {
    for (int x = 0; x < t.image.cols; ++x) {
      if (t.active.at<uint8_t>(y, x) == 0) continue;
      const cv::Vec2i q = t.nnf.at<cv::Vec2i>(y, x);
      a.cost.at<int>(y, x) = Cost(t.image, x, y, q[0], q[1], spec.radius, INT_MAX);
    }
  });
  for (int it = 0; it < spec.iterations; ++it) {
    Iterate(t, spec, it, a, &b);
    std::swap(a, b);
  }
  return {a.nnf, a.cost};
}

int64_t PatchMatchBytesPerItem(cv::Size size) {
  return int64_t(size.area()) * (3 + 1 + 1 + 2 * 8 + 2 * 4);
}

}  // namespace framemill::gpu
