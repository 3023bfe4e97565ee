// The CPU twin of gpu/cuda/hole_fill.cu: the harmonic hole fill of gpu/ops.h, with the same
// float operations in the same order, so the device test can hold the two fills equal.
// Built with -ffp-contract=off (CMakeLists.txt): no product may fuse into a sum.
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>

#include "gpu/ops.h"

namespace framemill::gpu {

namespace {

// A level's pixels, 4 floats each: the sums of known b, g, r and their count; or a
// solution (b, g, r, unused).
struct Level {
  cv::Size size;
  std::vector<float> sums, u, next;
  size_t At(int x, int y) const { return 4 * (size_t(y) * size.width + x); }
};

void InitSums(const HoleFillTask& t, Level* l) {
  l->sums.assign(4 * t.image.total(), 0.0f);
  tbb::parallel_for(0, t.image.rows, [&](int y) {
    const uint8_t* px = t.image.ptr<uint8_t>(y);
    const uint8_t* hole = t.hole.ptr<uint8_t>(y);
    for (int x = 0; x < t.image.cols; ++x) {
      if (hole[x] != 0) continue;
      float* s = &l->sums[l->At(x, y)];
      s[0] = px[3 * x], s[1] = px[3 * x + 1], s[2] = px[3 * x + 2], s[3] = 1.0f;
    }
  });
}

// The coarser level's sums: each pixel's four children, (c00 + c10) + (c01 + c11).
void Push(const Level& fine, Level* coarse) {
  coarse->sums.assign(4 * size_t(coarse->size.area()), 0.0f);
  tbb::parallel_for(0, coarse->size.height, [&](int y) {
    for (int x = 0; x < coarse->size.width; ++x) {
      auto child = [&](int cx, int cy, int c) {
        return cx < fine.size.width && cy < fine.size.height ? fine.sums[fine.At(cx, cy) + c] : 0.0f;
      };
      float* out = &coarse->sums[coarse->At(x, y)];
      for (int c = 0; c < 4; ++c) {
        const float top = child(2 * x, 2 * y, c) + child(2 * x + 1, 2 * y, c);
        const float bottom = child(2 * x, 2 * y + 1, c) + child(2 * x + 1, 2 * y + 1, c);
        out[c] = top + bottom;
      }
    }
  });
}

// The level's first solution: a known pixel's mean colour; an unknown one from the coarser
// solution (null at the coarsest level, which has no unknown pixel), bilinear.
void Start(const Level* coarse, Level* l) {
  l->u.assign(l->sums.size(), 0.0f);
  tbb::parallel_for(0, l->size.height, [&](int y) {
    for (int x = 0; x < l->size.width; ++x) {
      const float* s = &l->sums[l->At(x, y)];
      float* u = &l->u[l->At(x, y)];
      if (s[3] > 0.0f) {
        for (int c = 0; c < 3; ++c) u[c] = s[c] / s[3];
        continue;
      }
      if (coarse == nullptr) continue;
      const int nx = x >> 1, ny = y >> 1;
      const int fx = (x & 1) ? std::min(nx + 1, coarse->size.width - 1) : std::max(nx - 1, 0);
      const int fy = (y & 1) ? std::min(ny + 1, coarse->size.height - 1) : std::max(ny - 1, 0);
      for (int c = 0; c < 3; ++c) {
        const float near_row = 0.75f * coarse->u[coarse->At(nx, ny) + c] + 0.25f * coarse->u[coarse->At(fx, ny) + c];
        const float far_row = 0.75f * coarse->u[coarse->At(nx, fy) + c] + 0.25f * coarse->u[coarse->At(fx, fy) + c];
        u[c] = 0.75f * near_row + 0.25f * far_row;
      }
    }
  });
}

// One Jacobi step: each unknown pixel from its four neighbours in u, into next.
void Relax(Level* l) {
  l->next = l->u;
  const int w = l->size.width, h = l->size.height;
  tbb::parallel_for(0, h, [&](int y) {
    const int up = std::max(y - 1, 0), down = std::min(y + 1, h - 1);
    for (int x = 0; x < w; ++x) {
      if (l->sums[l->At(x, y) + 3] > 0.0f) continue;
      const int left = std::max(x - 1, 0), right = std::min(x + 1, w - 1);
      float* out = &l->next[l->At(x, y)];
      for (int c = 0; c < 3; ++c) {
        const float across = l->u[l->At(left, y) + c] + l->u[l->At(right, y) + c];
        const float along = l->u[l->At(x, up) + c] + l->u[l->At(x, down) + c];
        out[c] = (across + along) * 0.25f;
      }
    }
  });
  std::swap(l->u, l->next);
}

}  // namespace

Status CheckHoleFillTask(const HoleFillTask& t, const HoleFillSpec& spec) {
  if (t.image.empty() || t.image.type() != CV_8UC3)
    return Status::InvalidArgument("the hole fill needs an 8-bit BGR image");
  if (t.hole.type() != CV_8U || t.hole.size() != t.image.size())
    return Status::InvalidArgument("the hole fill needs an 8-bit hole the image's size");
  if (spec.iterations < 0 || spec.iterations > 10000)
    return Status::InvalidArgument("the hole fill needs 0 to 10000 iterations a level");
  if (cv::countNonZero(t.hole) == static_cast<int>(t.hole.total()))
    return Status::InvalidArgument("the hole covers the whole image: nothing is known to fill from");
  return Status::OK();
}

std::vector<cv::Size> HoleFillLevels(const cv::Mat& hole) {
  std::vector<cv::Size> sizes = {hole.size()};
  cv::Mat unknown = hole != 0;
  while (cv::countNonZero(unknown) > 0 && (unknown.cols > 1 || unknown.rows > 1)) {
    const cv::Size half((unknown.cols + 1) / 2, (unknown.rows + 1) / 2);
    cv::Mat next(half, CV_8U, cv::Scalar(255));
    for (int y = 0; y < unknown.rows; ++y)
      for (int x = 0; x < unknown.cols; ++x)
        if (unknown.at<uint8_t>(y, x) == 0) next.at<uint8_t>(y / 2, x / 2) = 0;
    unknown = next;
    sizes.push_back(half);
  }
  return sizes;
}

cv::Mat HoleFillCpu(const HoleFillTask& t, const HoleFillSpec& spec) {
  const std::vector<cv::Size> sizes = HoleFillLevels(t.hole);
  std::vector<Level> levels(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) levels[i].size = sizes[i];
  InitSums(t, &levels[0]);
  for (size_t i = 1; i < levels.size(); ++i) Push(levels[i - 1], &levels[i]);
  for (size_t i = levels.size(); i-- > 0;) {
    Level& l = levels[i];
    Start(i + 1 < levels.size() ? &levels[i + 1] : nullptr, &l);
    if (i + 1 < levels.size())
      for (int it = 0; it < spec.iterations; ++it) Relax(&l);
    if (i + 1 < levels.size()) levels[i + 1] = Level{};  // the coarser level is spent
  }
  cv::Mat out = t.image.clone();
  const Level& l = levels[0];
  tbb::parallel_for(0, out.rows, [&](int y) {
    uint8_t* px = out.ptr<uint8_t>(y);
    const uint8_t* hole = t.hole.ptr<uint8_t>(y);
    for (int x = 0; x < out.cols; ++x) {
      if (hole[x] == 0) continue;
      for (int c = 0; c < 3; ++c)
        px[3 * x + c] = cv::saturate_cast<uint8_t>(static_cast<int>(std::nearbyint(l.u[l.At(x, y) + c])));
    }
  });
  return out;
}

int64_t HoleFillBytesPerItem(cv::Size size) {
  // The image and the hole (6 bytes a pixel, as the CUDA backend lays them out); 48 bytes of
  // floats a pixel at the finest level, a third more for the coarser ones.
  return int64_t(size.area()) * (6 + 64);
}

}  // namespace framemill::gpu
