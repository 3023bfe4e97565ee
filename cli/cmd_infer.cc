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

// Exit codes: 0 all images done; 2 usage/configuration (unknown or not installed model,
// bad device); 3 some images could not be read or run (the others are still printed).
int RunInfer(const InferOptions& opts, std::ostream& out, std::ostream& err) {
  if (opts.model.empty()) {
    err << "infer: --model is required (one of: " << models::CatalogModelNames() << ")\n";
    return kExitUsage;
  }
  if (opts.device != "cpu" && opts.device != "gpu") {
    err << "infer: --device must be cpu or gpu, not '" << opts.device << "'\n";
    return kExitUsage;
  }
  if (opts.images.empty()) {
    err << "infer: no IMAGE given\n";
    return kExitUsage;
  }
  auto man = FindManifest(opts);
  if (!man.ok()) {
    err << "infer: " << man.status().message() << "\n";
    return kExitUsage;
  }
  // --device cpu: OpenCV DNN. --device gpu: our engine on CUDA device GPU_DEVICE_ID, with
  // the fused preprocessing kernel and fp16 storage.
  std::unique_ptr<gpu::ComputeBackend> backend;
  if (opts.device == "gpu") {
    auto b = gpu::MakeCudaBackend(opts.gpu.device_id);
    if (!b.ok()) {
      err << "infer: --device gpu: no CUDA device " << opts.gpu.device_id << ": "
          << b.status().message() << "\n";
      return kExitUsage;
    }
    backend = std::move(b).value();
    if (opts.gpu.memory_limit_gb > 0)
      backend->SetMemoryLimit(static_cast<int64_t>(opts.gpu.memory_limit_gb * (1LL << 30)));
  }
  auto runner = models::OpenRunner(*man, backend.get());
  if (!runner.ok()) {
    err << "infer: " << (backend ? "--device gpu: " : "") << runner.status().ToString() << "\n";
    return backend ? kExitSomeFailed : kExitUsage;
  }
  const std::string device = (*runner)->device();

  int rc = 0;
  nlohmann::json results = nlohmann::json::array();
  const int batch = std::max(1, man->batchable ? opts.batch : 1);
  double total_ms = 0;
  int ran = 0;
  for (size_t start = 0; start < opts.images.size(); start += batch) {
    std::vector<cv::Mat> mats;
    std::vector<std::string> names;
    for (size_t i = start; i < std::min(opts.images.size(), start + batch); ++i) {
      cv::Mat m = cv::imread(opts.images[i], cv::IMREAD_COLOR);
      if (m.empty()) {
        err << "infer: cannot read image '" << opts.images[i] << "'\n";
        rc = kExitSomeFailed;
        continue;
      }
      mats.push_back(std::move(m));
      names.push_back(opts.images[i]);
    }
    if (mats.empty()) continue;
    auto t0 = std::chrono::steady_clock::now();
    auto res = (*runner)->Run(mats);
    total_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!res.ok()) {
      err << "infer: " << res.status().ToString() << "\n";
      rc = kExitSomeFailed;
      continue;
    }
    ran += static_cast<int>(mats.size());
    for (size_t b = 0; b < mats.size(); ++b)
      if (!Report(opts, *man, names[b], mats[b], (*res)[b], &results, out, err)) rc = kExitSomeFailed;
  }
  if (opts.json) {
    nlohmann::json doc = {{"model", man->name.empty() ? opts.model : man->name},
                          {"device", device},
                          {"ms_per_image", ran ? total_ms / ran : 0.0},
                          {"results", std::move(results)}};
    out << JsonDump(doc) << "\n";
  } else if (ran) {
    out << opts.model << " on " << device << ": " << std::fixed << std::setprecision(1)
        << total_ms / ran << " ms per image (" << ran << " image(s))\n";
  }
  return rc;
}

}  // namespace

int CmdInfer(const Flags& f) {
  auto env = Resolve(f);
  if (!env.ok()) return UsageError(env.status().message());
  InferOptions o;
  o.model = f.model;
  o.device = f.device;
  o.json = f.json;
  o.images = f.sources;
  if (f.batch) o.batch = *f.batch;
  o.models_dir = env->config.models;
  o.gpu = ToGpuOptions(env->config);
  return RunInfer(o, std::cout, std::cerr);
}

}  // namespace framemill
