#include "stages/model_device.h"

#include <map>
#include <memory>

#include "gpu/compute_backend.h"
#include "models/engine_model.h"

namespace framemill {
namespace {

using Outputs = std::vector<std::vector<models::OutputTensor>>;

// Engines loaded by this thread, by device backend and model. An engine keeps its
// weights on the device between batches; loading costs a read of the graph file.
std::map<std::string, std::unique_ptr<models::EngineModel>>& ThreadEngines() {
  thread_local std::map<std::string, std::unique_ptr<models::EngineModel>> engines;
  return engines;
}

std::string EngineKey(const gpu::ComputeBackend& backend, const models::ModelManifest& m) {
  return std::to_string(reinterpret_cast<uintptr_t>(&backend)) + "|" + backend.device() + "|" +
         m.graph_file;
}

// The loaded engine of `m` on `backend`, loading it on first use. An OutOfMemory while
// loading (the weights do not fit) comes back as it is, for the ladder to act on.
Result<models::EngineModel*> EngineFor(gpu::ComputeBackend& backend,
                                       const models::ModelManifest& m) {
  auto& engines = ThreadEngines();
  const std::string key = EngineKey(backend, m);
  if (auto it = engines.find(key); it != engines.end()) return it->second.get();
  auto model = models::EngineModel::Open(m, backend);
  if (!model.ok()) return model.status();
  models::EngineModel* e = model->get();
  engines[key] = std::move(model).value();
  return e;
}

}  // namespace

Result<Outputs> RunModel(ModelRunner& cpu_runner, const std::vector<cv::Mat>& bgr,
                         const StageContext& ctx, std::string* device) {
  const models::ModelManifest& m = cpu_runner.manifest();
  const std::string& op = m.operation;
  // With a ladder, everything goes through it, even while the operation is parked on the
  // CPU after repeated failures: the ladder counts those items as CPU fallbacks.
  if (ctx.ladder == nullptr || op.empty()) {
    *device = cpu_runner.device();
    return cpu_runner.Run(bgr);
  }

  // The batch tuner's first guess of device bytes per image is the engine's memory plan,
  // known before anything runs: load the engine now if the device will be tried. A load
  // that fails is left to the ladder (it fails again inside the slice, as OutOfMemory
  // where the weights do not fit, and the ladder steps down).
  int64_t guess = 0;
  if (gpu::ComputeBackend* gpu = ctx.ladder->gpu(); gpu != nullptr && ctx.ladder->OnDevice(op)) {
    if (auto engine = EngineFor(*gpu, m); engine.ok()) guess = (*engine)->BatchBytesPerImage();
  }
  const int64_t pixels = static_cast<int64_t>(m.preprocess.width) * m.preprocess.height;

  std::vector<Outputs> slices(bgr.size());  // by first index of the slice that ran it
  auto run = [&](gpu::ComputeBackend& backend, size_t begin, size_t end) -> Status {
    std::vector<cv::Mat> part(bgr.begin() + static_cast<long>(begin),
                              bgr.begin() + static_cast<long>(end));
    Outputs out;
    if (!backend.is_gpu()) {
      auto r = cpu_runner.Run(part);
      if (!r.ok()) return r.status();
      out = std::move(r).value();
    } else {
      auto engine = EngineFor(backend, m);
      if (!engine.ok()) return engine.status();
      auto r = (*engine)->Run(part);
      if (!r.ok()) return r.status();
      out = std::move(r).value();
    }
    if (out.size() != part.size())
      return Status::Internal("model " + m.name + " gave outputs for " +
                              std::to_string(out.size()) + " of " + std::to_string(part.size()) +
                              " images");
    slices[begin] = std::move(out);
    return Status::OK();
  };
  std::vector<std::string> device_of;
  FM_RETURN_IF_ERROR(ctx.ladder->Run(op, bgr.size(), pixels, guess, run, &device_of));

  Outputs all;
  all.reserve(bgr.size());
  for (size_t i = 0; i < bgr.size();) {
    const size_t n = slices[i].size();
    if (n == 0) return Status::Internal("model " + m.name + ": an image was not run");
    for (auto& o : slices[i]) all.push_back(std::move(o));
    i += n;
  }
  *device = device_of.empty() ? cpu_runner.device() : device_of.front();
  for (const std::string& d : device_of)
    if (d != *device) *device = "cpu";
  return all;
}

}  // namespace framemill
