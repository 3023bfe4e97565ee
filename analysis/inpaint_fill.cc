#include "analysis/inpaint_fill.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>
#include <opencv2/photo.hpp>
#include <opencv2/xphoto/inpainting.hpp>

namespace framemill {

namespace {

constexpr InpaintMethod kMethods[] = {InpaintMethod::kTelea, InpaintMethod::kNavierStokes,
                                      InpaintMethod::kExemplar, InpaintMethod::kFsrFast,
                                      InpaintMethod::kShiftMap, InpaintMethod::kTeleaCoarse,
                                      InpaintMethod::kPyramid};
constexpr double kRadius = 3;  // cv::inpaint's neighbourhood (px)
// Telea and Navier-Stokes read `kRadius` px around each pixel they fill; past a margin of
// twice that, the image cannot change the fill: on the hole's box they give the whole
// image's fill exactly (InpaintFillTest.TeleaOnTheHolesBoxIsTeleaOnTheImage).
constexpr int kBoxMargin = 2 * static_cast<int>(kRadius);

// cv::inpaint on the hole's box, into the hole's pixels of `out` (the image's size): the cost
// follows the hole, not the image (a 0.2% hole in a 1.3 MP photo: 30 ms -> 2 ms).
void DiffuseInBox(const cv::Mat& bgr, const cv::Mat& binary, int flags, cv::Mat* out) {
  const cv::Rect box = HoleBox(binary, kBoxMargin);
  cv::Mat part, in_box = (*out)(box);
  cv::inpaint(bgr(box), binary(box), part, kRadius, flags);
  part.copyTo(in_box, binary(box));
}

// Telea on a copy reduced `f` times, scaled back (bilinear) into the hole. The copy is the
// hole's box, grown and padded to a multiple of `f`; a reduced pixel is unknown when any
// pixel of its block is, so the hole's content never leaks into what is known.
void CoarseTelea(const cv::Mat& bgr, const cv::Mat& binary, int f, cv::Mat* out) {
  const cv::Rect box = HoleBox(binary, kBoxMargin * f);
  const int pad_x = (f - box.width % f) % f, pad_y = (f - box.height % f) % f;
  cv::Mat part, hole;
  cv::copyMakeBorder(bgr(box), part, 0, pad_y, 0, pad_x, cv::BORDER_REPLICATE);
  cv::copyMakeBorder(binary(box), hole, 0, pad_y, 0, pad_x, cv::BORDER_REPLICATE);
  const cv::Size reduced(part.cols / f, part.rows / f);
  cv::Mat small, small_hole, small_fill, fill;
  cv::resize(part, small, reduced, 0, 0, cv::INTER_AREA);
  cv::resize(hole, small_hole, reduced, 0, 0, cv::INTER_AREA);  // a block's mean: > 0 when any
  cv::inpaint(small, small_hole > 0, small_fill, kRadius, cv::INPAINT_TELEA);
  cv::resize(small_fill, fill, part.size(), 0, 0, cv::INTER_LINEAR);
  cv::Mat in_box = (*out)(box);
  fill(cv::Rect(0, 0, box.width, box.height)).copyTo(in_box, binary(box));
}

// One pyramid level of the exemplar fill: the image (holes hold the current estimate),
// and the hole, 255 where unknown.
struct Level {
  cv::Mat image, hole;
};

// Half size; a coarse pixel averages the known pixels of its block, and is unknown when
// any of them is, so no hole content leaks into the known part of a coarser level.
Level Down(const Level& fine) {
  const cv::Size half(fine.image.cols / 2, fine.image.rows / 2);
  cv::Mat known, image_f, image, weight;
  cv::Mat(fine.hole == 0).convertTo(known, CV_32F, 1.0 / 255);
  fine.image.convertTo(image_f, CV_32FC3);
  std::vector<cv::Mat> ch;
  cv::split(image_f, ch);
  for (cv::Mat& c : ch) c = c.mul(known);
  cv::merge(ch, image_f);
  cv::resize(image_f, image, half, 0, 0, cv::INTER_AREA);
  cv::resize(known, weight, half, 0, 0, cv::INTER_AREA);
  Level coarse;
  coarse.hole = cv::Mat(half, CV_8U);
  coarse.image = cv::Mat(half, CV_8UC3);
  for (int y = 0; y < half.height; ++y)
    for (int x = 0; x < half.width; ++x) {
      const float w = weight.at<float>(y, x);
      const bool whole = w > 0.999f;
      coarse.hole.at<uint8_t>(y, x) = whole ? 0 : 255;
      const cv::Vec3f v = image.at<cv::Vec3f>(y, x) / std::max(w, 1e-6f);
      coarse.image.at<cv::Vec3b>(y, x) = whole ? cv::Vec3b(cv::saturate_cast<uint8_t>(v[0]),
                                                           cv::saturate_cast<uint8_t>(v[1]),
                                                           cv::saturate_cast<uint8_t>(v[2]))
                                               : cv::Vec3b(0, 0, 0);
    }
  return coarse;
}

// Centres whose whole patch is inside the image and known.
cv::Mat Sources(const cv::Mat& hole, int r) {
  cv::Mat known, src;
  cv::bitwise_not(hole, known);
  cv::erode(known, src, cv::getStructuringElement(cv::MORPH_RECT, cv::Size(2 * r + 1, 2 * r + 1)),
            cv::Point(-1, -1), 1, cv::BORDER_CONSTANT, cv::Scalar(0));
  return src;
}

// Centres whose patch touches the hole.
cv::Mat Actives(const cv::Mat& hole, int r) {
  cv::Mat act;
  cv::dilate(hole, act, cv::getStructuringElement(cv::MORPH_RECT, cv::Size(2 * r + 1, 2 * r + 1)));
  return act;
}

// A source centre for every active pixel: from the coarser field (doubled) where that
// lands on a source, else one drawn from the list of sources.
cv::Mat StartField(const cv::Mat& active, const cv::Mat& source, const cv::Mat& coarser,
                   uint32_t seed) {
  std::vector<cv::Point> sources;
  cv::findNonZero(source, sources);
  cv::Mat nnf(active.size(), CV_32SC2, cv::Scalar(sources[0].x, sources[0].y));
  for (int y = 0; y < active.rows; ++y)
    for (int x = 0; x < active.cols; ++x) {
      if (active.at<uint8_t>(y, x) == 0) continue;
      if (!coarser.empty()) {
        const int cx = std::min(x / 2, coarser.cols - 1), cy = std::min(y / 2, coarser.rows - 1);
        const cv::Vec2i c = coarser.at<cv::Vec2i>(cy, cx);
        const int qx = 2 * c[0] + x % 2, qy = 2 * c[1] + y % 2;
        if (qx < source.cols && qy < source.rows && source.at<uint8_t>(qy, qx) != 0) {
          nnf.at<cv::Vec2i>(y, x) = {qx, qy};
          continue;
        }
      }
      const cv::Point q = sources[gpu::PatchMatchRandom(seed, x, y, 1000, 0) % sources.size()];
      nnf.at<cv::Vec2i>(y, x) = {q.x, q.y};
    }
  return nnf;
}

// The E step: each hole pixel becomes the weighted mean of what every patch covering it
// copies there, a patch weighing exp(-cost / 2 sigma^2) per pixel with sigma^2 the 75th
// percentile of the costs (Wexler, Shechtman and Irani 2007). Uniform weights measured
// 0.1 dB better in the hole on photos but blur a repeating texture from 30 to 20 dB
// (tests/analysis/inpaint_fill_test.cc): the exemplar fill is for texture, so Wexler's.
// Returns the mean change per channel.
double Vote(const gpu::PatchMatchResult& field, const cv::Mat& active, int r, Level* level) {
  const int w = level->image.cols, h = level->image.rows;
  std::vector<float> costs;
  cv::Mat weight(level->image.size(), CV_32F, cv::Scalar(0));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      if (active.at<uint8_t>(y, x) != 0) {
        const int nx = std::min(x + r, w - 1) - std::max(x - r, 0) + 1;
        const int ny = std::min(y + r, h - 1) - std::max(y - r, 0) + 1;
        const float c = float(field.cost.at<int>(y, x)) / float(3 * nx * ny);
        weight.at<float>(y, x) = c;
        costs.push_back(c);
      }
  if (costs.empty()) return 0;
  std::nth_element(costs.begin(), costs.begin() + costs.size() * 3 / 4, costs.end());
  const float sigma2 = std::max(costs[costs.size() * 3 / 4], 1.0f);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      if (active.at<uint8_t>(y, x) != 0)
        weight.at<float>(y, x) = std::exp(-weight.at<float>(y, x) / (2 * sigma2));
  const cv::Mat before = level->image.clone();
  std::vector<double> change(h, 0.0);
  std::vector<int64_t> count(h, 0);
  tbb::parallel_for(0, h, [&](int y) {
    for (int x = 0; x < w; ++x) {
      if (level->hole.at<uint8_t>(y, x) == 0) continue;
      double acc[3] = {0, 0, 0}, total = 0;
      for (int py = std::max(y - r, 0); py <= std::min(y + r, h - 1); ++py)
        for (int px = std::max(x - r, 0); px <= std::min(x + r, w - 1); ++px) {
          if (active.at<uint8_t>(py, px) == 0) continue;
          const cv::Vec2i q = field.nnf.at<cv::Vec2i>(py, px);
          const cv::Vec3b& v = before.at<cv::Vec3b>(q[1] + y - py, q[0] + x - px);
          const double wt = weight.at<float>(py, px);
          acc[0] += wt * v[0], acc[1] += wt * v[1], acc[2] += wt * v[2];
          total += wt;
        }
      if (total <= 0) continue;
      cv::Vec3b& out = level->image.at<cv::Vec3b>(y, x);
      const cv::Vec3b old = out;
      for (int c = 0; c < 3; ++c) out[c] = cv::saturate_cast<uint8_t>(acc[c] / total);
      change[y] += std::abs(out[0] - old[0]) + std::abs(out[1] - old[1]) + std::abs(out[2] - old[2]);
      ++count[y];
    }
  });
  double sum = 0;
  int64_t n = 0;
  for (int y = 0; y < h; ++y) sum += change[y], n += count[y];
  return n > 0 ? sum / (3.0 * n) : 0;
}

// The pyramid, finest first: halved while the hole is wider than a patch and the level
// keeps room for a few patches and at least one whole known patch.
std::vector<Level> Pyramid(const cv::Mat& bgr, const cv::Mat& hole, int r) {
  std::vector<Level> levels = {{bgr.clone(), hole.clone()}};
  while (levels.size() < 8) {
    const Level& l = levels.back();
    if (std::min(l.image.cols, l.image.rows) / 2 < 8 * (2 * r + 1)) break;
    if (MeasureHole(l.hole).half_width <= 2 * r) break;
    Level next = Down(l);
    if (cv::countNonZero(Sources(next.hole, r)) == 0) break;
    levels.push_back(std::move(next));
  }
  return levels;
}

Result<cv::Mat> Exemplar(const cv::Mat& bgr, const cv::Mat& hole, const ExemplarOptions& o,
                         const PatchSearchFn& search) {
  const int r = o.patch_radius;
  if (cv::countNonZero(Sources(hole, r)) == 0) return Inpaint(bgr, hole, InpaintMethod::kTelea);
  std::vector<Level> levels = Pyramid(bgr, hole, r);
  cv::inpaint(levels.back().image, levels.back().hole, levels.back().image, 3, cv::INPAINT_TELEA);
  cv::Mat coarser_field;
  const int n = static_cast<int>(levels.size());
  for (int l = n - 1; l >= 0; --l) {
    Level& level = levels[l];
    if (l < n - 1) {  // the coarser result, enlarged, is this level's first estimate
      cv::Mat up;
      cv::resize(levels[l + 1].image, up, level.image.size(), 0, 0, cv::INTER_LINEAR);
      up.copyTo(level.image, level.hole);
    }
    const cv::Mat active = Actives(level.hole, r), source = Sources(level.hole, r);
    gpu::PatchMatchTask task{level.image, active, source,
                             StartField(active, source, coarser_field, o.seed + uint32_t(l))};
    // Fewer EM steps at finer levels, where the field is already close and each costs 4x.
    const int steps = n == 1 ? o.fine_iterations
                             : o.fine_iterations + (o.coarse_iterations - o.fine_iterations) * l / (n - 1);
    for (int it = 0; it < steps; ++it) {
      const gpu::PatchMatchSpec spec{r, it == 0 ? o.search_iterations : o.refine_iterations,
                                     o.seed + uint32_t(97 * l + it)};
      task.image = level.image;
      Result<gpu::PatchMatchResult> field =
          search ? search(task, spec) : Result<gpu::PatchMatchResult>(gpu::PatchMatchCpu(task, spec));
      if (!field.ok()) return field.status();
      task.nnf = field->nnf;
      if (Vote(*field, active, r, &level) < 0.25) break;  // converged
    }
    coarser_field = task.nnf;
  }
  cv::Mat out = bgr.clone();
  levels[0].image.copyTo(out, hole);
  return out;
}

// The harmonic fill on the hole's box, on the device `fill` runs on (null: the CPU twin).
Status PyramidInBox(const cv::Mat& bgr, const cv::Mat& binary, const HoleFillFn& fill, cv::Mat* out) {
  const cv::Rect box = HoleBox(binary, kPyramidMargin);
  const gpu::HoleFillTask task{bgr(box), binary(box)};
  const gpu::HoleFillSpec spec;
  Result<cv::Mat> filled = fill ? fill(task, spec) : Result<cv::Mat>(gpu::HoleFillCpu(task, spec));
  if (!filled.ok()) return filled.status();
  if (filled->size() != box.size() || filled->type() != CV_8UC3)
    return Status::Internal("the hole fill gave an image of another size or type");
  cv::Mat in_box = (*out)(box);
  filled->copyTo(in_box, binary(box));
  return Status::OK();
}

// xphoto wants the known pixels marked; shift-map wants CIE Lab.
cv::Mat XphotoFill(const cv::Mat& bgr, const cv::Mat& hole, int algorithm) {
  cv::Mat known, src, out;
  cv::bitwise_not(hole, known);
  // Into a Mat of its own: converted into one that shares `bgr`'s pixels, it overwrote the
  // caller's image with Lab (found when the fill's copy of the image moved before it).
  if (algorithm == cv::xphoto::INPAINT_SHIFTMAP) cv::cvtColor(bgr, src, cv::COLOR_BGR2Lab);
  else src = bgr;
  cv::xphoto::inpaint(src, known, out, algorithm);
  if (algorithm == cv::xphoto::INPAINT_SHIFTMAP) cv::cvtColor(out, out, cv::COLOR_Lab2BGR);
  return out;
}

}  // namespace

std::string_view InpaintMethodName(InpaintMethod m) {
  switch (m) {
    case InpaintMethod::kTelea: return "telea";
    case InpaintMethod::kTeleaCoarse: return "telea_coarse";
    case InpaintMethod::kNavierStokes: return "ns";
    case InpaintMethod::kExemplar: return "exemplar";
    case InpaintMethod::kFsrFast: return "fsr_fast";
    case InpaintMethod::kShiftMap: return "shiftmap";
    case InpaintMethod::kPyramid: return "pyramid";
  }
  return "?";
}

Result<InpaintMethod> ParseInpaintMethod(std::string_view name) {
  std::string valid;
  for (InpaintMethod m : kMethods) {
    if (name == InpaintMethodName(m)) return m;
    valid += (valid.empty() ? "" : ", ") + std::string(InpaintMethodName(m));
  }
  return Status::InvalidArgument("unknown inpainting method '" + std::string(name) + "' (valid: " +
                                 valid + ")");
}

std::vector<InpaintMethod> AllInpaintMethods() { return {std::begin(kMethods), std::end(kMethods)}; }

Result<cv::Mat> Inpaint(const cv::Mat& bgr, const cv::Mat& hole, InpaintMethod method,
                        const ExemplarOptions& options, const InpaintDevice& device,
                        const HoleShape* shape) {
  if (bgr.empty() || bgr.type() != CV_8UC3)
    return Status::InvalidArgument("inpainting needs an 8-bit BGR image");
  if (hole.type() != CV_8U || hole.size() != bgr.size())
    return Status::InvalidArgument("inpainting needs an 8-bit mask the image's size");
  cv::Mat binary = hole > 0;
  if (cv::countNonZero(binary) == 0) return bgr.clone();
  if (cv::countNonZero(binary) == static_cast<int>(binary.total()))
    return Status::InvalidArgument("the mask covers the whole image: nothing is left to fill from");
  cv::Mat out = bgr.clone(), filled;
  switch (method) {
    case InpaintMethod::kTelea: DiffuseInBox(bgr, binary, cv::INPAINT_TELEA, &out); return out;
    case InpaintMethod::kTeleaCoarse: {
      const int f = CoarseFactor(shape != nullptr ? *shape : MeasureHole(binary));
      if (f > 1) CoarseTelea(bgr, binary, f, &out);
      else DiffuseInBox(bgr, binary, cv::INPAINT_TELEA, &out);
      return out;
    }
    case InpaintMethod::kNavierStokes: DiffuseInBox(bgr, binary, cv::INPAINT_NS, &out); return out;
    case InpaintMethod::kExemplar: return Exemplar(bgr, binary, options, device.search);
    case InpaintMethod::kPyramid:
      FM_RETURN_IF_ERROR(PyramidInBox(bgr, binary, device.fill, &out));
      return out;
    case InpaintMethod::kFsrFast: filled = XphotoFill(bgr, binary, cv::xphoto::INPAINT_FSR_FAST); break;
    case InpaintMethod::kShiftMap: filled = XphotoFill(bgr, binary, cv::xphoto::INPAINT_SHIFTMAP); break;
  }
  filled.copyTo(out, binary);
  return out;
}

HoleShape MeasureHole(const cv::Mat& hole) {
  HoleShape s;
  if (hole.empty()) return s;
  const cv::Mat binary = hole > 0;
  s.pixels = cv::countNonZero(binary);
  s.coverage = double(s.pixels) / double(binary.total());
  if (s.pixels == 0) return s;
  // Distance to the nearest known pixel; outside the image counts as known. On the hole's
  // box with a known border of one pixel: every hole pixel's nearest known pixel is in it.
  const cv::Rect box = HoleBox(binary, 0);
  cv::Mat padded, dist;
  cv::copyMakeBorder(binary(box), padded, 1, 1, 1, 1, cv::BORDER_CONSTANT, cv::Scalar(0));
  cv::distanceTransform(padded, dist, cv::DIST_L2, cv::DIST_MASK_PRECISE);
  cv::minMaxLoc(dist, nullptr, &s.half_width);
  s.mean_distance = cv::sum(dist)[0] / double(s.pixels);
  return s;
}

cv::Rect HoleBox(const cv::Mat& mask, int margin) {
  cv::Rect box = cv::boundingRect(mask);
  if (box.area() == 0) return box;
  box.x -= margin;
  box.y -= margin;
  box.width += 2 * margin;
  box.height += 2 * margin;
  return box & cv::Rect(0, 0, mask.cols, mask.rows);
}

int CoarseFactor(const HoleShape& hole) {
  if (hole.pixels < kCoarseMinPixels) return 1;
  int f = 1;
  while (f < 8 && hole.mean_distance / (2 * f) >= kCoarseMinReducedDistance) f *= 2;
  return f;
}

InpaintMethod ChooseInpaintMethod(const HoleShape& hole) {
  return CoarseFactor(hole) > 1 ? InpaintMethod::kTeleaCoarse : InpaintMethod::kTelea;
}

double HolePsnr(const cv::Mat& original, const cv::Mat& filled, const cv::Mat& hole) {
  double sum = 0;
  int64_t n = 0;
  for (int y = 0; y < hole.rows; ++y)
    for (int x = 0; x < hole.cols; ++x) {
      if (hole.at<uint8_t>(y, x) == 0) continue;
      const cv::Vec3b a = original.at<cv::Vec3b>(y, x), b = filled.at<cv::Vec3b>(y, x);
      for (int c = 0; c < 3; ++c) sum += double(a[c] - b[c]) * double(a[c] - b[c]);
      n += 3;
    }
  if (n == 0) return 0;
  const double mse = sum / double(n);
  return mse <= 0 ? 99.0 : 10.0 * std::log10(255.0 * 255.0 / mse);
}

double HoleSsim(const cv::Mat& original, const cv::Mat& filled, const cv::Mat& hole) {
  cv::Mat a, b;
  cv::cvtColor(original, a, cv::COLOR_BGR2GRAY);
  cv::cvtColor(filled, b, cv::COLOR_BGR2GRAY);
  a.convertTo(a, CV_64F), b.convertTo(b, CV_64F);
  const double c1 = 6.5025, c2 = 58.5225;  // (0.01 * 255)^2, (0.03 * 255)^2
  auto blur = [](const cv::Mat& m) {
    cv::Mat o;
    cv::GaussianBlur(m, o, cv::Size(11, 11), 1.5);
    return o;
  };
  const cv::Mat mu_a = blur(a), mu_b = blur(b);
  const cv::Mat aa = blur(a.mul(a)) - mu_a.mul(mu_a), bb = blur(b.mul(b)) - mu_b.mul(mu_b);
  const cv::Mat ab = blur(a.mul(b)) - mu_a.mul(mu_b);
  cv::Mat num = (2 * mu_a.mul(mu_b) + c1).mul(2 * ab + c2);
  cv::Mat den = (mu_a.mul(mu_a) + mu_b.mul(mu_b) + c1).mul(aa + bb + c2);
  cv::Mat map;
  cv::divide(num, den, map);
  return cv::mean(map, hole > 0)[0];
}

}  // namespace framemill
