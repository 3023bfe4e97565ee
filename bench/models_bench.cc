// Neural model benchmark on the CPU, after leveldb's benchmarks/db_bench.cc: prints its
// setup, then one line per (workload, model). It measures only; nothing is asserted.
// The GPU figures come from gpu_bench's `engine` workload, run on a GPU machine.
//
//   models_bench [--benchmarks=engine,dnn,engine_cpu,plan,faces,faces_precision,categorize_precision,dedup] [--models=DIR] [--only=a,b]
//                [--reps=5] [--batch=8] [--threads=N] [--image=PATH]
//
// Workloads (default: all, in this order):
//   dnn         OpenCV DNN (the CPU path of stages and `infer`): ms per image at batch 1
//               and at --batch (batchable models), preprocessing included, decode not
//   engine      our engine on the CPU's oneDNN kernels (engine/dnnl/dnnl_kernels.h), the CPU
//               path of the stages: ms per image at batch 1 and at --batch (batchable models),
//               the forward alone (as ORT's ort_bench.sh times it), fp32 and, where the CPU
//               has AVX512-BF16 or AMX, bf16; --threads=N OpenMP threads (default: all)
//   engine_cpu  our engine (engine/) on its CPU reference kernels, fp32 and fp16
//               storage, batch 1: the same graph the CUDA kernels run
//   profile     (not by default) where one forward's time goes on the oneDNN kernels (fp32,
//               batch 1): per kind of step, the ten slowest steps, and the time outside them
//   plan        the engine's memory plan: device bytes for batch 1 and per extra item,
//               the figure the batch tuner starts from (fp32 and fp16 storage)
//   faces       the faces stage end to end (decode, detection, embeddings) on --image and
//               on the Solvay group photo (visp-images-data), with the whole-frame
//               detector and with the tiled one: ms per image, faces, tiles
//   dedup       (not by default) the categorize and dedup stages over the distinct photos of
//               tests/data/content_labels.csv and content_holdout.csv, each with five copies
//               (half size, JPEG quality 30, a 10% crop, a 3-degree turn, brightness +30):
//               per kind of copy the share grouped with its original, and the groups that
//               join two distinct photos
//   categorize_precision  (not by default) the categorize stage on the labelled pictures of
//               tests/data/categorize_labels.csv: per threshold on the object score, the
//               labels shown, how many are right (precision), how many of the labelled
//               objects are shown (recall), and the negatives that show any label; for each
//               detector --detectors names (centernet, yolov8n, yolov8s, yolov8m; default
//               centernet) with its CPU ms a picture; --labels=CSV reads another labelled set
//               (tests/data/categorize_photos.csv: then the table again for each of its sets,
//               ordinary photos and cut-outs); and the ten most frequent labels' precision and
//               recall at 0.3 to 0.9 by 0.05
//   faces_precision  (not by default) the faces stage with its defaults on the pictures of
//               bench/data/faces_negatives.txt (no human face: every face is false) and on
//               Solvay 1927 against ViSP's boxes: per score threshold, false faces, recall
//               and precision
//
// Models come from --models (default: ./framemill-models); images are real photos
// (messi5.jpg from opencv-doc unless --image). Each timing is the median of --reps runs
// after one warm-up.
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "bench/bench_support.h"
#include <malloc.h>
#include <omp.h>

#include "engine/reference/cpu_kernels.h"
#include "engine/dnnl/dnnl_kernels.h"
#include "engine/engine.h"
#include "gpu/ops.h"
#include "tests/support/dnn_model.h"
#include "models/model_cache.h"
#include "models/model_store.h"
#include "media/geometry.h"
#include "stages/categorize_stage.h"
#include "stages/dedup_stage.h"
#include "stages/faces_stage.h"
#include "tests/support/solvay_truth.h"
#include "tests/support/test_support.h"

namespace framemill {
namespace {

struct Flags {
  std::string benchmarks = "engine,dnn,engine_cpu,plan,faces";
  std::string models = "./framemill-models";
  std::string only;
  std::string detectors = "centernet";
  std::string labels = std::string(FRAMEMILL_SOURCE_DIR) + "/tests/data/categorize_labels.csv";
  std::string image = "/usr/share/doc/opencv-doc/examples/data/messi5.jpg";
  int reps = 5;
  int batch = 8;
  int threads = 0;
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

// `fn(engine, "fp32" or "fp16")` with the model's graph loaded on the CPU kernels in each
// storage; a graph that does not load is a line under `what` with the error.
template <class Fn>
void EachStorage(const models::ModelManifest& m, const char* what, Fn fn) {
  for (auto storage : {engine::StorageType::kFloat32, engine::StorageType::kFloat16}) {
    const char* s = storage == engine::StorageType::kFloat32 ? "fp32" : "fp16";
    auto engine = engine::Engine::Load(m.graph_file, engine::MakeCpuKernels(),
                                            {.storage = storage});
    if (engine.ok()) fn(**engine, s);
    else std::printf("%-11s %-18s %s error: %s\n", what, m.name.c_str(), s, engine.status().ToString().c_str());
  }
}

void EngineCpu(const Flags& flags, const models::ModelManifest& m, const cv::Mat& photo) {
  gpu::Tensor input = gpu::PreprocessCpu({photo}, m.preprocess);
  EachStorage(m, "engine_cpu", [&](engine::Engine& engine, const char* s) {
    double ms = MedianMs(std::max(1, flags.reps / 2), [&] { (void)engine.Run(input); });
    std::printf("engine_cpu  %-18s %s batch 1: %8.1f ms/image\n", m.name.c_str(), s, ms);
    std::fflush(stdout);
  });
}

// A batch of `n` copies of the photo, preprocessed as the model wants; for a model whose
// input is not an image (silero-vad's audio windows), `n` rows of a 440 Hz tone.
gpu::Tensor Inputs(const models::ModelManifest& m, const cv::Mat& photo, int n) {
  const auto& s = m.input_shape;
  if (s.size() == 4 && s[1] == 3) return gpu::PreprocessCpu(std::vector<cv::Mat>(n, photo), m.preprocess);
  gpu::Tensor t{{n, s.size() > 1 ? s[1] : 1, s.size() > 2 ? s[2] : 1, s.size() > 3 ? s[3] : 1}, gpu::TensorType::kFloat32, {}};
  const int64_t each = t.shape[1] * t.shape[2] * t.shape[3];
  std::vector<float> v(static_cast<size_t>(n * each));
  for (size_t k = 0; k < v.size(); ++k) v[k] = 0.3f * std::sin(6.2832f * 440.f * (k % each) / 16000.f);
  t.data.resize(v.size() * 4);
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

void EngineDnnl(const Flags& flags, const models::ModelManifest& m, const cv::Mat& photo) {
  for (bool bf16 : {false, true}) {
    if (bf16 && !engine::CpuHasBf16()) continue;
    const char* s = bf16 ? "bf16" : "fp32";
    auto engine = engine::Engine::Load(m.graph_file, engine::MakeDnnlKernels({.bf16 = bf16}));
    if (!engine.ok()) {
      std::printf("engine      %-18s %s error: %s\n", m.name.c_str(), s, engine.status().ToString().c_str());
      continue;
    }
    const gpu::Tensor one = Inputs(m, photo, 1);
    if (auto r = (*engine)->Run(one); !r.ok()) {
      std::printf("engine      %-18s %s error: %s\n", m.name.c_str(), s, r.status().ToString().c_str());
      continue;
    }
    const double ms1 = MedianMs(flags.reps, [&] { (void)(*engine)->Run(one); });
    std::printf("engine      %-18s %s %d threads batch 1: %8.1f ms/image", m.name.c_str(), s,
                omp_get_max_threads(), ms1);
    if ((m.batchable || models::EngineBatches(m.name)) && flags.batch > 1) {
      const gpu::Tensor many = Inputs(m, photo, flags.batch);
      const double msb = MedianMs(std::max(1, flags.reps / 2), [&] { (void)(*engine)->Run(many); });
      std::printf("   batch %d: %8.1f ms/image", flags.batch, msb / flags.batch);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
}

const char* StepKindName(engine::StepKind k) {
  static const char* const kNames[] = {"conv", "conv_transpose", "pool", "binary", "unary", "resize", "pad",
                                       "concat", "transpose", "slice", "reduce", "softmax", "matmul",
                                       "argmax", "copy"};
  return kNames[static_cast<int>(k)];
}

// Where one forward's time goes on the CPU's oneDNN kernels (fp32, batch 1): per kind of
// step, and the ten slowest steps, as the mean of --reps runs after a warm-up; `other` is
// the run's time outside its steps (the input's upload, the outputs' layout and download).
void Profile(const Flags& flags, const models::ModelManifest& m, const cv::Mat& photo) {
  auto engine = engine::Engine::Load(m.graph_file, engine::MakeDnnlKernels());
  if (!engine.ok()) {
    std::printf("profile     %-18s error: %s\n", m.name.c_str(), engine.status().ToString().c_str());
    return;
  }
  const gpu::Tensor one = Inputs(m, photo, 1);
  (void)(*engine)->Run(one);
  std::vector<double> ms;
  (*engine)->ProfileSteps(&ms);
  const double t0 = NowMs();
  for (int r = 0; r < flags.reps; ++r) (void)(*engine)->Run(one);
  const double total = (NowMs() - t0) / flags.reps;
  (*engine)->ProfileSteps(nullptr);
  const engine::Plan& plan = **(*engine)->PlanFor(1);
  std::map<std::string, std::pair<int, double>> by_kind;
  double steps = 0;
  for (size_t k = 0; k < plan.steps.size(); ++k) {
    auto& [count, t] = by_kind[StepKindName(plan.steps[k].kind)];
    ++count;
    t += ms[k] / flags.reps;
    steps += ms[k] / flags.reps;
  }
  std::printf("profile     %-18s %zu steps, %.2f ms a forward (steps %.2f, other %.2f)\n", m.name.c_str(),
              plan.steps.size(), total, steps, total - steps);
  for (const auto& [kind, v] : by_kind)
    std::printf("profile     %-18s   %-15s %4d steps %8.2f ms %5.1f%%\n", m.name.c_str(), kind.c_str(), v.first,
                v.second, 100 * v.second / total);
  std::vector<size_t> order(plan.steps.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ms[a] > ms[b]; });
  for (size_t k = 0; k < std::min<size_t>(10, order.size()); ++k) {
    const engine::Step& st = plan.steps[order[k]];
    std::string shape;
    for (int64_t d : plan.buffers[st.output].shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
    std::printf("profile     %-18s   step %3zu %-14s %7.3f ms  %s -> %s\n", m.name.c_str(), order[k],
                StepKindName(st.kind), ms[order[k]] / flags.reps, st.node.c_str(), shape.c_str());
  }
  std::fflush(stdout);
}

void PlanBytes(const models::ModelManifest& m) {
  EachStorage(m, "plan", [&](engine::Engine& engine, const char* s) {
    int64_t b1 = engine.PlanBytes(1);
    int64_t b8 = m.batchable ? engine.PlanBytes(8) : -1;
    std::printf("plan        %-18s %s batch 1: %8.1f MiB", m.name.c_str(), s, b1 / 1048576.0);
    if (b8 > 0)
      std::printf("   per extra item: %7.2f MiB", (b8 - b1) / 7.0 / 1048576.0);
    else
      std::printf("   (fixed batch 1)");
    std::printf("\n");
  });
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

// ------------------------------------------------ faces: precision on real negatives

// The paths of bench/data/faces_negatives.txt: real pictures that hold no human face.
std::vector<std::string> FaceNegatives() {
  std::ifstream in(std::string(FRAMEMILL_SOURCE_DIR) + "/bench/data/faces_negatives.txt");
  std::vector<std::string> paths;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#' && std::filesystem::exists(line)) paths.push_back(line);
  return paths;
}

struct FoundFace {
  cv::Rect2f box;
  float score = 0;     // the detector's
  float presence = 0;  // facemesh's face presence on the face's crop (a second, independent check)
};

// Every face the detector proposes on one picture (the stage's defaults): those the verifier
// kept and those it refused (`refused` in the result), each with its score and presence.
std::vector<FoundFace> FacesOn(FacesStage& stage, const std::string& path) {
  std::vector<FoundFace> faces;
  const std::optional<Outcome> out = bench::DoneOn(stage, path, "faces_precision ");
  if (!out) return faces;
  for (const char* list : {"faces", "refused"}) {
    for (const auto& f : out->result[list]) {
      const auto& b = f["box"];
      faces.push_back({cv::Rect2f(b[0].get<float>(), b[1].get<float>(),
                                  b[2].get<float>() - b[0].get<float>(),
                                  b[3].get<float>() - b[1].get<float>()),
                       f["score"].get<float>(), f["verified"].get<float>()});
    }
  }
  return faces;
}

// Detection precision, the table a score threshold is chosen from (issue 27): every face on
// the negatives is false; on Solvay 1927 a face is true when it overlaps one of ViSP's 30
// boxes at IoU >= 0.3. Prints each false face, then, per threshold, what a cut there keeps.
void FacesPrecision(const Flags& flags) {
  auto cache = std::make_shared<models::ModelCache>(flags.models);
  FacesStage stage(cache, ModelStageOptions{}, FacesOptions{});
  const std::vector<std::string> negatives = FaceNegatives();
  std::vector<FoundFace> false_faces, true_faces, wrong_faces;
  int with_faces = 0;
  for (const std::string& path : negatives) {
    const auto faces = FacesOn(stage, path);
    with_faces += !faces.empty();
    for (const FoundFace& f : faces) {
      false_faces.push_back(f);
      std::printf("faces_precision  false face  %-28s score %.3f  presence %.3f  %.0fx%.0f px\n",
                  std::filesystem::path(path).filename().c_str(), f.score, f.presence,
                  f.box.width, f.box.height);
    }
  }
  // Debian's photos with people (each holds one face), printed for reading: a profile or a
  // turned head is what a verifier may refuse.
  for (const char* name : {"messi5.jpg", "basketball1.png", "basketball2.png", "left06.jpg",
                           "right06.jpg"}) {
    for (const FoundFace& f : FacesOn(stage, "/usr/share/doc/opencv-doc/examples/data/" +
                                                 std::string(name)))
      std::printf("faces_precision  person      %-28s score %.3f  presence %.3f  %.0fx%.0f px\n",
                  name, f.score, f.presence, f.box.width, f.box.height);
  }
  const auto truth = testing::SolvayTruth();
  for (const FoundFace& f : FacesOn(stage, testing::kSolvay)) {
    bool hit = false;
    for (const cv::Rect2f& t : truth) hit |= IoU(f.box, t) >= 0.3f;
    (hit ? true_faces : wrong_faces).push_back(f);
  }
  float lowest_true = 1;
  for (const FoundFace& f : true_faces) lowest_true = std::min(lowest_true, f.presence);
  std::printf("faces_precision  negatives: %zu pictures, %d with a face, %zu false faces;"
              " Solvay: %zu faces, %zu on a truth box (of %zu), lowest presence of those %.3f\n",
              negatives.size(), with_faces, false_faces.size(),
              true_faces.size() + wrong_faces.size(), true_faces.size(), truth.size(), lowest_true);
  std::printf("faces_precision  %9s %12s %14s %15s %16s\n", "min score", "min presence",
              "false (neg.)", "Solvay recall", "Solvay precision");
  for (float p : {0.0f, 0.05f, 0.1f, 0.2f, 0.5f, 0.9f}) {
    for (float t : {0.0f, 0.6f, 0.7f, 0.8f}) {
      auto at = [t, p](const std::vector<FoundFace>& v) {
        return std::count_if(v.begin(), v.end(),
                             [t, p](const FoundFace& f) { return f.score >= t && f.presence >= p; });
      };
      const auto kept_true = at(true_faces), kept_wrong = at(wrong_faces);
      std::printf("faces_precision  %9.2f %12.2f %14td %12td/%zu %16.3f\n", t, p, at(false_faces),
                  kept_true, truth.size(),
                  kept_true + kept_wrong ? double(kept_true) / double(kept_true + kept_wrong) : 1.0);
    }
  }
}

// One labelled picture of tests/data/categorize_labels.csv or categorize_photos.csv.
struct LabelledPicture {
  std::string path;
  std::set<std::string> present;  // the COCO labels it holds (none: a negative)
  std::string set;                // its set, the optional third column ("photo", "cut-out")
};

// `path,label;label[,set]` lines; `#` starts a comment. A relative path is under
// FRAMEMILL_MEDIA_DIR (tools/media/fetch_photos.sh).
std::vector<LabelledPicture> CategorizeLabels(const std::string& csv) {
  std::ifstream in(csv);
  std::vector<LabelledPicture> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    LabelledPicture p;
    std::stringstream fields(line);
    std::string labels;
    std::getline(fields, p.path, ',');
    std::getline(fields, labels, ',');
    if (!std::getline(fields, p.set, ',') || p.set.empty()) p.set = "all";
    std::stringstream each(labels);
    for (std::string label; std::getline(each, label, ';');)
      if (!label.empty()) p.present.insert(label);
    if (!p.path.empty() && p.path[0] != '/') {
      const char* media = std::getenv("FRAMEMILL_MEDIA_DIR");
      p.path = std::string(media != nullptr && *media != '\0' ? media : FRAMEMILL_SOURCE_DIR "/.cache/media") + "/" +
               p.path;
    }
    out.push_back(std::move(p));
  }
  return out;
}

// One labelled picture as the categorize stage saw it.
struct SeenPicture {
  std::map<std::string, double> best;  // label -> best score
  std::set<std::string> present;       // the labels it holds (none: a negative)
  std::string set;
};

// Per threshold t (a label shown when its best object scores >= t): shown, right, precision
// twice (over every picture, and over the pictures with objects only: what a curator sees on
// a set of ordinary photos), recall, and the negatives' false labels apart. `title` names the
// pictures counted (every one, or one set).
void PrintPrecisionTable(const char* tag, const std::string& title, const std::vector<const SeenPicture*>& pictures) {
  size_t labelled = 0, negatives = 0;
  for (const SeenPicture* s : pictures) {
    labelled += s->present.size();
    negatives += s->present.empty();
  }
  std::printf("categorize_precision %s %s: %zu pictures, %zu labelled objects, %zu negatives\n", tag, title.c_str(),
              pictures.size(), labelled, negatives);
  std::printf("categorize_precision %s %9s %7s %7s %10s %12s %8s %22s %12s\n", tag, "min score", "shown", "right",
              "precision", "on objects", "recall", "negatives with a label", "false labels");
  for (double t = 0.2; t < 0.951; t += 0.05) {
    size_t shown = 0, right = 0, shown_on_objects = 0, noisy_negatives = 0, false_on_negatives = 0;
    for (const SeenPicture* s : pictures) {
      size_t n = 0;
      for (const auto& [label, score] : s->best) {
        if (score < t) continue;
        ++n;
        right += s->present.count(label);
      }
      shown += n;
      (s->present.empty() ? false_on_negatives : shown_on_objects) += n;
      noisy_negatives += s->present.empty() && n > 0;
    }
    std::printf("categorize_precision %s %9.2f %7zu %7zu %10.3f %12.3f %8.3f %15zu of %zu %12zu\n", tag, t, shown, right,
                shown ? double(right) / double(shown) : 1.0,
                shown_on_objects ? double(right) / double(shown_on_objects) : 1.0,
                labelled ? double(right) / double(labelled) : 0.0, noisy_negatives, negatives, false_on_negatives);
  }
}

// The ten labels most often labelled, each at thresholds 0.3 to 0.9 by 0.05: the pictures
// that hold it, those that show it, those right, precision and recall. A label shown on a
// picture that does not hold it is a false one, negatives included.
void PrintClassTable(const char* tag, const std::vector<const SeenPicture*>& pictures) {
  std::map<std::string, size_t> count;
  for (const SeenPicture* s : pictures)
    for (const std::string& label : s->present) ++count[label];
  std::vector<std::pair<size_t, std::string>> frequent;
  for (const auto& [label, n] : count) frequent.push_back({n, label});
  std::sort(frequent.begin(), frequent.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  frequent.resize(std::min<size_t>(frequent.size(), 10));
  std::printf("categorize_class %s %-14s %8s %9s %7s %7s %10s %8s\n", tag, "label", "pictures", "min score", "shown",
              "right", "precision", "recall");
  for (const auto& [n, label] : frequent) {
    for (double t = 0.3; t < 0.951; t += 0.05) {
      size_t shown = 0, right = 0;
      for (const SeenPicture* s : pictures) {
        const auto it = s->best.find(label);
        if (it == s->best.end() || it->second < t) continue;
        ++shown;
        right += s->present.count(label);
      }
      std::printf("categorize_class %s %-14s %8zu %9.2f %7zu %7zu %10.3f %8.3f\n", tag, label.c_str(), n, t, shown, right,
                  shown ? double(right) / double(shown) : 1.0, double(right) / double(n));
    }
  }
}

// The categorize stage as a worker runs it (CPU, every object down to 0.05 kept), once on each
// labelled picture, with `detector`: a line for each label it shows at 0.2 or more, the
// precision table for every picture and for each set, the ten most frequent labels' table.
void CategorizePrecision(const Flags& flags, const std::string& detector) {
  auto cache = std::make_shared<models::ModelCache>(flags.models);
  CategorizeOptions all;
  all.detector = detector;
  all.min_score = all.floor = 0.05;
  CategorizeStage stage(cache, ModelStageOptions{}, all);
  std::vector<SeenPicture> pictures;
  std::vector<double> ms;
  const char* tag = detector.c_str();
  for (const LabelledPicture& p : CategorizeLabels(flags.labels)) {
    const double t0 = NowMs();
    const Outcome out = stage.Run(bench::ImageJob("categorize", p.path));
    ms.push_back(NowMs() - t0);
    if (out.kind != Outcome::Kind::kDone) {
      std::printf("categorize_precision %s %s: %s\n", tag, p.path.c_str(), out.error.ToString().c_str());
      continue;
    }
    SeenPicture s{{}, p.present, p.set};
    for (const auto& o : out.result["objects"]) {
      double& b = s.best[o["label"].get<std::string>()];
      b = std::max(b, o["score"].get<double>());
    }
    for (const auto& [label, score] : s.best)
      if (score >= 0.2)
        std::printf("categorize_precision %s %-5s %-14s %.3f  %s\n", tag, p.present.count(label) ? "right" : "wrong",
                    label.c_str(), score, std::filesystem::path(p.path).filename().c_str());
    pictures.push_back(std::move(s));
  }
  std::sort(ms.begin(), ms.end());
  std::printf("categorize_precision %s: %s; the stage's median %.0f ms a picture (detector and content model, one "
              "thread)\n",
              tag, flags.labels.c_str(), ms.empty() ? 0.0 : ms[ms.size() / 2]);
  std::vector<const SeenPicture*> every;
  std::map<std::string, std::vector<const SeenPicture*>> by_set;
  for (const SeenPicture& s : pictures) {
    every.push_back(&s);
    by_set[s.set].push_back(&s);
  }
  PrintPrecisionTable(tag, "every picture", every);
  if (by_set.size() > 1)
    for (const auto& [set, members] : by_set) PrintPrecisionTable(tag, "set " + set, members);
  PrintClassTable(tag, every);
}

// The categorize results of the bench's pictures, as the store would hand them to dedup.
class MemoryResults : public ResultReader {
 public:
  std::vector<ExportRow> rows;
  Status ForEachResult(const std::string& stage, const std::function<Status(const ExportRow&)>& fn) override {
    for (const ExportRow& r : rows)
      if (stage.empty() || r.stage == stage) FM_RETURN_IF_ERROR(fn(r));
    return Status::OK();
  }
  Result<std::optional<ExportRow>> ResultOf(int64_t, const std::string&) override { return std::optional<ExportRow>(); }
};

// The distinct photos of the content sets: stereo pairs, sequence frames and pattern boards left out.
std::vector<std::string> DistinctPhotos() {
  const std::set<std::string> skip = {"basketball2.png", "aero3.jpg", "right07.jpg", "001.jpg", "002.jpg",
                                      "image.0001.pgm", "home.png", "aero_thresh_det.jpg", "image_0000.pgm",
                                      "AprilTag.pgm", "chaxis.jpg", "diamondsaxis.jpg", "gbaxis.jpg"};
  std::vector<std::string> out;
  for (const char* csv : {"/tests/data/content_labels.csv", "/tests/data/content_holdout.csv"}) {
    std::ifstream in(std::string(FRAMEMILL_SOURCE_DIR) + csv);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      const size_t comma = line.find(',');
      const std::string path = line.substr(0, comma), label = line.substr(comma + 1, 5);
      if (label != "photo" || skip.count(std::filesystem::path(path).filename().string())) continue;
      if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(path);
    }
  }
  return out;
}

void Dedup(const Flags& flags) {
  testing::TempDir tmp;
  const std::vector<std::string> kinds = {"half", "q30", "crop", "rot", "bright"};
  std::vector<std::string> files;
  std::map<std::string, std::pair<int, std::string>> truth;  // file -> (photo, kind)
  int photos = 0;
  for (const std::string& src : DistinctPhotos()) {
    cv::Mat im = cv::imread(src, cv::IMREAD_COLOR);
    if (im.empty() || std::min(im.cols, im.rows) < 100) continue;
    const int w = im.cols, h = im.rows, id = photos++;
    cv::Mat half, rot, bright;
    cv::resize(im, half, cv::Size(w / 2, h / 2), 0, 0, cv::INTER_AREA);
    cv::warpAffine(im, rot, cv::getRotationMatrix2D(cv::Point2f(w / 2.f, h / 2.f), 3, 1), im.size(),
                   cv::INTER_LINEAR, cv::BORDER_REFLECT);
    im.convertTo(bright, -1, 1.0, 30);
    auto put = [&](const std::string& kind, const cv::Mat& m, int quality) {
      const std::string f = tmp / (std::to_string(id) + "-" + kind + ".jpg");
      cv::imwrite(f, m, {cv::IMWRITE_JPEG_QUALITY, quality});
      files.push_back(f);
      truth[f] = {id, kind};
    };
    put("orig", im, 95);
    put("half", half, 95);
    put("q30", im, 30);
    put("crop", im(cv::Rect(w / 20, h / 20, w - w / 10, h - h / 10)).clone(), 95);
    put("rot", rot, 95);
    put("bright", bright, 95);
  }
  auto cache = std::make_shared<models::ModelCache>(flags.models);
  CategorizeStage categorize(cache, ModelStageOptions{}, CategorizeOptions{});
  MemoryResults results;
  const double t0 = bench::NowMs();
  for (size_t b = 0; b < files.size(); b += 16) {
    std::vector<ClaimedJob> jobs;
    for (size_t i = b; i < std::min(files.size(), b + 16); ++i) {
      ClaimedJob j = bench::ImageJob("categorize", files[i]);
      j.id = static_cast<int64_t>(i + 1);
      j.size = static_cast<int64_t>(std::filesystem::file_size(files[i]));
      jobs.push_back(j);
    }
    const auto outs = categorize.RunBatch(jobs, StageContext{});
    for (size_t k = 0; k < outs.size(); ++k)
      if (outs[k].kind == Outcome::Kind::kDone)
        results.rows.push_back({jobs[k].source, "categorize", "cpu", outs[k].result.dump(), "[]", 1, 0});
  }
  const double t1 = bench::NowMs();
  DedupStage dedup{DedupOptions{}};
  StageContext ctx;
  ctx.results = &results;
  const auto out = dedup.RunBatch({bench::ImageJob("dedup", "dataset:")}, ctx);
  const double t2 = bench::NowMs();
  if (out.empty() || out[0].kind != Outcome::Kind::kDone) {
    std::printf("dedup: %s\n", out.empty() ? "no outcome" : out[0].error.ToString().c_str());
    return;
  }
  const auto& r = out[0].result;
  std::map<std::string, int> group_of;  // file -> group
  int mixed = 0;
  for (const auto& g : r["groups"]) {
    std::set<int> photos_in;
    const int id = g["id"].get<int>();
    group_of[g["representative"]["item"].get<std::string>()] = id;
    photos_in.insert(truth[g["representative"]["item"].get<std::string>()].first);
    for (const auto& m : g["members"]) {
      group_of[m["item"].get<std::string>()] = id;
      photos_in.insert(truth[m["item"].get<std::string>()].first);
    }
    if (photos_in.size() > 1) {
      ++mixed;
      std::printf("dedup  group %d joins %zu distinct photos\n", id, photos_in.size());
    }
  }
  std::printf("dedup  %d distinct photos x 6 = %zu pictures; categorize %.0f ms, dedup %.0f ms; pairs %s\n", photos,
              files.size(), t1 - t0, t2 - t1, r["pairs"].dump().c_str());
  std::printf("dedup  %-8s %s\n", "copy", "grouped with its original");
  int all = 0, all_ok = 0;
  for (const std::string& kind : kinds) {
    int n = 0, ok = 0;
    for (const auto& [file, t] : truth) {
      if (t.second != kind) continue;
      const std::string orig = tmp / (std::to_string(t.first) + "-orig.jpg");
      ++n;
      ok += group_of.count(file) && group_of.count(orig) && group_of[file] == group_of[orig];
    }
    all += n, all_ok += ok;
    std::printf("dedup  %-8s %d of %d (%.3f)\n", kind.c_str(), ok, n, n ? double(ok) / n : 0.0);
  }
  std::printf("dedup  all      %d of %d (%.3f); groups joining distinct photos: %d of %zu\n", all_ok, all,
              all ? double(all_ok) / all : 0.0, mixed, r["groups"].size());
}

int Main(int argc, char** argv) {
  Flags flags;
  if (!bench::ParseFlags("models_bench", argc, argv,
                         {{"--benchmarks=", &flags.benchmarks}, {"--models=", &flags.models},
                          {"--only=", &flags.only}, {"--detectors=", &flags.detectors}, {"--labels=", &flags.labels}, {"--image=", &flags.image},
                          {"--reps=", &flags.reps, 1}, {"--batch=", &flags.batch, 1},
                          {"--threads=", &flags.threads, 0}}))
    return 2;
  if (flags.threads > 0) omp_set_num_threads(flags.threads);
  // As a worker keeps it (scheduler/supervisor.cc, KeepFreedMemory): freed buffers up to 32 MB
  // stay in the heap, so each forward's output tensors are not fresh pages to fault in.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
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
  std::printf("cpu:          %u hardware threads; OpenCV threads %d; OpenMP (oneDNN) threads %d; oneDNN ISA %s; "
              "bf16 %s\n",
              std::thread::hardware_concurrency(), cv::getNumThreads(), omp_get_max_threads(), engine::CpuIsa().c_str(),
              engine::CpuHasBf16() ? "yes" : "no");
  std::printf("malloc:       freed memory kept up to 32 MB a block, as in a worker\n");
  std::printf("reps:         median of %d after a warm-up; batch %d\n", flags.reps, flags.batch);
  std::printf("------------------------------------------------------------------\n");
  if (installed.empty()) {
    std::fprintf(stderr, "models_bench: no models installed: run `framemill models fetch`\n");
    return 2;
  }
  if (Listed(flags.benchmarks, "faces")) Faces(flags);
  if (Listed(flags.benchmarks, "faces_precision")) FacesPrecision(flags);
  if (Listed(flags.benchmarks, "categorize_precision")) {
    std::stringstream detectors(flags.detectors);
    for (std::string d; std::getline(detectors, d, ',');) CategorizePrecision(flags, d);
  }
  if (Listed(flags.benchmarks, "dedup")) Dedup(flags);
  for (const std::string& w : {std::string("engine"), std::string("dnn"), std::string("engine_cpu"), std::string("plan"),
                               std::string("profile")}) {
    if (!Listed(flags.benchmarks, w)) continue;
    for (const auto& m : installed) {
      if (w == "engine") EngineDnnl(flags, m, photo);
      if (w == "dnn") Dnn(flags, m, photo);
      if (w == "engine_cpu") EngineCpu(flags, m, photo);
      if (w == "plan") PlanBytes(m);
      if (w == "profile") Profile(flags, m, photo);
    }
  }
  return 0;
}

}  // namespace
}  // namespace framemill

int main(int argc, char** argv) { return framemill::Main(argc, argv); }
