#include "models/run_model.h"

namespace framemill::models {

Result<BatchOutputs> RunModel(ModelCache& cache, ModelRunner& cpu, const std::vector<cv::Mat>& bgr,
                              gpu::OomLadder* ladder, std::string* device,
                              const std::string& operation) {
  const ModelManifest& m = cpu.manifest();
  const std::string& op = operation.empty() ? m.operation : operation;
  // With a ladder, everything goes through it, even while the operation is parked on the
  // CPU after repeated failures: the ladder counts those items as CPU fallbacks.
  if (ladder == nullptr || op.empty()) {
    *device = cpu.device();
    return cpu.Run(bgr);
  }

  // The batch tuner's first guess of device bytes per image is the engine's memory plan,
  // known before anything runs: open the engine now if the device will be tried. An open
  // that fails is left to the ladder (it fails again inside the slice, as OutOfMemory
  // where the weights do not fit, and the ladder steps down).
  int64_t guess = 0;
  if (gpu::ComputeBackend* gpu = ladder->gpu(); gpu != nullptr && ladder->OnDevice(op)) {
    if (auto engine = cache.Borrow(m.name, gpu); engine.ok()) guess = (*engine)->BatchBytesPerImage();
  }
  const int64_t pixels = static_cast<int64_t>(m.preprocess.width) * m.preprocess.height;

  std::vector<BatchOutputs> slices(bgr.size());  // by first index of the slice that ran it
  auto run = [&](gpu::ComputeBackend& backend, size_t begin, size_t end) -> Status {
    std::vector<cv::Mat> part(bgr.begin() + static_cast<long>(begin),
                              bgr.begin() + static_cast<long>(end));
    Result<BatchOutputs> out = Status::Internal("not run");
    if (!backend.is_gpu()) {
      out = cpu.Run(part);
    } else {
      auto engine = cache.Borrow(m.name, &backend);
      if (!engine.ok()) return engine.status();
      out = (*engine)->Run(part);
    }
    if (!out.ok()) return out.status();
    if (out->size() != part.size())
      return Status::Internal("model " + m.name + " gave outputs for " +
                              std::to_string(out->size()) + " of " + std::to_string(part.size()) +
                              " images");
    slices[begin] = std::move(out).value();
    return Status::OK();
  };
  std::vector<std::string> device_of;
  FM_RETURN_IF_ERROR(ladder->Run(op, bgr.size(), pixels, guess, run, &device_of));

  BatchOutputs all;
  all.reserve(bgr.size());
  for (size_t i = 0; i < bgr.size();) {
    const size_t n = slices[i].size();
    if (n == 0) return Status::Internal("model " + m.name + ": an image was not run");
    for (auto& o : slices[i]) all.push_back(std::move(o));
    i += n;
  }
  *device = device_of.empty() ? cpu.device() : device_of.front();
  for (const std::string& d : device_of)
    if (d != *device) *device = "cpu";
  return all;
}

}  // namespace framemill::models
