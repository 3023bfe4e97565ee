// Lighting benchmark, after leveldb's db_bench: prints its setup, then one line per
// (workload, variant). It measures only; nothing is asserted.
//
//   lighting_bench [--benchmarks=tolerance,cost] [--reps=3] [--photos=DIR]
//
// Workloads (default: both):
//   tolerance  how far each way of reading a JPEG moves the lighting statistics from those
//              of the whole image at full resolution, over real photos: opencv-doc's colour
//              photos, python3-skimage's and imageio's, visp-images-data's Solvay group,
//              Klimt painting and 1920x1080 scenes (PNGs are written as JPEG, quality 92,
//              as a camera would). Per variant: the largest and the 95th-percentile error
//              of each statistic
//   cost       decode + analysis on one thread, ms per photo, per variant, over the same
//              photos and over --photos (the peers' set: ../shared/peers/make_photo_set.py)
//
// Variants: `full` decodes every pixel and area-averages to the 512 px working image (the
// stage before issue 28); `dct>=N` lets libjpeg scale while decoding (1/2, 1/4, 1/8) as far
// as the longest side stays at least N px, then averages what is still over 512 px.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "analysis/lighting_analysis.h"
#include "bench/bench_support.h"
#include "gpu/ops.h"
#include "media/image.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

namespace fs = std::filesystem;

struct Flags {
  std::string benchmarks = "tolerance,cost";
  std::string photos;  // a folder of JPEGs for `cost` (the peers' photo set)
  int reps = 3;
};

struct Variant {
  std::string name;
  int min_long_side;  // 0: full decode
};

const std::vector<Variant> kVariants = {
    {"full", 0}, {"dct>=512", 512}, {"dct>=256", 256}, {"dct>=128", 128}};

// The photos: every real colour photo the Debian packages ship, as JPEG files in `dir`.
std::vector<std::string> RealPhotos(const std::string& dir) {
  std::vector<std::string> sources;
  for (const auto& e : fs::directory_iterator(fs::path(testing::SampleData("apple.jpg")).parent_path())) {
    const std::string ext = e.path().extension().string();
    if (ext == ".jpg" || ext == ".png") sources.push_back(e.path().string());
  }
  const std::string skimage = "/usr/lib/python3/dist-packages/skimage/data/";
  for (const char* n : {"astronaut.png", "chelsea.png", "coffee.png", "motorcycle_left.png",
                        "hubble_deep_field.jpg", "rocket.jpg", "retina.jpg", "color.png"})
    sources.push_back(skimage + n);
  const std::string visp = "/usr/share/visp-images-data/ViSP-images/";
  for (const char* sub : {"Solvay", "Klimt", "AprilTag/benchmark/1920x1080"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(visp + sub, ec)) sources.push_back(e.path().string());
  }
  std::sort(sources.begin(), sources.end());
  std::vector<std::string> out;
  for (const std::string& src : sources) {
    cv::Mat img = cv::imread(src, cv::IMREAD_UNCHANGED);
    // Colour photos of a useful size: drawings, masks and grey test patterns are not what
    // a curator's lighting statistics are about.
    if (img.empty() || img.channels() < 3 || std::min(img.cols, img.rows) < 200) continue;
    if (img.channels() == 4) cv::cvtColor(img, img, cv::COLOR_BGRA2BGR);
    if (img.depth() != CV_8U) continue;
    const std::string dst = dir + "/" + std::to_string(out.size()) + "-" + fs::path(src).stem().string() + ".jpg";
    if (fs::path(src).extension() == ".jpg") fs::copy_file(src, dst);
    else cv::imwrite(dst, img, {cv::IMWRITE_JPEG_QUALITY, 92});
    out.push_back(dst);
  }
  return out;
}

// The statistics the stage reports, from the image as `variant` reads it.
bool Analyse(const std::string& path, int min_long_side, lighting::LightingStats* out) {
  auto img = DecodeImageFileScaled(path, ImageLimits{}, min_long_side);
  if (!img.ok()) return false;
  const cv::Mat working = lighting::WorkingImage(img->image);
  *out = lighting::FromLumaStats(gpu::LumaStatsCpu(working), working, img->source.width,
                                 img->source.height);
  return true;
}

// The reference: every pixel of the full-resolution image.
lighting::LightingStats FullResolution(const std::string& path) {
  const cv::Mat img = *DecodeImageFile(path, ImageLimits{});
  return lighting::FromLumaStats(gpu::LumaStatsCpu(img), lighting::WorkingImage(img), img.cols, img.rows);
}

struct Error {
  const char* name;
  const char* unit;
  double (*of)(const lighting::LightingStats& a, const lighting::LightingStats& b);
};

double AngleDiff(double a, double b) {
  const double d = std::fmod(std::abs(a - b), 360.0);
  return std::min(d, 360.0 - d);
}

const std::vector<Error> kErrors = {
    {"percentiles", "luminance", [](const auto& a, const auto& b) {
       return std::max({std::abs(a.p01 - b.p01), std::abs(a.p05 - b.p05), std::abs(a.p50 - b.p50),
                        std::abs(a.p95 - b.p95), std::abs(a.p99 - b.p99)});
     }},
    {"mean", "luminance", [](const auto& a, const auto& b) { return std::abs(a.mean_luminance - b.mean_luminance); }},
    {"exposure_ev", "stops", [](const auto& a, const auto& b) { return std::abs(a.exposure_ev - b.exposure_ev); }},
    {"rms_contrast", "luminance", [](const auto& a, const auto& b) { return std::abs(a.rms_contrast - b.rms_contrast); }},
    {"dynamic_range", "stops", [](const auto& a, const auto& b) {
       return std::abs(a.dynamic_range_stops - b.dynamic_range_stops);
     }},
    {"cct", "K", [](const auto& a, const auto& b) { return std::abs(a.cct_kelvin - b.cct_kelvin); }},
    {"clipped", "fraction", [](const auto& a, const auto& b) {
       return std::max(std::abs(a.clipped_shadows - b.clipped_shadows),
                       std::abs(a.clipped_highlights - b.clipped_highlights));
     }},
    {"direction", "degrees", [](const auto& a, const auto& b) {
       // Only where the reference has a direction worth naming.
       return b.light_direction_strength > 0.2 ? AngleDiff(a.light_direction_deg, b.light_direction_deg) : 0.0;
     }},
};

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// Each variant's errors against `truth`, one line.
void PrintErrors(const char* against, const Variant& v, const std::vector<std::string>& photos,
                 const std::vector<lighting::LightingStats>& truth) {
  std::vector<std::vector<double>> errors(kErrors.size());
  for (size_t i = 0; i < photos.size(); ++i) {
    lighting::LightingStats s;
    if (!Analyse(photos[i], v.min_long_side, &s)) continue;
    for (size_t k = 0; k < kErrors.size(); ++k) errors[k].push_back(kErrors[k].of(s, truth[i]));
  }
  std::printf("tolerance vs %-11s %-9s", against, v.name.c_str());
  for (size_t k = 0; k < kErrors.size(); ++k)
    std::printf("  %s max %.3g p95 %.3g", kErrors[k].name, Quantile(errors[k], 1.0), Quantile(errors[k], 0.95));
  std::printf("\n");
}

// Against two references: the stage's result before issue 28 (`full`: its working image
// of at most 512 px from a full decode), and every pixel of the image.
void Tolerance(const std::vector<std::string>& photos) {
  std::vector<lighting::LightingStats> before(photos.size()), every_pixel;
  for (size_t i = 0; i < photos.size(); ++i) Analyse(photos[i], 0, &before[i]);
  for (const std::string& p : photos) every_pixel.push_back(FullResolution(p));
  for (const Variant& v : kVariants)
    if (v.min_long_side > 0) PrintErrors("full", v, photos, before);
  for (const Variant& v : kVariants) PrintErrors("every-pixel", v, photos, every_pixel);
  std::printf("tolerance units: percentiles, mean and rms_contrast in linear luminance (0-1); exposure_ev "
              "and dynamic_range in stops; cct in kelvin; clipped as a fraction of the pixels; direction "
              "in degrees where the reference's strength > 0.2\n");
}

void Cost(const Flags& flags, const std::string& label, const std::vector<std::string>& photos) {
  for (const Variant& v : kVariants) {
    const double ms = bench::MedianMs(flags.reps, [&] {
      lighting::LightingStats s;
      for (const std::string& p : photos) Analyse(p, v.min_long_side, &s);
    });
    std::printf("cost %-8s %-9s %zu photos: %.3f ms per photo (decode + analysis, one thread)\n",
                label.c_str(), v.name.c_str(), photos.size(), ms / static_cast<double>(photos.size()));
  }
}

int Main(int argc, char** argv) {
  Flags flags;
  if (!bench::ParseFlags("lighting_bench", argc, argv,
                         {{"--benchmarks=", &flags.benchmarks}, {"--photos=", &flags.photos},
                          {"--reps=", &flags.reps, 1}}))
    return 2;
  cv::setNumThreads(1);
  testing::TempDir tmp;
  const std::vector<std::string> photos = RealPhotos(tmp.path());
  std::vector<int> sides;
  for (const std::string& p : photos) {
    const cv::Mat m = cv::imread(p);
    sides.push_back(std::max(m.cols, m.rows));
  }
  std::sort(sides.begin(), sides.end());
  std::printf("lighting_bench: %zu real colour photos as JPEG, longest side %d to %d px (median %d); "
              "OpenCV threads 1\n",
              photos.size(), sides.front(), sides.back(), sides[sides.size() / 2]);
  std::printf("reps:           median of %d (cost)\n", flags.reps);
  std::printf("------------------------------------------------------------------\n");
  if (bench::Listed(flags.benchmarks, "tolerance")) Tolerance(photos);
  if (bench::Listed(flags.benchmarks, "cost")) {
    Cost(flags, "real", photos);
    if (!flags.photos.empty()) {
      std::vector<std::string> set;
      for (const auto& e : fs::directory_iterator(flags.photos))
        if (e.path().extension() == ".jpg") set.push_back(e.path().string());
      std::sort(set.begin(), set.end());
      Cost(flags, "photos", set);
    }
  }
  return 0;
}

}  // namespace
}  // namespace framemill

int main(int argc, char** argv) { return framemill::Main(argc, argv); }
