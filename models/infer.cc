#include "models/infer.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "models/catalog.h"
#include "models/decode.h"
#include "models/dnn_model.h"
#include "models/engine_model.h"
#include "gpu/compute_backend.h"
#include "models/manifest.h"

namespace framemill::models {
namespace {

constexpr int kExitUsage = 2;
constexpr int kExitSomeFailed = 3;

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

}  // namespace

int RunInfer(const InferOptions& opts, const Config& cfg, std::ostream& out, std::ostream& err) {
  if (opts.model.empty()) {
    err << "infer: --model is required (one of: " << CatalogModelNames() << ")\n";
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
  const std::string dir = cfg.models + "/" + opts.model;
  auto man = LoadManifest(dir);
  if (!man.ok()) {
    const bool known = FindModel(opts.model) != nullptr;
    if (!man.status().IsNotFound())
      err << "infer: model '" << opts.model << "' in " << dir << ": " << man.status().ToString()
          << "; run `framemill models fetch` to reinstall it\n";
    else if (known)
      err << "infer: model '" << opts.model << "' is not installed in " << cfg.models
          << " (FRAMEMILL_MODELS); run `framemill models fetch`\n";
    else
      err << "infer: unknown model '" << opts.model << "' (--model; known: " << CatalogModelNames()
          << ")\n";
    return kExitUsage;
  }
  // --device cpu: OpenCV DNN. --device gpu: our engine on CUDA device GPU_DEVICE_ID, with
  // the fused preprocessing kernel and fp16 storage.
  std::unique_ptr<DnnModel> dnn;
  std::unique_ptr<gpu::ComputeBackend> backend;
  std::unique_ptr<EngineModel> engine;
  std::string device = "cpu";
  if (opts.device == "cpu") {
    auto model = DnnModel::Open(*man);
    if (!model.ok()) {
      err << "infer: " << model.status().ToString() << "\n";
      return kExitUsage;
    }
    dnn = std::move(model).value();
  } else {
    auto b = gpu::MakeCudaBackend(cfg.gpu.device_id);
    if (!b.ok()) {
      err << "infer: --device gpu: no CUDA device " << cfg.gpu.device_id << ": "
          << b.status().message() << "\n";
      return kExitUsage;
    }
    backend = std::move(b).value();
    if (cfg.gpu.memory_limit_gb > 0)
      backend->SetMemoryLimit(static_cast<int64_t>(cfg.gpu.memory_limit_gb * (1LL << 30)));
    auto e = EngineModel::Open(*man, *backend);
    if (!e.ok()) {
      err << "infer: --device gpu: " << e.status().ToString() << "\n";
      return kExitSomeFailed;
    }
    engine = std::move(e).value();
    device = backend->device();
  }
  auto run = [&](const std::vector<cv::Mat>& mats) {
    return dnn ? dnn->Run(mats) : engine->Run(mats);
  };

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
    auto res = run(mats);
    total_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!res.ok()) {
      err << "infer: " << res.status().ToString() << "\n";
      rc = kExitSomeFailed;
      continue;
    }
    ran += static_cast<int>(mats.size());
    for (size_t b = 0; b < mats.size(); ++b) {
      nlohmann::json r = {{"image", names[b]}};
      nlohmann::json outs = nlohmann::json::object();
      for (const auto& t : res.value()[b]) outs[t.name] = {{"shape", t.shape}, {"data", t.data}};
      auto dec = DecodeOutputs(*man, res.value()[b], mats[b].size());
      if (dec.ok()) {
        r["decoded"] = *dec;
      } else {
        err << "infer: " << names[b] << ": decode: " << dec.status().ToString() << "\n";
        rc = kExitSomeFailed;
      }
      if (opts.json) {
        r["outputs"] = std::move(outs);
        results.push_back(std::move(r));
      } else {
        out << names[b] << " (" << mats[b].cols << "x" << mats[b].rows << "):";
        for (const auto& t : res.value()[b]) {
          out << " " << t.name << "[";
          for (size_t d = 0; d < t.shape.size(); ++d) out << (d ? "x" : "") << t.shape[d];
          out << "]";
        }
        if (r.contains("decoded")) {
          std::string s = Summary(r["decoded"]);
          if (!s.empty()) out << " -> " << s;
        }
        out << "\n";
      }
    }
  }
  if (opts.json) {
    nlohmann::json doc = {{"model", man->name.empty() ? opts.model : man->name},
                          {"device", device},
                          {"ms_per_image", ran ? total_ms / ran : 0.0},
                          {"results", std::move(results)}};
    out << doc.dump() << "\n";
  } else if (ran) {
    out << opts.model << " on " << device << ": " << std::fixed << std::setprecision(1) << total_ms / ran
        << " ms per image (" << ran << " image(s))\n";
  }
  return rc;
}

}  // namespace framemill::models
