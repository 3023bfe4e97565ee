// Inpainting benchmark, after leveldb's benchmarks/db_bench.cc: prints its setup, then
// one line per (workload, variant). It measures only; nothing is asserted.
//
//   inpaint_bench [--benchmarks=quality,speed,figures] [--images=10] [--max-side=512]
//                 [--photo-dir=DIR] [--methods=telea,telea_coarse,ns,exemplar,fsr_fast,shiftmap]
//                 [--out=docs/inpaint] [--check]
//
// --check: exit 1 when the quality table's `auto` row is under Telea at any hole size, or
// a method failed (the ctest inpaint_bench.quality_table runs it small).
// --photo-dir: the first --images photos of DIR (sorted by name), at their own size, instead
// of opencv-doc's scaled to --max-side (e.g. 1-2.5 MP photos from gen-photos.py: the sizes
// where auto reduces a wide hole).
//
// Workloads (default: quality, speed):
//   quality  synthetic holes cut in real photos (opencv-doc: the first --images of aero1,
//            aloeL, baboon, building, butterfly, fruits, home, leuvenA, messi5, orange,
//            each scaled to --max-side), three shapes (blob, strokes, box) at three sizes
//            (1%, 5%, 15% of the area), the same holes for every method; PSNR (dB) and SSIM
//            inside the hole against the original, per method and size (mean over photos
//            and shapes), per shape, and for `auto` (ChooseInpaintMethod); each against
//            Telea, the baseline. Also ms per image.
//   speed    ms per megapixel of each method at each hole size (blob) on one photo scaled to
//            1 MP, on the CPU; the exemplar fill also with its patch search on a CUDA device
//            when one is present.
//   figures  before-and-after pictures (hole in red, Telea, the exemplar fill, auto) of three
//            photos, 240 px high, into --out (scripts/inpaint-figures.sh).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "analysis/inpaint_fill.h"
#include "bench/bench_support.h"
#include "gpu/compute_backend.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

const char* kPhotos[] = {"aero1.jpg", "aloeL.jpg",    "baboon.jpg",  "building.jpg", "butterfly.jpg",
                         "fruits.jpg", "home.jpg",     "leuvenA.jpg", "messi5.jpg",   "orange.jpg"};
const double kSizes[] = {0.01, 0.05, 0.15};
const char* kShapes[] = {"blob", "strokes", "box"};

struct Flags {
  std::string benchmarks = "quality,speed";
  int images = 10;
  int max_side = 512;
  std::string methods = "telea,telea_coarse,ns,exemplar,fsr_fast,shiftmap";
  std::string photo_dir;
  std::string pyramid_iterations;  // more rows: the pyramid fill at these Jacobi steps a level
  std::string out = "docs/inpaint";
  bool check = false;
};

cv::Mat LoadPhoto(const std::string& name, int max_side) {
  cv::Mat m = cv::imread(testing::SampleData(name), cv::IMREAD_COLOR);
  if (m.empty()) return m;
  const double s = double(max_side) / std::max(m.cols, m.rows);
  if (s < 1) cv::resize(m, m, cv::Size(), s, s, cv::INTER_AREA);
  return m;
}

double Coverage(const cv::Mat& hole) { return double(cv::countNonZero(hole)) / double(hole.total()); }

// A hole of about `fraction` of the image: overlapping discs along a random walk (blob),
// random thick polylines (strokes) or one rectangle (box). Deterministic in `seed`.
cv::Mat MakeHole(cv::Size size, const std::string& shape, double fraction, uint64_t seed) {
  cv::RNG rng(seed);
  cv::Mat hole = cv::Mat::zeros(size, CV_8U);
  const double area = fraction * size.area();
  if (shape == "box") {
    const double aspect = rng.uniform(0.6, 1.6);
    const int w = std::min(size.width - 2, int(std::sqrt(area * aspect)));
    const int h = std::min(size.height - 2, int(area / std::max(w, 1)));
    const int x = rng.uniform(1, std::max(2, size.width - w - 1));
    const int y = rng.uniform(1, std::max(2, size.height - h - 1));
    cv::rectangle(hole, cv::Rect(x, y, w, h), 255, cv::FILLED);
  } else if (shape == "blob") {
    const int r = std::max(3, int(std::sqrt(area / (CV_PI * 3))));
    cv::Point p(rng.uniform(size.width / 4, 3 * size.width / 4), rng.uniform(size.height / 4, 3 * size.height / 4));
    while (Coverage(hole) < fraction) {
      cv::circle(hole, p, r, 255, cv::FILLED);
      p.x = std::clamp(p.x + rng.uniform(-r, r + 1), r, size.width - r);
      p.y = std::clamp(p.y + rng.uniform(-r, r + 1), r, size.height - r);
    }
  } else {  // strokes, as free-form masks are drawn
    const int thick = std::max(4, std::min(size.width, size.height) / 28);
    cv::Point p(rng.uniform(0, size.width), rng.uniform(0, size.height));
    while (Coverage(hole) < fraction) {
      const double angle = rng.uniform(0.0, 2 * CV_PI);
      const int len = rng.uniform(size.width / 10, size.width / 4);
      cv::Point q(std::clamp(int(p.x + len * std::cos(angle)), 0, size.width - 1),
                  std::clamp(int(p.y + len * std::sin(angle)), 0, size.height - 1));
      cv::line(hole, p, q, 255, thick);
      p = q;
      if (rng.uniform(0, 4) == 0) p = cv::Point(rng.uniform(0, size.width), rng.uniform(0, size.height));
    }
  }
  return hole;
}

std::vector<InpaintMethod> Methods(const std::string& csv) {
  std::vector<InpaintMethod> out;
  for (InpaintMethod m : AllInpaintMethods())
    if (bench::Listed(csv, std::string(InpaintMethodName(m)))) out.push_back(m);
  return out;
}

struct Score {
  double psnr = 0, ssim = 0, ms = 0;
  int n = 0;
  void Add(double p, double s, double t) { psnr += p, ssim += s, ms += t, ++n; }
  double Psnr() const { return n ? psnr / n : 0; }
  double Ssim() const { return n ? ssim / n : 0; }
  double Ms() const { return n ? ms / n : 0; }
};

// Returns false when --check finds the default under Telea by more than 0.5 dB, or a failure.
bool Quality(const Flags& f) {
  const std::vector<InpaintMethod> methods = Methods(f.methods);
  std::vector<std::pair<std::string, cv::Mat>> photos;
  std::vector<std::string> names(std::begin(kPhotos), std::end(kPhotos));
  if (!f.photo_dir.empty()) {
    names.clear();
    for (const auto& e : std::filesystem::directory_iterator(f.photo_dir)) names.push_back(e.path().string());
    std::sort(names.begin(), names.end());
  }
  double pixels = 0;
  for (const std::string& name : names) {
    if (int(photos.size()) >= f.images) break;
    cv::Mat m = f.photo_dir.empty() ? LoadPhoto(name, f.max_side) : cv::imread(name, cv::IMREAD_COLOR);
    if (m.empty()) continue;
    photos.emplace_back(std::filesystem::path(name).filename().string(), m);
    pixels += double(m.total());
  }
  std::printf("quality: %zu photos (%s, %.2f MP on average), shapes blob/strokes/box, sizes 1/5/15%%\n",
              photos.size(), f.photo_dir.empty() ? ("opencv-doc, at most " + std::to_string(f.max_side) + " px").c_str()
                                                 : f.photo_dir.c_str(),
              photos.empty() ? 0.0 : pixels / double(photos.size()) / 1e6);
  // [method name][size] and [method name][shape]
  std::map<std::string, std::map<double, Score>> by_size;
  std::map<std::string, std::map<std::string, std::map<double, Score>>> by_shape;
  uint64_t seed = 1;
  bool ok = true;
  for (const auto& [name, photo] : photos)
    for (const char* shape : kShapes)
      for (double size : kSizes) {
        const cv::Mat hole = MakeHole(photo.size(), shape, size, seed++);
        std::map<std::string, std::pair<double, double>> got;
        for (InpaintMethod m : methods) {
          const double t0 = bench::NowMs();
          auto filled = Inpaint(photo, hole, m);
          const double ms = bench::NowMs() - t0;
          if (!filled.ok()) {
            ok = false;
            std::printf("  %s %s %.0f%% %s: %s\n", name.c_str(), shape, size * 100,
                        std::string(InpaintMethodName(m)).c_str(), filled.status().ToString().c_str());
            continue;
          }
          const double p = HolePsnr(photo, *filled, hole), s = HoleSsim(photo, *filled, hole);
          const std::string mn(InpaintMethodName(m));
          got[mn] = {p, s};
          by_size[mn][size].Add(p, s, ms);
          by_shape[mn][shape][size].Add(p, s, ms);
        }
        std::stringstream steps_csv(f.pyramid_iterations);
        for (std::string n; std::getline(steps_csv, n, ',');) {
          const int steps = std::atoi(n.c_str());
          const InpaintDevice twin{.fill = [steps](const gpu::HoleFillTask& t, gpu::HoleFillSpec spec) {
            spec.iterations = steps;
            return Result<cv::Mat>(gpu::HoleFillCpu(t, spec));
          }};
          const double t0 = bench::NowMs();
          auto filled = Inpaint(photo, hole, InpaintMethod::kPyramid, {}, twin);
          const double ms = bench::NowMs() - t0;
          if (!filled.ok()) continue;
          const std::string mn = "pyramid@" + n;
          by_size[mn][size].Add(HolePsnr(photo, *filled, hole), HoleSsim(photo, *filled, hole), ms);
          by_shape[mn][shape][size].Add(HolePsnr(photo, *filled, hole), HoleSsim(photo, *filled, hole), ms);
        }
        const std::string pick(InpaintMethodName(ChooseInpaintMethod(MeasureHole(hole))));
        if (got.count(pick)) {
          by_size["auto"][size].Add(got[pick].first, got[pick].second, 0);
          by_shape["auto"][shape][size].Add(got[pick].first, got[pick].second, 0);
        }
      }
  auto row = [&](const std::string& label, const std::map<double, Score>& s,
                 const std::map<double, Score>* base) {
    std::printf("  %-22s", label.c_str());
    for (double size : kSizes) {
      auto it = s.find(size);
      if (it == s.end()) {
        std::printf(" %26s", "-");
        continue;
      }
      const double dp = base && base->count(size) ? it->second.Psnr() - base->at(size).Psnr() : 0;
      std::printf("  %6.2f dB (%+5.2f) %5.3f", it->second.Psnr(), dp, it->second.Ssim());
    }
    double ms = 0;
    for (const auto& [k, v] : s) ms += v.Ms();
    if (ms > 0) std::printf("  %8.0f ms", ms / s.size());
    std::printf("\n");
  };
  const std::map<double, Score>* telea = by_size.count("telea") ? &by_size["telea"] : nullptr;
  std::printf("quality: PSNR in the hole (vs telea) and SSIM in the hole, mean over photos and shapes\n");
  std::printf("  %-22s  %-26s  %-26s  %-26s  %s\n", "method", "1%", "5%", "15%", "ms/image");
  for (const auto& [mn, s] : by_size) row(mn, s, telea);
  std::printf("quality: by shape\n");
  for (const char* shape : kShapes)
    for (const auto& [mn, shapes] : by_shape) {
      auto it = shapes.find(shape);
      if (it == shapes.end()) continue;
      const std::map<double, Score>* base =
          by_shape.count("telea") && by_shape["telea"].count(shape) ? &by_shape["telea"][shape] : nullptr;
      row(std::string(shape) + " " + mn, it->second, base);
    }
  if (telea != nullptr && by_size.count("auto"))
    for (double size : kSizes) {
      const auto& a = by_size["auto"];
      if (a.count(size) == 0 || a.at(size).n != telea->at(size).n) {
        std::printf("check: auto has no complete result at %.0f%% (is its method in --methods?)\n", size * 100);
        ok = false;
      } else if (a.at(size).Psnr() < telea->at(size).Psnr()) {
        std::printf("check: auto is %.2f dB under telea at %.0f%%\n", telea->at(size).Psnr() - a.at(size).Psnr(),
                    size * 100);
        ok = false;
      }
    }
  return ok;
}

void Speed(const Flags& f) {
  cv::Mat photo = cv::imread(testing::SampleData("building.jpg"), cv::IMREAD_COLOR);
  const double s = std::sqrt(1e6 / double(photo.total()));
  cv::resize(photo, photo, cv::Size(), s, s, s < 1 ? cv::INTER_AREA : cv::INTER_CUBIC);
  const double mp = photo.total() / 1e6;
  std::printf("speed: building.jpg at %dx%d (%.2f MP), blob holes, one run each\n", photo.cols,
              photo.rows, mp);
  std::unique_ptr<gpu::ComputeBackend> cuda;
  std::string why;
  if (!gpu::CudaDevices(&why).empty()) {
    auto b = gpu::MakeCudaBackend(0);
    if (b.ok()) cuda = std::move(*b);
  }
  for (double size : kSizes) {
    const cv::Mat hole = MakeHole(photo.size(), "blob", size, 7);
    for (InpaintMethod m : Methods(f.methods)) {
      const double t0 = bench::NowMs();
      auto r = Inpaint(photo, hole, m);
      const double ms = bench::NowMs() - t0;
      std::printf("  %-10s cpu      %3.0f%%  %9.0f ms/MP%s\n", std::string(InpaintMethodName(m)).c_str(),
                  size * 100, ms / mp, r.ok() ? "" : "  (failed)");
    }
    if (cuda && bench::Listed(f.methods, "exemplar")) {
      PatchSearchFn search = [&](const gpu::PatchMatchTask& t, const gpu::PatchMatchSpec& spec)
          -> Result<gpu::PatchMatchResult> {
        auto r = cuda->PatchMatchBatch({t}, spec);
        if (!r.ok()) return r.status();
        return std::move(r->front());
      };
      const double t0 = bench::NowMs();
      auto r = Inpaint(photo, hole, InpaintMethod::kExemplar, {}, {.search = search});
      const double ms = bench::NowMs() - t0;
      std::printf("  %-10s %-8s %3.0f%%  %9.0f ms/MP%s\n", "exemplar", cuda->device().c_str(), size * 100,
                  ms / mp, r.ok() ? "" : "  (failed)");
    }
  }
  if (!cuda) std::printf("  (no CUDA device: %s)\n", why.c_str());
}

// Side by side: the photo with the hole in red, then each fill; 240 px high.
void Figures(const Flags& f) {
  std::filesystem::create_directories(f.out);
  const char* names[] = {"building.jpg", "fruits.jpg", "messi5.jpg"};
  const char* shapes[] = {"box", "blob", "strokes"};
  for (int i = 0; i < 3; ++i) {
    cv::Mat photo = LoadPhoto(names[i], 360);
    const cv::Mat hole = MakeHole(photo.size(), shapes[i], 0.05, 100 + i);
    cv::Mat shown = photo.clone();
    shown.setTo(cv::Scalar(0, 0, 255), hole);
    std::vector<cv::Mat> panels = {shown};
    for (InpaintMethod m : {InpaintMethod::kTelea, InpaintMethod::kExemplar}) {
      auto r = Inpaint(photo, hole, m);
      if (r.ok()) panels.push_back(*r);
    }
    cv::Mat row;
    cv::hconcat(panels, row);
    const double s = 240.0 / row.rows;
    cv::resize(row, row, cv::Size(), s, s, cv::INTER_AREA);
    const std::string path = f.out + "/" + std::filesystem::path(names[i]).stem().string() + "-" + shapes[i] + ".png";
    cv::imwrite(path, row);
    std::printf("figures: %s (hole, telea, exemplar)\n", path.c_str());
  }
}

int Main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* key) -> const char* {
      const std::string k = std::string("--") + key + "=";
      return a.rfind(k, 0) == 0 ? argv[i] + k.size() : nullptr;
    };
    if (const char* v = value("benchmarks")) f.benchmarks = v;
    else if (const char* v = value("images")) f.images = std::atoi(v);
    else if (const char* v = value("max-side")) f.max_side = std::atoi(v);
    else if (const char* v = value("methods")) f.methods = v;
    else if (const char* v = value("photo-dir")) f.photo_dir = v;
    else if (const char* v = value("pyramid-iterations")) f.pyramid_iterations = v;
    else if (const char* v = value("out")) f.out = v;
    else if (a == "--check") f.check = true;
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  std::printf("inpaint_bench: benchmarks=%s methods=%s\n", f.benchmarks.c_str(), f.methods.c_str());
  if (bench::Listed(f.benchmarks, "quality") && !Quality(f) && f.check) {
    std::printf("check: FAILED\n");
    return 1;
  }
  if (bench::Listed(f.benchmarks, "speed")) Speed(f);
  if (f.benchmarks.find("figures") != std::string::npos) Figures(f);
  return 0;
}

}  // namespace
}  // namespace framemill

int main(int argc, char** argv) { return framemill::Main(argc, argv); }
