// `framemill infer`: runs one installed model on images and prints its raw outputs and
// the model's decode (models/decode.h, the entry point the stages use), as the contract
// says. Each call opens its own model.
#include "cli/command.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "base/exit_code.h"
#include "base/json_text.h"
#include "cli/infer_graph.h"
#include "cli/options.h"
#include "gpu/compute_backend.h"
#include "models/catalog.h"
#include "models/decode.h"
#include "models/manifest.h"
#include "models/model_cache.h"

namespace framemill {
namespace {

using models::ModelManifest;

struct InferOptions {
  std::string model;
  std::string device = "cpu";  // "cpu" | "gpu"
  bool json = false;
  std::vector<std::string> images;
  int batch = 8;               // images per forward on batchable models
  std::string models_dir;      // FRAMEMILL_MODELS
  gpu::GpuOptions gpu;         // device_id and memory_limit_gb, for --device gpu
};

constexpr int kExitUsage = ToInt(ExitCode::kUsage);
constexpr int kExitSomeFailed = ToInt(ExitCode::kSomeFailed);

std::string Summary(const nlohmann::json& d) {
  if (d.is_null()) return "";
  std::ostringstream s;
  s << std::setprecision(3);
  if (d.contains("faces")) s << d["faces"].size() << " face(s)";
  if (d.contains("detections")) {
    s << d["detections"].size() << " object(s)";
    for (const auto& x : d["detections"])
      s << " " << x["label"].get<std::string>() << "(" << x["score"].get<float>() << ")";
  }
  if (d.contains("keypoints")) s << d["keypoints"].size() << " keypoints";
  if (d.contains("landmarks")) s << d["landmarks"].size() << " landmarks";
  if (d.contains("coverage")) s << "mask covers " << 100 * d["coverage"].get<double>() << "%";
  if (d.contains("embedding")) s << d["embedding"].size() << "-d embedding";
  if (d.contains("age")) s << ", age " << d["age"].get<float>() << ", " << d["gender"].get<std::string>();
  return s.str();
}

// The manifest of the model asked for, or the message saying why there is none.
Result<ModelManifest> FindManifest(const InferOptions& opts) {
  const std::string dir = opts.models_dir + "/" + opts.model;
  auto man = models::LoadManifest(dir);
  if (man.ok()) return man;
  if (!man.status().IsNotFound())
    return Status::InvalidArgument("model '" + opts.model + "' in " + dir + ": " +
                                   man.status().ToString() +
                                   "; run `framemill models fetch` to reinstall it");
  if (models::FindModel(opts.model) != nullptr)
    return Status::InvalidArgument("model '" + opts.model + "' is not installed in " +
                                   opts.models_dir + " (FRAMEMILL_MODELS); run `framemill models fetch`");
  return Status::InvalidArgument("unknown model '" + opts.model + "' (--model; known: " +
                                 models::CatalogModelNames() + ")");
}

// One image's line (or JSON object): raw outputs and the decode. False when the decode failed.
bool Report(const InferOptions& opts, const ModelManifest& man, const std::string& name,
            const cv::Mat& image, const std::vector<models::OutputTensor>& outs,
            nlohmann::json* results, std::ostream& out, std::ostream& err) {
  nlohmann::json r = {{"image", name}};
  auto dec = models::DecodeOutputs(man, outs, image.size());
  if (dec.ok()) r["decoded"] = *dec;
  else err << "infer: " << name << ": decode: " << dec.status().ToString() << "\n";
  if (opts.json) {
    nlohmann::json raw = nlohmann::json::object();
    for (const auto& t : outs) raw[t.name] = {{"shape", t.shape}, {"data", t.data}};
    r["outputs"] = std::move(raw);
    results->push_back(std::move(r));
    return dec.ok();
  }
  out << name << " (" << image.cols << "x" << image.rows << "):";
  for (const auto& t : outs) {
    out << " " << t.name << "[";
    for (size_t d = 0; d < t.shape.size(); ++d) out << (d ? "x" : "") << t.shape[d];
    out << "]";
  }
  if (r.contains("decoded")) {
    std::string s = Summary(r["decoded"]);
    if (!s.empty()) out << " -> " << s;
  }
  out << "\n";
  return dec.ok();
}

// The flags' own mistakes, before anything is loaded: a usage message, or "" when fine.
std::string UsageProblem(const InferOptions& opts) {
  if (opts.model.empty())
    return "--model is required (one of: " + models::CatalogModelNames() + ")";
  if (opts.device != "cpu" && opts.device != "gpu")
    return "--device must be cpu or gpu, not '" + opts.device + "'";
  if (opts.images.empty()) return "no IMAGE given";
  return "";
}

// --device cpu: OpenCV DNN (no backend). --device gpu: our engine on CUDA device
// GPU_DEVICE_ID, with the fused preprocessing kernel and fp16 storage.
Result<std::unique_ptr<gpu::ComputeBackend>> OpenBackend(const InferOptions& opts) {
  if (opts.device != "gpu") return std::unique_ptr<gpu::ComputeBackend>();
  auto b = gpu::MakeCudaBackend(opts.gpu.device_id);
  if (!b.ok())
    return Status::InvalidArgument("--device gpu: no CUDA device " +
                                   std::to_string(opts.gpu.device_id) + ": " +
                                   b.status().message());
  if (opts.gpu.memory_limit_gb > 0)
    (*b)->SetMemoryLimit(static_cast<int64_t>(opts.gpu.memory_limit_gb * (1LL << 30)));
  return b;
}

struct InferRun {  // what the images' batches came to
  int rc = 0;
  int ran = 0;
  double total_ms = 0;
  nlohmann::json results = nlohmann::json::array();
};

// Reads and runs images [start, start + batch), reporting each; unreadable ones and failed
// batches set rc to kExitSomeFailed, the others still run.
void RunBatch(const InferOptions& opts, const models::ModelManifest& man,
              models::ModelRunner& runner, size_t start, size_t batch, InferRun* run,
              std::ostream& out, std::ostream& err) {
  std::vector<cv::Mat> mats;
  std::vector<std::string> names;
  for (size_t i = start; i < std::min(opts.images.size(), start + batch); ++i) {
    cv::Mat m = cv::imread(opts.images[i], cv::IMREAD_COLOR);
    if (m.empty()) {
      err << "infer: cannot read image '" << opts.images[i] << "'\n";
      run->rc = kExitSomeFailed;
      continue;
    }
    mats.push_back(std::move(m));
    names.push_back(opts.images[i]);
  }
  if (mats.empty()) return;
  auto t0 = std::chrono::steady_clock::now();
  auto res = runner.Run(mats);
  run->total_ms +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!res.ok()) {
    err << "infer: " << res.status().ToString() << "\n";
    run->rc = kExitSomeFailed;
    return;
  }
  run->ran += static_cast<int>(mats.size());
  for (size_t b = 0; b < mats.size(); ++b)
    if (!Report(opts, man, names[b], mats[b], (*res)[b], &run->results, out, err))
      run->rc = kExitSomeFailed;
}

// Exit codes: 0 all images done; 2 usage/configuration (unknown or not installed model,
// bad device); 3 some images could not be read or run (the others are still printed).
int RunInfer(const InferOptions& opts, std::ostream& out, std::ostream& err) {
  if (std::string why = UsageProblem(opts); !why.empty()) {
    err << "infer: " << why << "\n";
    return kExitUsage;
  }
  auto man = FindManifest(opts);
  if (!man.ok()) {
    err << "infer: " << man.status().message() << "\n";
    return kExitUsage;
  }
  auto backend = OpenBackend(opts);
  if (!backend.ok()) {
    err << "infer: " << backend.status().message() << "\n";
    return kExitUsage;
  }
  auto runner = models::OpenRunner(*man, backend->get());
  if (!runner.ok()) {
    err << "infer: " << (*backend ? "--device gpu: " : "") << runner.status().ToString() << "\n";
    return *backend ? kExitSomeFailed : kExitUsage;
  }
  InferRun run;
  const size_t batch = std::max(1, man->batchable ? opts.batch : 1);
  for (size_t start = 0; start < opts.images.size(); start += batch)
    RunBatch(opts, *man, **runner, start, batch, &run, out, err);
  const std::string device = (*runner)->device();
  if (opts.json) {
    nlohmann::json doc = {{"model", man->name.empty() ? opts.model : man->name},
                          {"device", device},
                          {"ms_per_image", run.ran ? run.total_ms / run.ran : 0.0},
                          {"results", std::move(run.results)}};
    out << JsonDump(doc) << "\n";
  } else if (run.ran) {
    out << opts.model << " on " << device << ": " << std::fixed << std::setprecision(1)
        << run.total_ms / run.ran << " ms per image (" << run.ran << " image(s))\n";
  }
  return run.rc;
}

}  // namespace

int CmdInfer(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  if (!f.inputs_dir.empty()) {
    if (!f.sources.empty()) return UsageError("infer: --inputs takes no IMAGE");
    GraphInferOptions g;
    g.model = f.model;
    g.inputs_dir = f.inputs_dir;
    g.device = f.device;
    g.device_id = env->config.run.gpu.device_id;
    g.json = f.json;
    return RunGraphInfer(g, std::cout, std::cerr);
  }
  InferOptions o;
  o.model = f.model;
  o.device = f.device;
  o.json = f.json;
  o.images = f.sources;
  if (f.batch) o.batch = *f.batch;
  o.models_dir = env->config.models();
  o.gpu = env->config.run.gpu;
  return RunInfer(o, std::cout, std::cerr);
}

}  // namespace framemill
