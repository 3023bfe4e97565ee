// The CPU twin of gpu/cuda/flow.cu: the same steps, in the same order, so the device
// test can hold the two to a tight tolerance.
#include <algorithm>
#include <cmath>

#include <tbb/parallel_for.h>

#include "gpu/ops.h"

namespace framemill::gpu {

namespace {

// A float image, row-major, with clamped reads (the kernels' border rule).
struct Plane {
  int w = 0, h = 0;
  std::vector<float> v;
  Plane() = default;
  Plane(int w_, int h_) : w(w_), h(h_), v(size_t(w_) * h_, 0.f) {}
  float& at(int x, int y) { return v[size_t(y) * w + x]; }
  float at(int x, int y) const { return v[size_t(y) * w + x]; }
  float get(int x, int y) const {
    x = std::clamp(x, 0, w - 1), y = std::clamp(y, 0, h - 1);
    return v[size_t(y) * w + x];
  }
  // Bilinear at (fx, fy), clamped to the edge.
  float sample(float fx, float fy) const {
    fx = std::clamp(fx, 0.f, float(w - 1)), fy = std::clamp(fy, 0.f, float(h - 1));
    const int x0 = int(fx), y0 = int(fy);
    const float ax = fx - float(x0), ay = fy - float(y0);
    const float top = get(x0, y0) + ax * (get(x0 + 1, y0) - get(x0, y0));
    const float bottom = get(x0, y0 + 1) + ax * (get(x0 + 1, y0 + 1) - get(x0, y0 + 1));
    return top + ay * (bottom - top);
  }
};

template <typename F>
void ForRows(int h, F&& f) {
  tbb::parallel_for(0, h, [&](int y) { f(y); });
}

Plane FromGray(const cv::Mat& m) {
  Plane p(m.cols, m.rows);
  ForRows(p.h, [&](int y) {
    const uint8_t* row = m.ptr<uint8_t>(y);
    for (int x = 0; x < p.w; ++x) p.at(x, y) = float(row[x]) * (1.0f / 255.0f);
  });
  return p;
}

Plane Half(const Plane& p, cv::Size s) {
  Plane q(s.width, s.height);
  ForRows(q.h, [&](int y) {
    for (int x = 0; x < q.w; ++x)
      q.at(x, y) = 0.25f * (p.get(2 * x, 2 * y) + p.get(2 * x + 1, 2 * y) +
                            p.get(2 * x, 2 * y + 1) + p.get(2 * x + 1, 2 * y + 1));
  });
  return q;
}

// Window sum of a(x)*b(x) over (2r+1)^2, rows outer, columns inner (as the kernels).
float WindowSum(const Plane& a, const Plane& b, int x, int y, int r) {
  float s = 0;
  for (int dy = -r; dy <= r; ++dy)
    for (int dx = -r; dx <= r; ++dx) s += a.get(x + dx, y + dy) * b.get(x + dx, y + dy);
  return s;
}

}  // namespace

std::vector<cv::Size> FlowPyramid(cv::Size size, const FlowSpec& spec) {
  std::vector<cv::Size> levels = {size};
  while (int(levels.size()) < spec.levels) {
    const cv::Size next(levels.back().width / 2, levels.back().height / 2);
    if (std::min(next.width, next.height) < 16) break;
    levels.push_back(next);
  }
  return levels;
}

Status CheckFlowPairs(const std::vector<FlowPair>& pairs, const FlowSpec& spec) {
  if (spec.levels < 1 || spec.radius < 1 || spec.radius > 15 || spec.iterations < 1 ||
      !(spec.lambda >= 0))
    return Status::InvalidArgument("flow: levels >= 1, radius 1..15, iterations >= 1, lambda >= 0");
  for (const FlowPair& p : pairs) {
    if (p.from.size() != pairs.front().from.size())
      return Status::InvalidArgument("flow: a batch holds frames of one size");
    if (p.from.type() != CV_8UC1 || p.to.type() != CV_8UC1)
      return Status::InvalidArgument("flow needs 8-bit gray frames");
    if (p.from.size() != p.to.size())
      return Status::InvalidArgument("flow needs two frames of one size");
    if (p.from.cols < 8 || p.from.rows < 8) return Status::InvalidArgument("flow needs frames of 8x8 or more");
  }
  return Status::OK();
}

cv::Mat DenseFlowCpu(const FlowPair& pair, const FlowSpec& spec) {
  const std::vector<cv::Size> sizes = FlowPyramid(pair.from.size(), spec);
  std::vector<Plane> from = {FromGray(pair.from)}, to = {FromGray(pair.to)};
  for (size_t l = 1; l < sizes.size(); ++l) {
    from.push_back(Half(from.back(), sizes[l]));
    to.push_back(Half(to.back(), sizes[l]));
  }
  Plane u, v;  // the flow at the level above, in its pixels
  for (int l = int(sizes.size()) - 1; l >= 0; --l) {
    const Plane& i0 = from[size_t(l)];
    const Plane& i1 = to[size_t(l)];
    const int w = i0.w, h = i0.h, r = spec.radius;
    Plane fu(w, h), fv(w, h), ix(w, h), iy(w, h), jx(w, h), jy(w, h), gx(w, h), gy(w, h),
        it(w, h), du(w, h), dv(w, h);
    ForRows(h, [&](int y) {
      for (int x = 0; x < w; ++x) {
        if (!u.v.empty()) {
          const float cx = (float(x) + 0.5f) * 0.5f - 0.5f, cy = (float(y) + 0.5f) * 0.5f - 0.5f;
          fu.at(x, y) = 2.0f * u.sample(cx, cy);
          fv.at(x, y) = 2.0f * v.sample(cx, cy);
        }
        ix.at(x, y) = 0.5f * (i0.get(x + 1, y) - i0.get(x - 1, y));
        iy.at(x, y) = 0.5f * (i0.get(x, y + 1) - i0.get(x, y - 1));
        jx.at(x, y) = 0.5f * (i1.get(x + 1, y) - i1.get(x - 1, y));
        jy.at(x, y) = 0.5f * (i1.get(x, y + 1) - i1.get(x, y - 1));
      }
    });
    for (int k = 0; k < spec.iterations; ++k) {
      // The gradient is the mean of both frames' at the warped position (symmetric: it
      // converges where `from`'s alone oscillates); a pixel carried out of the frame has
      // nothing to match and drops out of the sums.
      ForRows(h, [&](int y) {
        for (int x = 0; x < w; ++x) {
          const float wx = float(x) + fu.at(x, y), wy = float(y) + fv.at(x, y);
          const bool inside = wx >= 0.f && wy >= 0.f && wx <= float(w - 1) && wy <= float(h - 1);
          it.at(x, y) = inside ? i1.sample(wx, wy) - i0.at(x, y) : 0.f;
          gx.at(x, y) = inside ? 0.5f * (ix.at(x, y) + jx.sample(wx, wy)) : 0.f;
          gy.at(x, y) = inside ? 0.5f * (iy.at(x, y) + jy.sample(wx, wy)) : 0.f;
        }
      });
      ForRows(h, [&](int y) {
        for (int x = 0; x < w; ++x) {
          const float bx = WindowSum(gx, it, x, y, r), by = WindowSum(gy, it, x, y, r);
          const float a = WindowSum(gx, gx, x, y, r) + spec.lambda, b = WindowSum(gx, gy, x, y, r);
          const float d = WindowSum(gy, gy, x, y, r) + spec.lambda;
          const float det = a * d - b * b;
          const bool solvable = det > 1e-12f;
          du.at(x, y) = solvable ? -(d * bx - b * by) / det : 0.f;
          dv.at(x, y) = solvable ? -(a * by - b * bx) / det : 0.f;
        }
      });
      ForRows(h, [&](int y) {
        for (int x = 0; x < w; ++x) fu.at(x, y) += du.at(x, y), fv.at(x, y) += dv.at(x, y);
      });
    }
    u = std::move(fu), v = std::move(fv);
  }
  cv::Mat flow(pair.from.size(), CV_32FC2);
  ForRows(flow.rows, [&](int y) {
    auto* row = flow.ptr<cv::Point2f>(y);
    for (int x = 0; x < flow.cols; ++x) row[x] = {u.at(x, y), v.at(x, y)};
  });
  return flow;
}

int64_t DenseFlowBytesPerItem(cv::Size size, const FlowSpec& spec) {
  int64_t px = 0;
  for (cv::Size s : FlowPyramid(size, spec)) px += int64_t(s.width) * s.height;
  return 2 * int64_t(size.width) * size.height + px * kFlowPlanes * int64_t(sizeof(float));
}

}  // namespace framemill::gpu
