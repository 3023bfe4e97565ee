// Neural model benchmark on the CPU, after leveldb's benchmarks/db_bench.cc: prints its
// setup, then one line per (workload, model). It measures only; nothing is asserted.
// The GPU figures come from gpu_bench's `engine` workload, run on a GPU machine.
//
//   models_bench [--benchmarks=dnn,engine_cpu,plan,faces] [--models=DIR] [--only=a,b]
//                [--reps=5] [--batch=8] [--image=PATH]
//
// Workloads (default: all, in this order):
//   dnn         OpenCV DNN (the CPU path of stages and `infer`): ms per image at batch 1
//               and at --batch (batchable models), preprocessing included, decode not
//   engine_cpu  our engine (gpu/engine) on its CPU reference kernels, fp32 and fp16
//               storage, batch 1: the same graph the CUDA kernels run
//   plan        the engine's memory plan: device bytes for batch 1 and per extra item,
//               the figure the batch tuner starts from (fp32 and fp16 storage)
//   faces       the faces stage end to end (decode, detection, embeddings) on --image and
//               on the Solvay group photo (visp-images-data), with the whole-frame
//               detector and with the tiled one: ms per image, faces, tiles
//
// Models come from --models (default: ./framemill-models); images are real photos
// (messi5.jpg from opencv-doc unless --image). Each timing is the median of --reps runs
// after one warm-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "bench/bench_support.h"
#include "gpu/engine/cpu_kernels.h"
#include "gpu/engine/engine.h"
#include "gpu/ops.h"
#include "models/dnn_model.h"
#include "models/model_cache.h"
#include "models/model_store.h"
#include "stages/faces_stage.h"

namespace framemill {
namespace {

struct Flags {
  std::string benchmarks = "dnn,engine_cpu,plan,faces";
  std::string models = "./framemill-models";
  std::string only;
  std::string image = "/usr/share/doc/opencv-doc/examples/data/messi5.jpg";
  int reps = 5;
  int batch = 8;
};

using bench::Listed;
using bench::MedianMs;
using bench::NowMs;

void Dnn(const Flags& flags, const models::ModelManifest& m, const cv::Mat& photo) {
  auto model = models::DnnModel::Open(m);
  if (!model.ok()) {
    std::printf("dnn         %-18s error: %s\n", m.name.c_str(), model.status().ToString().c_str());
    return;
  }
  std::vector<cv::Mat> one = {photo};
  double ms1 = MedianMs(flags.reps, [&] { (void)(*model)->Run(one); });
  std::printf("dnn         %-18s batch 1: %8.1f ms/image", m.name.c_str(), ms1);
  if (m.batchable && flags.batch > 1) {
    std::vector<cv::Mat> many(flags.batch, photo);
    double msb = MedianMs(std::max(1, flags.reps / 2), [&] { (void)(*model)->Run(many); });
    std::printf("   batch %d: %8.1f ms/image%s", flags.batch, msb / flags.batch,
                (*model)->batched() ? "" : " (image by image: the graph is batch-1)");
  } else {
    std::printf("   (fixed batch 1)");
  }
  std::printf("\n");
  std::fflush(stdout);
}

void EngineCpu(const Flags& flags, const models::ModelManifest& m, const cv::Mat& photo) {
  gpu::Tensor input = gpu::PreprocessCpu({photo}, m.preprocess);
  for (auto storage : {gpu::engine::StorageType::kFloat32, gpu::engine::StorageType::kFloat16}) {
    const char* s = storage == gpu::engine::StorageType::kFloat32 ? "fp32" : "fp16";
    auto engine = gpu::engine::Engine::Load(m.graph_file, gpu::engine::MakeCpuKernels(),
                                            {.storage = storage});
    if (!engine.ok()) {
      std::printf("engine_cpu  %-18s %s error: %s\n", m.name.c_str(), s,
                  engine.status().ToString().c_str());
      continue;
    }
    double ms = MedianMs(std::max(1, flags.reps / 2), [&] { (void)(*engine)->Run(input); });
    std::printf("engine_cpu  %-18s %s batch 1: %8.1f ms/image\n", m.name.c_str(), s, ms);
    std::fflush(stdout);
  }
}

void PlanBytes(const models::ModelManifest& m) {
  for (auto storage : {gpu::engine::StorageType::kFloat32, gpu::engine::StorageType::kFloat16}) {
    const char* s = storage == gpu::engine::StorageType::kFloat32 ? "fp32" : "fp16";
    auto engine = gpu::engine::Engine::Load(m.graph_file, gpu::engine::MakeCpuKernels(),
                                            {.storage = storage});
    if (!engine.ok()) {
      std::printf("plan        %-18s %s error: %s\n", m.name.c_str(), s,
                  engine.status().ToString().c_str());
      continue;
    }
    int64_t b1 = (*engine)->PlanBytes(1);
    int64_t b8 = m.batchable ? (*engine)->PlanBytes(8) : -1;
    std::printf("plan        %-18s %s batch 1: %8.1f MiB", m.name.c_str(), s, b1 / 1048576.0);
    if (b8 > 0)
      std::printf("   per extra item: %7.2f MiB", (b8 - b1) / 7.0 / 1048576.0);
    else
      std::printf("   (fixed batch 1)");
    std::printf("\n");
  }
}

// The faces stage as a worker runs it (CPU), on each photo, with each detector.
void Faces(const Flags& flags) {
  const std::vector<std::string> photos = {
      flags.image,
      "/usr/share/visp-images-data/ViSP-images/faces/1280px-Solvay_conference_1927.png"};
  auto cache = std::make_shared<models::ModelCache>(flags.models);
  for (const std::string& detector : {std::string("blazeface"), std::string("blazeface-tiled")}) {
    FacesOptions o;
    o.detector = detector;
    FacesStage stage(cache, ModelStageOptions{}, o);
    for (const std::string& path : photos) {
      if (!std::filesystem::exists(path)) continue;
      ClaimedJob job;
      job.id = job.item_id = 1;
      job.stage = "faces";
      job.source = path;
      job.kind = MediaKind::kImage;
      Outcome out;
      const double ms = MedianMs(flags.reps, [&] { out = stage.Run(job); });
      if (out.kind != Outcome::Kind::kDone) {
        std::printf("faces       %-16s %s: %s\n", detector.c_str(), path.c_str(),
                    out.error.ToString().c_str());
        continue;
      }
      std::printf("faces       %-16s %-36s %8.1f ms/image  %3d faces  %3d tiles\n",
                  detector.c_str(), std::filesystem::path(path).filename().c_str(), ms,
                  out.result["count"].get<int>(), out.result.value("tiles", 0));
      std::fflush(stdout);
    }
  }
}

int Main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* p) -> const char* {
      size_t n = std::strlen(p);
      return a.compare(0, n, p) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = val("--benchmarks=")) flags.benchmarks = v;
    else if (const char* v = val("--models=")) flags.models = v;
    else if (const char* v = val("--only=")) flags.only = v;
    else if (const char* v = val("--image=")) flags.image = v;
    else if (const char* v = val("--reps=")) flags.reps = std::max(1, std::atoi(v));
    else if (const char* v = val("--batch=")) flags.batch = std::max(1, std::atoi(v));
    else {
      std::fprintf(stderr, "models_bench: unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  cv::Mat photo = cv::imread(flags.image, cv::IMREAD_COLOR);
  if (photo.empty()) {
    std::fprintf(stderr, "models_bench: cannot read %s\n", flags.image.c_str());
    return 2;
  }
  models::ModelStore store(flags.models);
  std::vector<models::ModelManifest> installed;
  for (const auto& e : store.List())
    if (e.installed && Listed(flags.only, e.name)) installed.push_back(e.manifest);
  std::printf("models_bench: %zu model(s) from %s\n", installed.size(), store.dir().c_str());
  std::printf("image:        %s (%dx%d)\n", flags.image.c_str(), photo.cols, photo.rows);
  std::printf("cpu:          %u hardware threads; OpenCV threads %d\n",
              std::thread::hardware_concurrency(), cv::getNumThreads());
  std::printf("reps:         median of %d after a warm-up; batch %d\n", flags.reps, flags.batch);
  std::printf("------------------------------------------------------------------\n");
  if (installed.empty()) {
    std::fprintf(stderr, "models_bench: no models installed: run `framemill models fetch`\n");
    return 2;
  }
  if (Listed(flags.benchmarks, "faces")) Faces(flags);
  for (const std::string& w : {std::string("dnn"), std::string("engine_cpu"), std::string("plan")}) {
    if (!Listed(flags.benchmarks, w)) continue;
    for (const auto& m : installed) {
      if (w == "dnn") Dnn(flags, m, photo);
      if (w == "engine_cpu") EngineCpu(flags, m, photo);
      if (w == "plan") PlanBytes(m);
    }
  }
  return 0;
}

}  // namespace
}  // namespace framemill

int main(int argc, char** argv) { return framemill::Main(argc, argv); }
