// gpu_bench: throughput of the compute backends (gpu/compute_backend.h), CPU against
// CUDA, after leveldb's db_bench: a plain executable with named workloads that prints
// its setup first. It links gpu/ only (no image codecs), so it travels to a GPU machine
// with just the NVIDIA driver (scripts/bundle-gpu.sh).
//
//   gpu_bench [--benchmarks=luma_stats,preprocess_fp32,preprocess_fp16,tuner_vs_sweep]
//             [--data=FILE] [--min_time=S] [--cpu_batches=1,8,32,128]
//             [--gpu_batches=1,8,32,128,512] [--sweep_max=512] [--device=N] [--frames=N]
//             [--models=DIR] [--engine_batches=1,2,4,8,16,32,64] [--engine_cpu=0|1]
//             [--ladder_limit_mb=N]
//             (workloads: the four above, engine, flow, patch_match, hole_fill, ladder_real_oom)
//
// Inputs: --data=FILE is a raw file of real photos written by bench/gpu_bench_data.cc
// (Debian's opencv-doc sample photos, decoded); without it, photo-sized synthetic
// images are generated. Two input sets: "photos" (the photos as they are, mixed sizes)
// and "frames_1080p" (1920x1080 frames cut and scaled from them). Batches cycle over
// a set's images.
//
// luma_stats / preprocess_fp32 / preprocess_fp16: images/s per batch size, CPU backend
// (MakeCpuBackend: TBB over the batch for LumaStats; PreprocessCpu as it is) and CUDA.
// Each figure: one warm-up batch, then batches until --min_time seconds have passed.
// Preprocess: 224x224, ImageNet mean/std, BGR->RGB.
// tuner_vs_sweep: on frames_1080p, throughput at every batch size 1..--sweep_max
// (powers of two) against the size BatchTuner settles on when driven as the OOM ladder
// drives it (one timed batch per probe, bytes learned from LastBatchBytes()); goal:
// chosen >= 90% of the best.
// engine: our inference engine (engine/) on every converted model under --models
// (default: $FRAMEMILL_MODELS; directories holding model.fmg.json), on CUDA kernels in
// fp32 and fp16: images/s at each of --engine_batches (end to end: upload, all steps,
// download; a deterministic synthetic input), device bytes per item from the plan
// (Plan::BatchBytes() / batch, weights apart), the best batch of the sweep and the one
// BatchTuner settles on when fed the same timings. A fixed-batch graph runs the sweep when
// its plan takes a batch (the engine batches it, models/catalog.cc), else batch 1 only.
// Without a device (or with --engine_cpu=1) the CPU reference kernels give ms/image at
// batch 1 for comparison.
// flow: the motion stage's dense flow (pyramidal Lucas-Kanade, gpu/ops.h FlowSpec defaults)
// on pairs cut from frames_1080p and scaled to 320x180 (the stage's analysis size) and
// 1280x720: frame pairs/s on the CUDA kernels (batches of 8) and on their CPU twin, and
// the largest flow difference between the two.
// patch_match: exemplar inpainting's patch search on a photo with a hole, 640x480 and
// 1920x1080: ms per megapixel on the CUDA kernels and on the CPU twin, fields compared.
// hole_fill: the inpaint stage's fill on a device (gpu/ops.h HoleFill, default spec) on a
// 1 MP photo with a hole of 1, 5 and 15% (an ellipse, as a person's mask): ms a photo on
// CUDA (the hole's box grown by 8 px, as the stage hands it over) and on its CPU twin, and
// whether the two fills are equal.
// ladder_real_oom (not in the default set): the OOM ladder against device memory that
// another process really holds (run.sh's hog), the limit set above what is free
// (--ladder_limit_mb, default the device's total): real allocation failures, halvings,
// a CPU fallback for an item that cannot fit alone, results compared with the CPU's.
// Without a CUDA device it says so, prints the CPU figures, and runs tuner_vs_sweep on
// the CPU backend (sweep capped at 64) to exercise the tuner.
#include <tbb/info.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "base/clock.h"
#include "gpu/batch_tuner.h"
#include "gpu/compute_backend.h"
#include "engine/reference/cpu_kernels.h"
#include "engine/cuda/cuda_kernels_factory.h"
#include "engine/engine.h"
#include "gpu/oom_ladder.h"
#include "gpu/ops.h"

namespace fg = framemill::gpu;
using framemill::Status;

namespace {

enum class Op { kLuma, kPreFp32, kPreFp16 };

const char* OpName(Op op) {
  switch (op) {
    case Op::kLuma: return "luma_stats";
    case Op::kPreFp32: return "preprocess_fp32";
    case Op::kPreFp16: return "preprocess_fp16";
  }
  return "?";
}

fg::PreprocessSpec Spec(Op op) {
  fg::PreprocessSpec s;
  s.width = 224;
  s.height = 224;
  s.to_rgb = true;
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdv[3] = {0.229f, 0.224f, 0.225f};
  for (int c = 0; c < 3; ++c) {
    s.mean[c] = mean[c];
    s.std[c] = stdv[c];
  }
  s.type = op == Op::kPreFp16 ? fg::TensorType::kFloat16 : fg::TensorType::kFloat32;
  return s;
}

struct Options {
  std::set<std::string> benchmarks = {"luma_stats", "preprocess_fp32", "preprocess_fp16", "tuner_vs_sweep",
                                      "engine", "flow", "patch_match", "hole_fill"};
  std::string data;
  double min_time = 1.0;
  std::vector<int> cpu_batches = {1, 8, 32, 128};
  std::vector<int> gpu_batches = {1, 8, 32, 128, 512};
  int sweep_max = 0;  // 0: 512 with a device, 64 without
  int device = 0;
  int frames = 16;
  std::string models;  // --models (run.sh passes the bundled models)
  std::vector<int> engine_batches = {1, 2, 4, 8, 16, 32, 64};
  bool engine_cpu = false;
  int64_t ladder_limit_mb = 0;  // ladder_real_oom; 0: the device's total
};

struct InputSet {
  std::string name, description;
  std::vector<cv::Mat> images;
  double mean_bytes = 0;
  int64_t mean_pixels = 0;
};

std::vector<cv::Mat> Batch(const InputSet& set, int n, size_t* cursor) {
  std::vector<cv::Mat> b;
  b.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) b.push_back(set.images[(*cursor)++ % set.images.size()]);
  return b;
}

Status RunOp(fg::ComputeBackend& b, Op op, const std::vector<cv::Mat>& batch) {
  if (op == Op::kLuma) return b.LumaStatsBatch(batch).status();
  return b.PreprocessBatch(batch, Spec(op)).status();
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Measure {
  Status status;
  double images_per_s = 0, ms_per_batch = 0, mb_per_s = 0;
  int batches = 0;
};

Measure Time(fg::ComputeBackend& b, Op op, const InputSet& set, int batch, double min_time) {
  Measure m;
  size_t cursor = 0;
  m.status = RunOp(b, op, Batch(set, batch, &cursor));  // warm-up: pools, caches
  if (!m.status.ok()) return m;
  const double t0 = Now();
  double t = t0;
  int64_t images = 0;
  double bytes = 0;
  do {
    std::vector<cv::Mat> in = Batch(set, batch, &cursor);
    m.status = RunOp(b, op, in);
    if (!m.status.ok()) return m;
    for (const cv::Mat& x : in) bytes += static_cast<double>(x.total()) * 3;
    images += batch;
    ++m.batches;
    t = Now();
  } while (t - t0 < min_time);
  m.images_per_s = static_cast<double>(images) / (t - t0);
  m.ms_per_batch = 1e3 * (t - t0) / m.batches;
  m.mb_per_s = bytes / 1e6 / (t - t0);
  return m;
}

void PrintMeasure(Op op, const InputSet& set, const std::string& device, int batch, const Measure& m) {
  if (!m.status.ok()) {
    std::printf("%-16s %-13s %-7s batch %4d : %s\n", OpName(op), set.name.c_str(), device.c_str(), batch,
                m.status.ToString().c_str());
  } else {
    std::printf("%-16s %-13s %-7s batch %4d : %10.1f img/s %9.1f MB/s %10.2f ms/batch (%d batches)\n", OpName(op),
                set.name.c_str(), device.c_str(), batch, m.images_per_s, m.mb_per_s, m.ms_per_batch, m.batches);
  }
  std::fflush(stdout);
}

bool ParseFlag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<int> Ints(const std::string& s) {
  std::vector<int> out;
  for (const std::string& x : Split(s)) out.push_back(std::max(1, std::stoi(x)));
  return out;
}

uint32_t Get32(std::istream& in) {
  uint8_t b[4] = {0, 0, 0, 0};
  in.read(reinterpret_cast<char*>(b), 4);
  return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 | static_cast<uint32_t>(b[2]) << 16 |
         static_cast<uint32_t>(b[3]) << 24;
}

// The raw photo file of bench/gpu_bench_data.cc.
bool ReadData(const std::string& path, std::vector<cv::Mat>* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open " + path;
    return false;
  }
  char magic[8];
  in.read(magic, 8);
  if (!in || std::memcmp(magic, "FMGBRAW1", 8) != 0) {
    *error = path + ": not a gpu_bench_data file";
    return false;
  }
  const uint32_t count = Get32(in);
  if (!in || count == 0 || count > 100000) {
    *error = path + ": bad image count";
    return false;
  }
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t rows = Get32(in), cols = Get32(in);
    if (!in || rows == 0 || cols == 0 || rows > 30000 || cols > 30000) {
      *error = path + ": bad image header at image " + std::to_string(i);
      return false;
    }
    cv::Mat m(static_cast<int>(rows), static_cast<int>(cols), CV_8UC3);
    in.read(reinterpret_cast<char*>(m.data), static_cast<std::streamsize>(m.total() * 3));
    if (!in) {
      *error = path + ": truncated at image " + std::to_string(i);
      return false;
    }
    out->push_back(m);
  }
  return true;
}

// Photo-sized synthetic images: gradients, a wave, noise, a blown-out band, dark patches.
std::vector<cv::Mat> SyntheticPhotos() {
  const cv::Size sizes[] = {{1282, 1110}, {902, 770}, {868, 600}, {800, 640}, {751, 563}, {800, 600},
                            {612, 459},   {640, 480}, {584, 388}, {535, 426}, {512, 512}, {493, 356}};
  std::vector<cv::Mat> out;
  cv::RNG rng(2024);
  for (const cv::Size& s : sizes) {
    cv::Mat m(s, CV_8UC3);
    const double k = rng.uniform(0.4, 1.3);
    for (int y = 0; y < s.height; ++y) {
      auto* p = m.ptr<uint8_t>(y);
      for (int x = 0; x < s.width; ++x) {
        const double w = 30 * std::sin(x * 0.02) * std::cos(y * 0.015);
        p[3 * x + 0] = cv::saturate_cast<uint8_t>(k * (50 + 120.0 * x / s.width + w));
        p[3 * x + 1] = cv::saturate_cast<uint8_t>(k * (40 + 150.0 * y / s.height - w));
        p[3 * x + 2] = cv::saturate_cast<uint8_t>(k * (30 + 100.0 * (x + y) / (s.width + s.height) + w));
      }
    }
    cv::Mat noise(s, CV_8UC3);
    rng.fill(noise, cv::RNG::UNIFORM, 0, 10);
    m += noise;
    m(cv::Rect(0, 0, s.width, s.height / 10)).setTo(cv::Scalar(255, 255, 255));
    m(cv::Rect(s.width / 5, s.height / 2, s.width / 6, s.height / 6)).setTo(cv::Scalar(0, 0, 0));
    out.push_back(m);
  }
  return out;
}

InputSet MakeSet(std::string name, std::string description, std::vector<cv::Mat> images) {
  InputSet s;
  s.name = std::move(name);
  s.description = std::move(description);
  s.images = std::move(images);
  double bytes = 0;
  int64_t px = 0;
  for (const cv::Mat& m : s.images) {
    bytes += static_cast<double>(m.total()) * 3;
    px += static_cast<int64_t>(m.total());
  }
  s.mean_bytes = bytes / static_cast<double>(s.images.size());
  s.mean_pixels = px / static_cast<int64_t>(s.images.size());
  return s;
}

// 1920x1080 frames: a 16:9 centre crop of each photo, scaled (real content, video size).
std::vector<cv::Mat> Frames1080p(const std::vector<cv::Mat>& photos, int n) {
  std::vector<cv::Mat> out;
  for (int i = 0; i < n; ++i) {
    const cv::Mat& p = photos[static_cast<size_t>(i) % photos.size()];
    int w = p.cols, h = p.cols * 9 / 16;
    if (h > p.rows) {
      h = p.rows;
      w = p.rows * 16 / 9;
    }
    // Different crops of the same photo when there are fewer photos than frames.
    const int shift = (i / static_cast<int>(photos.size())) * 7;
    const int x0 = std::clamp((p.cols - w) / 2 + shift, 0, p.cols - w);
    const int y0 = std::clamp((p.rows - h) / 2 + shift, 0, p.rows - h);
    cv::Mat f;
    cv::resize(p(cv::Rect(x0, y0, w, h)), f, cv::Size(1920, 1080), 0, 0, cv::INTER_LINEAR);
    out.push_back(f);
  }
  return out;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      if (c != std::string::npos) return line.substr(c + 2);
    }
  }
  return "unknown";
}

std::string Date() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&t));
  return buf;
}

struct Best {
  double ips = 0;
  int batch = 0;
};

void RunThroughput(Op op, const std::vector<const InputSet*>& sets, fg::ComputeBackend& cpu,
                   fg::ComputeBackend* gpu, const Options& o,
                   std::vector<std::string>* summary) {
  for (const InputSet* set : sets) {
    Best best_cpu, best_gpu;
    for (int b : o.cpu_batches) {
      Measure m = Time(cpu, op, *set, b, o.min_time);
      PrintMeasure(op, *set, cpu.device(), b, m);
      if (m.status.ok() && m.images_per_s > best_cpu.ips) best_cpu = {m.images_per_s, b};
    }
    if (gpu != nullptr) {
      for (int b : o.gpu_batches) {
        Measure m = Time(*gpu, op, *set, b, o.min_time);
        PrintMeasure(op, *set, gpu->device(), b, m);
        if (m.status.ok() && m.images_per_s > best_gpu.ips) best_gpu = {m.images_per_s, b};
      }
    }
    char line[256];
    if (gpu != nullptr && best_gpu.batch > 0 && best_cpu.batch > 0) {
      std::snprintf(line, sizeof line, "%-16s %-13s cpu %9.1f img/s (batch %d)   %s %10.1f img/s (batch %d)   x%.1f",
                    OpName(op), set->name.c_str(), best_cpu.ips, best_cpu.batch, gpu->device().c_str(), best_gpu.ips,
                    best_gpu.batch, best_gpu.ips / best_cpu.ips);
    } else {
      std::snprintf(line, sizeof line, "%-16s %-13s cpu %9.1f img/s (batch %d)   no CUDA figures", OpName(op),
                    set->name.c_str(), best_cpu.ips, best_cpu.batch);
    }
    summary->push_back(line);
    std::printf("------------------------------------------------\n");
  }
}

void TunerVsSweep(Op op, const InputSet& set, fg::ComputeBackend& backend, const Options& o, int sweep_max,
                  std::vector<std::string>* summary) {
  std::printf("tuner_vs_sweep %s on %s, %s: sweep 1..%d\n", OpName(op), backend.device().c_str(), set.name.c_str(),
              sweep_max);
  std::map<int, double> sweep;
  for (int b = 1; b <= sweep_max; b *= 2) {
    Measure m = Time(backend, op, set, b, o.min_time);
    PrintMeasure(op, set, backend.device(), b, m);
    if (!m.status.ok()) break;  // out of memory: larger sizes will not fit either
    sweep[b] = m.images_per_s;
  }
  if (sweep.empty()) return;
  auto best = std::max_element(sweep.begin(), sweep.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });

  fg::TunerOptions topt;
  topt.max_batch = sweep_max;
  fg::BatchTuner tuner(topt, nullptr);
  const fg::TunerKey key{OpName(op), backend.device(), fg::SizeBucket(set.mean_pixels)};
  const int64_t guess = op == Op::kLuma ? fg::LumaStatsBytesPerItem(set.images[0])
                                        : fg::PreprocessBytesPerItem(set.images[0], Spec(op));
  auto budget = [&]() -> int64_t {
    auto info = backend.Info();
    return info.ok() ? info->free_bytes : 0;
  };
  std::string trace;
  size_t cursor = 0;
  for (int iter = 0; iter < 40; ++iter) {
    const int b = tuner.Next(key, budget(), guess);
    if (tuner.Settled(key)) break;
    std::vector<cv::Mat> in = Batch(set, b, &cursor);
    const double t0 = Now();
    Status s = RunOp(backend, op, in);
    const double secs = Now() - t0;
    if (s.IsOutOfMemory()) {
      tuner.ObserveOutOfMemory(key, b);
      trace += " " + std::to_string(b) + "(oom)";
      continue;
    }
    if (!s.ok()) {
      std::printf("  tuner probe failed: %s\n", s.ToString().c_str());
      return;
    }
    tuner.Observe(key, b, secs, backend.LastBatchBytes());
    char buf[64];
    std::snprintf(buf, sizeof buf, " %d(%.0f/s)", b, b / secs);
    trace += buf;
  }
  const int chosen = tuner.Next(key, budget(), guess);
  double chosen_ips = 0;
  if (auto it = sweep.find(chosen); it != sweep.end()) {
    chosen_ips = it->second;
  } else {
    Measure m = Time(backend, op, set, chosen, o.min_time);
    PrintMeasure(op, set, backend.device(), chosen, m);
    chosen_ips = m.status.ok() ? m.images_per_s : 0;
  }
  const double ratio = chosen_ips / best->second;
  std::printf("  tuner probes (%d):%s\n", tuner.probes(key), trace.c_str());
  char line[320];
  std::snprintf(line, sizeof line,
                "tuner_vs_sweep %-16s %-7s chose %d: %.1f img/s; best of sweep: batch %d, %.1f img/s; %.1f%% (goal >= 90%%: %s)",
                OpName(op), backend.device().c_str(), chosen, chosen_ips, best->first, best->second, 100 * ratio,
                ratio >= 0.9 ? "met" : "not met");
  std::printf("  %s\n------------------------------------------------\n", line);
  summary->push_back(line);
}


// ---- engine ----

namespace fe = framemill::engine;

std::vector<std::filesystem::path> ModelDirs(const std::string& root) {
  std::vector<std::filesystem::path> out;
  if (root.empty()) return out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root, ec)) {
    if (e.is_directory() && e.path().extension() != ".tmp" && std::filesystem::exists(e.path() / "model.fmg.json"))
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A deterministic input of `shape` (NCHW): smooth waves in the usual normalised range.
fg::Tensor EngineInput(const std::vector<int64_t>& shape, fe::StorageType st) {
  fg::Tensor t;
  t.shape = shape;
  t.type = st == fe::StorageType::kFloat16 ? fg::TensorType::kFloat16 : fg::TensorType::kFloat32;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const int64_t w = shape.back(), h = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
  t.data.resize(static_cast<size_t>(n) * t.ElementBytes());
  for (int64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(i % w) / w, y = static_cast<double>((i / w) % h) / h;
    const float v = static_cast<float>(0.5 + 0.4 * std::sin(7 * x + 3 * y + static_cast<double>(i / (w * h))));
    if (t.type == fg::TensorType::kFloat32) {
      std::memcpy(t.data.data() + 4 * i, &v, 4);
    } else {
      const uint16_t hv = fg::FloatToHalf(v);
      std::memcpy(t.data.data() + 2 * i, &hv, 2);
    }
  }
  return t;
}

struct EngineMeasure {
  Status status;
  double images_per_s = 0, ms_per_batch = 0;
  int runs = 0;
};

EngineMeasure TimeEngine(fe::Engine& e, const fg::Tensor& input, double min_time) {
  EngineMeasure m;
  m.status = e.Run(input).status();  // warm-up: arena, caches
  if (!m.status.ok()) return m;
  const double t0 = Now();
  double t = t0;
  do {
    m.status = e.Run(input).status();
    if (!m.status.ok()) return m;
    ++m.runs;
    t = Now();
  } while (t - t0 < min_time);
  m.ms_per_batch = 1e3 * (t - t0) / m.runs;
  m.images_per_s = static_cast<double>(input.shape[0]) * m.runs / (t - t0);
  return m;
}

void RunEngine(const Options& o, bool have_gpu, int64_t device_free_bytes, std::vector<std::string>* summary) {
  const std::vector<std::filesystem::path> dirs = ModelDirs(o.models);
  if (dirs.empty()) {
    std::printf("engine: no converted models under '%s' (--models or FRAMEMILL_MODELS)\n"
                "------------------------------------------------\n",
                o.models.c_str());
    summary->push_back("engine: no models");
    return;
  }
  for (const auto& dir : dirs) {
    const std::string model = dir.filename().string(), fmg = (dir / "model.fmg.json").string();
    if (!have_gpu || o.engine_cpu) {
      auto e = fe::Engine::Load(fmg, fe::MakeCpuKernels());
      if (!e.ok()) {
        std::printf("engine %-18s cpu   : %s\n", model.c_str(), e.status().ToString().c_str());
        continue;
      }
      std::vector<int64_t> shape = (*e)->graph().inputs.at(0).shape;
      shape[0] = 1;
      EngineMeasure m = TimeEngine(**e, EngineInput(shape, fe::StorageType::kFloat32), o.min_time);
      char line[256];
      if (m.status.ok()) {
        std::snprintf(line, sizeof line, "engine %-18s cpu kernels fp32 batch 1 : %10.2f ms/image (%d runs)",
                      model.c_str(), m.ms_per_batch, m.runs);
      } else {
        std::snprintf(line, sizeof line, "engine %-18s cpu kernels fp32 batch 1 : %s", model.c_str(),
                      m.status.ToString().c_str());
      }
      std::printf("%s\n", line);
      summary->push_back(line);
      std::fflush(stdout);
    }
    if (!have_gpu) continue;
    for (fe::StorageType st : {fe::StorageType::kFloat32, fe::StorageType::kFloat16}) {
      const char* tname = st == fe::StorageType::kFloat32 ? "fp32" : "fp16";
      auto kernels = fe::MakeCudaKernels(o.device);
      if (!kernels.ok()) {
        std::printf("engine %-18s cuda %s: %s\n", model.c_str(), tname, kernels.status().ToString().c_str());
        continue;
      }
      fe::EngineOptions eo;
      eo.storage = st;
      auto e = fe::Engine::Load(fmg, std::move(kernels).value(), eo);
      if (!e.ok()) {
        std::printf("engine %-18s cuda %s: %s\n", model.c_str(), tname, e.status().ToString().c_str());
        continue;
      }
      std::vector<int64_t> shape = (*e)->graph().inputs.at(0).shape;
      // A batchable graph, or a fixed-batch one the engine batches (models/catalog.cc
      // engine_batches: its plan takes a batch, as the device test checks).
      const bool batchable = !shape.empty() && (shape[0] < 0 || (*e)->PlanFor(2).ok());
      auto plan1 = (*e)->PlanFor(1);
      const int64_t weights = plan1.ok() ? (*plan1)->weight_bytes : 0;
      std::map<int, double> sweep;
      std::map<int, double> secs_per_batch;
      std::map<int, int64_t> batch_bytes;
      for (int b : o.engine_batches) {
        if (!batchable && b != 1) continue;
        auto plan = (*e)->PlanFor(b);
        if (!plan.ok()) {
          std::printf("engine %-18s cuda %s batch %3d : %s\n", model.c_str(), tname, b,
                      plan.status().ToString().c_str());
          break;
        }
        shape[0] = b;
        EngineMeasure m = TimeEngine(**e, EngineInput(shape, st), o.min_time);
        const int64_t bb = (*plan)->BatchBytes();
        if (!m.status.ok()) {
          std::printf("engine %-18s cuda %s batch %3d : %s\n", model.c_str(), tname, b, m.status.ToString().c_str());
          break;  // out of memory: larger batches will not fit either
        }
        std::printf("engine %-18s cuda %s batch %3d : %10.1f img/s %9.2f ms/batch  %8.2f MiB/item (+%.1f MiB weights)\n",
                    model.c_str(), tname, b, m.images_per_s, m.ms_per_batch,
                    static_cast<double>(bb) / b / (1 << 20), static_cast<double>(weights) / (1 << 20));
        std::fflush(stdout);
        sweep[b] = m.images_per_s;
        secs_per_batch[b] = m.ms_per_batch / 1e3;
        batch_bytes[b] = bb;
      }
      if (sweep.empty()) continue;
      auto best = std::max_element(sweep.begin(), sweep.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
      // The tuner, fed the sweep's timings and the plan's bytes (sizes outside the sweep:
      // the nearest measured one below).
      int chosen = 1;
      if (batchable) {
        fg::TunerOptions topt;
        topt.max_batch = o.engine_batches.empty() ? 64 : *std::max_element(o.engine_batches.begin(), o.engine_batches.end());
        fg::BatchTuner tuner(topt, nullptr);
        const fg::TunerKey key{"ENGINE_" + model + "_" + tname, "cuda:" + std::to_string(o.device), 0};
        const int64_t guess = batch_bytes.begin()->second / batch_bytes.begin()->first;
        const int64_t budget = device_free_bytes > 0 ? device_free_bytes - weights : 0;
        for (int iter = 0; iter < 40; ++iter) {
          const int b = tuner.Next(key, budget, guess);
          if (tuner.Settled(key)) break;
          auto it = secs_per_batch.upper_bound(b);
          if (it == secs_per_batch.begin()) break;
          --it;
          const double secs = it->second * b / it->first;
          tuner.Observe(key, b, secs, batch_bytes[it->first] / it->first * b);
        }
        chosen = tuner.Next(key, budget, guess);
      }
      auto below = sweep.upper_bound(chosen);
      const double chosen_ips = below == sweep.begin() ? 0 : std::prev(below)->second;
      char line[320];
      std::snprintf(line, sizeof line,
                    "engine %-18s cuda %s: best %8.1f img/s at batch %d; tuner chose %d (%.1f img/s); %.2f MiB/item",
                    model.c_str(), tname, best->second, best->first, chosen, chosen_ips,
                    static_cast<double>(batch_bytes[best->first]) / best->first / (1 << 20));
      std::printf("%s\n------------------------------------------------\n", line);
      summary->push_back(line);
      std::fflush(stdout);
    }
  }
}
// Pairs of consecutive views sliding 3 px right over a frame, gray, at `size`.
std::vector<fg::FlowPair> FlowPairs(const InputSet& frames, cv::Size size, int n) {
  std::vector<fg::FlowPair> pairs;
  for (int i = 0; i < n; ++i) {
    const cv::Mat& f = frames.images[size_t(i) % frames.images.size()];
    cv::Mat gray, a, b;
    cv::cvtColor(f, gray, cv::COLOR_BGR2GRAY);
    cv::resize(gray, a, size, 0, 0, cv::INTER_AREA);
    cv::warpAffine(a, b, cv::Matx23d(1, 0, 3, 0, 1, 0), size, cv::INTER_LINEAR, cv::BORDER_REFLECT);
    pairs.push_back({a, b});
  }
  return pairs;
}

// Seconds per call of `fn` (one warm-up, then calls for >= min_time); 0 if a call fails.
template <typename Fn>
double SecondsPerCall(Fn fn, double min_time) {
  if (!fn()) return 0;
  int calls = 0;
  const double t0 = Now();
  double secs = 0;
  while (secs < min_time) {
    if (!fn()) return 0;
    ++calls;
    secs = Now() - t0;
  }
  return secs / calls;
}

void RunFlow(const InputSet& frames, fg::ComputeBackend& cpu, fg::ComputeBackend* gpu, const Options& o,
             std::vector<std::string>* summary) {
  for (cv::Size size : {cv::Size(320, 180), cv::Size(1280, 720)}) {
    const auto pairs = FlowPairs(frames, size, 8);
    // Pairs per second of batches of `batch`; the last batch's flows in *last.
    auto rate = [&](fg::ComputeBackend& b, int batch, std::vector<cv::Mat>* last) -> double {
      const std::vector<fg::FlowPair> one(pairs.begin(), pairs.begin() + batch);
      const double secs = SecondsPerCall([&] {
        auto r = b.DenseFlowBatch(one, {});
        if (r.ok()) *last = std::move(r).value();
        return r.ok();
      }, o.min_time);
      return secs > 0 ? batch / secs : 0;
    };
    std::vector<cv::Mat> cpu_out, gpu_out;
    const double c = rate(cpu, 1, &cpu_out);
    char line[256];
    if (gpu) {
      const double g = rate(*gpu, 8, &gpu_out);
      double worst = 0;
      cv::Mat diff;
      cv::absdiff(gpu_out[0], cpu_out[0], diff);
      cv::minMaxLoc(diff.reshape(1), nullptr, &worst);
      std::snprintf(line, sizeof line, "flow %dx%d: CUDA %.1f pairs/s, CPU twin %.2f pairs/s (%.1fx); max |diff| %.2g px",
                    size.width, size.height, g, c, c > 0 ? g / c : 0.0, worst);
    } else {
      std::snprintf(line, sizeof line, "flow %dx%d: CPU twin %.2f pairs/s (no CUDA device)", size.width,
                    size.height, c);
    }
    std::printf("%s\n", line);
    summary->push_back(line);
  }
}


// A photo with an elliptical hole, as exemplar inpainting hands the patch search one:
// active where patches touch the hole, sources where whole patches are known, every
// start the first source (the worst start there is).
fg::PatchMatchTask HoleTask(const cv::Mat& bgr, cv::Size size, int radius) {
  fg::PatchMatchTask t;
  cv::resize(bgr, t.image, size, 0, 0, cv::INTER_AREA);
  cv::Mat hole = cv::Mat::zeros(size, CV_8U);
  cv::ellipse(hole, cv::Point(size.width / 2, size.height / 2), cv::Size(size.width / 8, size.height / 6), 20, 0,
              360, 255, cv::FILLED);
  const cv::Mat k = cv::getStructuringElement(cv::MORPH_RECT, cv::Size(2 * radius + 1, 2 * radius + 1));
  cv::dilate(hole, t.active, k);
  const cv::Mat known = hole == 0;
  cv::erode(known, t.source, k, cv::Point(-1, -1), 1, cv::BORDER_CONSTANT, cv::Scalar(0));
  std::vector<cv::Point> sources;
  cv::findNonZero(t.source, sources);
  t.nnf = cv::Mat(size, CV_32SC2, cv::Scalar(sources[0].x, sources[0].y));
  return t;
}


// patch_match: ms per megapixel of the patch search (PatchMatchSpec defaults) on the CPU
// twin (parallel over rows, every core) and on CUDA (a batch of 4 tasks), and whether
// the fields agree exactly, at 640x480 and 1920x1080.
void RunPatchMatch(const InputSet& frames, fg::ComputeBackend& cpu, fg::ComputeBackend* gpu, const Options& o,
                   std::vector<std::string>* summary) {
  const fg::PatchMatchSpec spec;
  for (cv::Size size : {cv::Size(640, 480), cv::Size(1920, 1080)}) {
    std::vector<fg::PatchMatchTask> tasks;
    for (int i = 0; i < 4; ++i) tasks.push_back(HoleTask(frames.images[size_t(i) % frames.images.size()], size, spec.radius));
    const double mp = size.area() / 1e6;
    std::vector<fg::PatchMatchResult> cpu_out, gpu_out;
    const double c = SecondsPerCall([&] {
      auto r = cpu.PatchMatchBatch({tasks[0]}, spec);
      if (r.ok()) cpu_out = std::move(r).value();
      return r.ok();
    }, o.min_time);
    char line[256];
    if (gpu == nullptr) {
      std::snprintf(line, sizeof line, "patch_match %dx%d: CPU twin %.1f ms/MP (no CUDA device)", size.width,
                    size.height, 1e3 * c / mp);
    } else {
      Status last;
      const double g = SecondsPerCall([&] {
        auto r = gpu->PatchMatchBatch(tasks, spec);
        if (!r.ok()) last = r.status();
        if (r.ok()) gpu_out = std::move(r).value();
        return r.ok();
      }, o.min_time) / double(tasks.size());
      const bool equal = !gpu_out.empty() && !cpu_out.empty() &&
                         cv::norm(gpu_out[0].nnf.reshape(1), cpu_out[0].nnf.reshape(1), cv::NORM_INF) == 0 &&
                         cv::norm(gpu_out[0].cost, cpu_out[0].cost, cv::NORM_INF) == 0;
      std::snprintf(line, sizeof line, "patch_match %dx%d: CUDA %.2f ms/MP, CPU twin %.1f ms/MP (%.1fx); fields %s%s",
                    size.width, size.height, 1e3 * g / mp, 1e3 * c / mp, g > 0 ? c / g : 0.0,
                    equal ? "equal" : "DIFFER", last.ok() ? "" : (" (" + last.ToString() + ")").c_str());
    }
    std::printf("%s\n", line);
    summary->push_back(line);
  }
}

// hole_fill: ms a photo of the harmonic fill on the hole's box, CPU twin (every core) and
// CUDA (one task a call, as the inpaint stage calls it), and whether the fills are equal.
void RunHoleFill(const InputSet& frames, fg::ComputeBackend& cpu, fg::ComputeBackend* gpu, const Options& o,
                 std::vector<std::string>* summary) {
  const fg::HoleFillSpec spec;
  const cv::Size size(1152, 864);  // 1 MP
  cv::Mat photo;
  cv::resize(frames.images[0], photo, size, 0, 0, cv::INTER_AREA);
  for (double fraction : {0.01, 0.05, 0.15}) {
    // An upright ellipse of `fraction` of the photo, 1:2 wide to tall, as a standing person.
    const double b = std::sqrt(fraction * size.area() * 2 / CV_PI), a = b / 2;
    cv::Mat hole = cv::Mat::zeros(size, CV_8U);
    cv::ellipse(hole, cv::Point(size.width / 2, size.height / 2), cv::Size(int(a), int(b)), 0, 0, 360, 255,
                cv::FILLED);
    cv::Rect box = cv::boundingRect(hole);
    box = cv::Rect(box.x - 8, box.y - 8, box.width + 16, box.height + 16) & cv::Rect(0, 0, size.width, size.height);
    const fg::HoleFillTask task{photo(box).clone(), hole(box).clone()};
    cv::Mat cpu_out, gpu_out;
    auto timed = [&](fg::ComputeBackend& backend, cv::Mat* out) {
      return SecondsPerCall([&] {
        auto r = backend.HoleFillBatch({task}, spec);
        if (r.ok()) *out = r->front();
        return r.ok();
      }, o.min_time);
    };
    const double c = timed(cpu, &cpu_out);
    char line[256];
    if (gpu == nullptr) {
      std::snprintf(line, sizeof line, "hole_fill %.0f%% of 1 MP (box %dx%d): CPU twin %.1f ms (no CUDA device)",
                    fraction * 100, box.width, box.height, 1e3 * c);
    } else {
      const double g = timed(*gpu, &gpu_out);
      const bool equal = !gpu_out.empty() && !cpu_out.empty() && cv::norm(gpu_out, cpu_out, cv::NORM_INF) == 0;
      std::snprintf(line, sizeof line, "hole_fill %.0f%% of 1 MP (box %dx%d): CUDA %.2f ms, CPU twin %.1f ms (%.1fx); fills %s",
                    fraction * 100, box.width, box.height, 1e3 * g, 1e3 * c, g > 0 ? c / g : 0.0,
                    equal ? "equal" : "DIFFER");
    }
    std::printf("%s\n", line);
    summary->push_back(line);
  }
}

// ladder_real_oom: the OOM ladder against memory another process really holds. The
// limit is --ladder_limit_mb (default: the device's total), above what is free, so the
// backend's own check passes and the device's allocations fail for real. Items: 300
// 1080p frames (LumaStats, as LIGHTING) and last one photo scaled to 1.2x the free
// memory, which cannot fit alone and must go to the CPU. Every result is compared with
// the CPU's. Needs under 8 GiB free (run.sh's hog holds the rest), else it says so.
void RunLadderRealOom(const InputSet& frames, fg::ComputeBackend& cpu, fg::ComputeBackend* gpu, const Options& o,
                      std::vector<std::string>* summary) {
  auto info = gpu ? gpu->Info() : framemill::Result<fg::DeviceInfo>(Status::NotFound("no CUDA device"));
  if (!info.ok() || info->free_bytes > (int64_t{8} << 30)) {
    const std::string why = info.ok() ? std::to_string(info->free_bytes >> 20) + " MiB free: hold memory elsewhere first"
                                      : info.status().ToString();
    std::printf("ladder_real_oom: skipped (%s)\n", why.c_str());
    summary->push_back("ladder_real_oom: skipped (" + why + ")");
    return;
  }
  std::vector<cv::Mat> images;
  for (int i = 0; i < 300; ++i) images.push_back(frames.images[size_t(i) % frames.images.size()]);
  const double side = std::sqrt(1.2 * double(info->free_bytes) / 3.0 / (16.0 * 9.0));
  cv::Mat giant;
  cv::resize(frames.images[0], giant, cv::Size(int(16 * side), int(9 * side)), 0, 0, cv::INTER_NEAREST);
  images.push_back(giant);

  fg::BatchTuner tuner(fg::TunerOptions{}, nullptr);
  fg::LadderOptions lopt;
  lopt.memory_limit_bytes = o.ladder_limit_mb > 0 ? o.ladder_limit_mb << 20 : info->total_bytes;
  fg::OomLadder ladder(gpu, &cpu, &tuner, framemill::SystemClock(), lopt);
  std::vector<fg::LumaStats> out(images.size());
  std::vector<std::string> device_of;
  auto run = [&](fg::ComputeBackend& b, size_t begin, size_t end) -> Status {
    std::vector<cv::Mat> slice(images.begin() + long(begin), images.begin() + long(end));
    auto r = b.LumaStatsBatch(slice);
    if (!r.ok()) return r.status();
    for (size_t k = begin; k < end; ++k) out[k] = (*r)[k - begin];
    return Status::OK();
  };
  const double t0 = Now();
  Status s = ladder.Run("LIGHTING", images.size(), 1920 * 1080, fg::LumaStatsBytesPerItem(images[0]), run, &device_of);
  const double secs = Now() - t0;
  int on_device = 0, mismatches = 0;
  for (size_t i = 0; s.ok() && i < images.size(); ++i) {
    on_device += device_of[i] != "cpu";
    const fg::LumaStats want = fg::LumaStatsCpu(images[i]);
    mismatches += out[i].histogram != want.histogram || out[i].pixels != want.pixels ||
                  std::abs(out[i].sum_l - want.sum_l) > 1e-5 * want.sum_l;
  }
  const fg::LadderStats& st = ladder.stats();
  char line[400];
  std::snprintf(line, sizeof line,
                "ladder_real_oom: %.0f MiB free of %.0f, limit %lld MiB; %zu items (last %dx%d, %.0f MiB) in %.1f s: %s; "
                "oom_events %lld, halvings %lld, cpu_fallback_items %lld; %d on the device; %d differ from the CPU",
                info->free_bytes / 1048576.0, info->total_bytes / 1048576.0, (long long)(lopt.memory_limit_bytes >> 20),
                images.size(), giant.cols, giant.rows, giant.total() * 3 / 1048576.0, secs, s.ToString().c_str(),
                (long long)st.oom_events, (long long)st.halvings, (long long)st.cpu_fallback_items, on_device, mismatches);
  std::printf("%s\n", line);
  summary->push_back(line);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (ParseFlag(argv[i], "--benchmarks", &v)) {
      o.benchmarks.clear();
      for (const std::string& b : Split(v)) o.benchmarks.insert(b);
    } else if (ParseFlag(argv[i], "--data", &v)) {
      o.data = v;
    } else if (ParseFlag(argv[i], "--min_time", &v)) {
      o.min_time = std::stod(v);
    } else if (ParseFlag(argv[i], "--cpu_batches", &v)) {
      o.cpu_batches = Ints(v);
    } else if (ParseFlag(argv[i], "--gpu_batches", &v)) {
      o.gpu_batches = Ints(v);
    } else if (ParseFlag(argv[i], "--sweep_max", &v)) {
      o.sweep_max = std::max(1, std::stoi(v));
    } else if (ParseFlag(argv[i], "--device", &v)) {
      o.device = std::stoi(v);
    } else if (ParseFlag(argv[i], "--frames", &v)) {
      o.frames = std::max(1, std::stoi(v));
    } else if (ParseFlag(argv[i], "--models", &v)) {
      o.models = v;
    } else if (ParseFlag(argv[i], "--engine_batches", &v)) {
      o.engine_batches = Ints(v);
    } else if (ParseFlag(argv[i], "--engine_cpu", &v)) {
      o.engine_cpu = v == "1" || v == "true";
    } else if (ParseFlag(argv[i], "--ladder_limit_mb", &v)) {
      o.ladder_limit_mb = std::stoll(v);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  for (const std::string& b : o.benchmarks) {
    if (b != "luma_stats" && b != "preprocess_fp32" && b != "preprocess_fp16" && b != "tuner_vs_sweep" &&
        b != "engine" && b != "flow" && b != "patch_match" && b != "hole_fill" && b != "ladder_real_oom") {
      std::fprintf(stderr, "unknown benchmark %s\n", b.c_str());
      return 2;
    }
  }

  std::vector<cv::Mat> photos;
  std::string source;
  if (!o.data.empty()) {
    std::string error;
    if (!ReadData(o.data, &photos, &error)) {
      std::fprintf(stderr, "gpu_bench: %s\n", error.c_str());
      return 1;
    }
    source = "real photos from " + o.data + " (bench/gpu_bench_data.cc: Debian opencv-doc samples)";
  } else {
    photos = SyntheticPhotos();
    source = "synthetic photo-like images (no --data)";
  }
  const InputSet photo_set = MakeSet("photos", "photos as they are", photos);
  const InputSet frame_set = MakeSet("frames_1080p", "1920x1080 crops of the photos", Frames1080p(photos, o.frames));

  auto cpu = fg::MakeCpuBackend();
  std::unique_ptr<fg::ComputeBackend> gpu;
  std::string why;
  std::vector<fg::DeviceInfo> devices = fg::CudaDevices(&why);
  std::string device_line;
  if (devices.empty()) {
    device_line = std::string("none: no CUDA device found (") + why + "); CUDA compiled in: " +
                  (fg::CudaCompiledIn() ? "yes" : "no");
  } else {
    auto g = fg::MakeCudaBackend(o.device);
    if (!g.ok()) {
      device_line = "none: cuda:" + std::to_string(o.device) + " unusable: " + g.status().ToString();
    } else {
      gpu = std::move(g).value();
      auto info = gpu->Info();
      char buf[256];
      if (info.ok()) {
        std::snprintf(buf, sizeof buf, "%s: %s, cc %d.%d, %d SMs, %.1f GiB VRAM (%.1f GiB free)",
                      gpu->device().c_str(), info->name.c_str(), info->cc_major, info->cc_minor,
                      info->multiprocessors, static_cast<double>(info->total_bytes) / (1 << 30),
                      static_cast<double>(info->free_bytes) / (1 << 30));
        device_line = buf;
      } else {
        device_line = gpu->device() + ": " + info.status().ToString();
      }
    }
  }
  const int sweep_max = o.sweep_max > 0 ? o.sweep_max : (gpu ? 512 : 64);

  std::printf("framemill gpu_bench\n");
  std::printf("Date:       %s\n", Date().c_str());
  std::printf("CPU:        %u x %s (TBB concurrency %d)\n", std::thread::hardware_concurrency(), CpuModel().c_str(),
              tbb::info::default_concurrency());
  std::printf("CUDA:       %s\n", device_line.c_str());
  std::printf("Data:       %s\n", source.c_str());
  std::printf("Inputs:     photos: %zu images, mean %.2f MP (%.2f MB BGR); frames_1080p: %zu frames, 2.07 MP (6.2 MB)\n",
              photo_set.images.size(), static_cast<double>(photo_set.mean_pixels) / 1e6, photo_set.mean_bytes / 1e6,
              frame_set.images.size());
  std::printf("Preprocess: 224x224, BGR->RGB, /255, ImageNet mean/std, NCHW\n");
  if (o.benchmarks.count("engine")) {
    const auto model_dirs = ModelDirs(o.models);
    std::printf("Engine:     %zu model(s) under '%s'; batches", model_dirs.size(), o.models.c_str());
    for (int b : o.engine_batches) std::printf(" %d", b);
    std::printf("; own CUDA kernels (no cuDNN/cuBLAS), fp32 and fp16 storage, fp32 accumulation%s\n",
                o.engine_cpu || !gpu ? "; CPU reference kernels at batch 1" : "");
  }
  std::printf("Timing:     1 warm-up batch, then batches for >= %.2f s; CPU batches", o.min_time);
  for (int b : o.cpu_batches) std::printf(" %d", b);
  std::printf("; CUDA batches");
  for (int b : o.gpu_batches) std::printf(" %d", b);
  std::printf("\n------------------------------------------------\n");
  if (!gpu) std::printf("No CUDA device was found: CPU figures only.\n------------------------------------------------\n");
  std::fflush(stdout);

  std::vector<std::string> summary;
  const std::vector<const InputSet*> sets = {&photo_set, &frame_set};
  for (Op op : {Op::kLuma, Op::kPreFp32, Op::kPreFp16}) {
    if (o.benchmarks.count(OpName(op))) RunThroughput(op, sets, *cpu, gpu.get(), o, &summary);
  }
  if (o.benchmarks.count("tuner_vs_sweep")) {
    if (!gpu) std::printf("tuner_vs_sweep: no CUDA device, so on the CPU backend (the goal is about the GPU)\n");
    fg::ComputeBackend& b = gpu ? *gpu : *cpu;
    for (Op op : {Op::kLuma, Op::kPreFp16}) TunerVsSweep(op, frame_set, b, o, sweep_max, &summary);
  }
  if (o.benchmarks.count("engine")) {
    int64_t free_bytes = 0;
    if (gpu) {
      auto info = gpu->Info();
      if (info.ok()) free_bytes = info->free_bytes;
    }
    RunEngine(o, gpu != nullptr, free_bytes, &summary);
  }
  if (o.benchmarks.count("flow")) RunFlow(frame_set, *cpu, gpu.get(), o, &summary);
  if (o.benchmarks.count("patch_match")) RunPatchMatch(frame_set, *cpu, gpu.get(), o, &summary);
  if (o.benchmarks.count("hole_fill")) RunHoleFill(frame_set, *cpu, gpu.get(), o, &summary);
  if (o.benchmarks.count("ladder_real_oom")) RunLadderRealOom(frame_set, *cpu, gpu.get(), o, &summary);
  std::printf("Summary\n");
  for (const std::string& s : summary) std::printf("  %s\n", s.c_str());
  return 0;
}
