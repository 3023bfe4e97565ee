// Decodes real photos into the raw file that bench/gpu_bench reads with --data, so
// that the bench itself needs no image codecs (it travels to GPU machines that have
// only the NVIDIA driver). Not a CMake target: scripts/bundle-gpu.sh compiles it with
//   g++ -std=c++20 bench/gpu_bench_data.cc $(pkg-config --cflags opencv4)
//       -lopencv_imgcodecs -lopencv_core
// (one command line) and runs it on the build machine.
//
// Usage: gpu_bench_data --out=FILE [--src=DIR] [--max_mb=N]
// The photos are Debian's opencv-doc samples (/usr/share/doc/opencv-doc/examples/data):
// the colour photographs among them, in a fixed order, as long as the raw total stays
// under --max_mb (default 24).
//
// File format (little-endian): "FMGBRAW1" (8 bytes), uint32 count, then per image
// uint32 rows, uint32 cols, rows*cols*3 bytes of packed BGR.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

namespace {

// Colour photographs (not logos, renders, charts or grey chessboards), largest first.
const char* const kPhotos[] = {
    "aloeL.jpg",        "ela_original.jpg", "building.jpg",   "graf1.png",      "leuvenA.jpg",
    "pca_test1.jpg",    "left.jpg",         "licenseplate_motion.jpg",          "stuff.jpg",
    "board.jpg",        "aero1.jpg",        "rubberwhale1.png", "squirrel_cls.jpg", "messi5.jpg",
    "apple.jpg",        "baboon.jpg",       "orange.jpg",     "fruits.jpg",     "home.jpg",
    "butterfly.jpg",    "smarties.png",     "HappyFish.jpg",  "aloeR.jpg",      "leuvenB.jpg",
    "ela_modified.jpg", "right.jpg",        "aero3.jpg",      "graf3.png",
};

bool Flag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

void Put32(std::FILE* f, uint32_t v) {
  const uint8_t b[4] = {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8),
                        static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 24)};
  std::fwrite(b, 1, 4, f);
}

}  // namespace

int main(int argc, char** argv) {
  std::string out, src = "/usr/share/doc/opencv-doc/examples/data", max_mb = "24";
  for (int i = 1; i < argc; ++i) {
    if (!Flag(argv[i], "--out", &out) && !Flag(argv[i], "--src", &src) && !Flag(argv[i], "--max_mb", &max_mb)) {
      std::fprintf(stderr, "usage: %s --out=FILE [--src=DIR] [--max_mb=N]\n", argv[0]);
      return 2;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "usage: %s --out=FILE [--src=DIR] [--max_mb=N]\n", argv[0]);
    return 2;
  }
  const double limit = std::stod(max_mb) * 1e6;
  std::vector<cv::Mat> photos;
  std::vector<std::string> names;
  double total = 0;
  for (const char* name : kPhotos) {
    cv::Mat m = cv::imread(src + "/" + name, cv::IMREAD_COLOR);
    if (m.empty()) continue;
    const double bytes = static_cast<double>(m.total()) * 3;
    if (total + bytes > limit) continue;
    total += bytes;
    photos.push_back(m);
    names.push_back(name);
  }
  if (photos.empty()) {
    std::fprintf(stderr, "gpu_bench_data: no photos decoded from %s\n", src.c_str());
    return 1;
  }
  std::FILE* f = std::fopen(out.c_str(), "wb");
  if (f == nullptr) {
    std::perror(out.c_str());
    return 1;
  }
  std::fwrite("FMGBRAW1", 1, 8, f);
  Put32(f, static_cast<uint32_t>(photos.size()));
  for (const cv::Mat& m : photos) {
    Put32(f, static_cast<uint32_t>(m.rows));
    Put32(f, static_cast<uint32_t>(m.cols));
    for (int y = 0; y < m.rows; ++y) std::fwrite(m.ptr<uint8_t>(y), 1, static_cast<size_t>(m.cols) * 3, f);
  }
  if (std::fclose(f) != 0) {
    std::perror(out.c_str());
    return 1;
  }
  std::printf("gpu_bench_data: %zu photos, %.1f MB raw BGR -> %s\n", photos.size(), total / 1e6, out.c_str());
  for (size_t i = 0; i < photos.size(); ++i)
    std::printf("  %-24s %4dx%-4d\n", names[i].c_str(), photos[i].cols, photos[i].rows);
  return 0;
}
