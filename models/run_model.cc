#include "models/run_model.h"

#include <cstring>
#include <functional>

namespace framemill::models {

namespace {

// Items [begin, end) of the batch on one runner.
using RunPart = std::function<Result<BatchOutputs>(ModelRunner& runner, size_t begin, size_t end)>;

// The ladder's loop, written once for images and prepared tensors: `count` items of
// `pixels` input values each, sliced as the ladder decides, each slice on the device it
// picked (the model's engine there, borrowed from the cache) or on `cpu`.
Result<BatchOutputs> RunSliced(ModelCache& cache, ModelRunner& cpu, size_t count, int64_t pixels,
                               const RunPart& part, gpu::OomLadder* ladder, std::string* device,
                               const std::string& operation) {
  const ModelManifest& m = cpu.manifest();
  const std::string& op = operation.empty() ? m.operation : operation;
  // With a ladder, everything goes through it, even while the operation is parked on the
  // CPU after repeated failures: the ladder counts those items as CPU fallbacks.
  if (ladder == nullptr || op.empty()) {
    *device = cpu.device();
    return part(cpu, 0, count);
  }

  // The batch tuner's first guess of device bytes per item is the engine's memory plan,
  // known before anything runs: open the engine now if the device will be tried. An open
  // that fails is left to the ladder (it fails again inside the slice, as OutOfMemory
  // where the weights do not fit, and the ladder steps down).
  int64_t guess = 0;
  if (gpu::ComputeBackend* gpu = ladder->gpu(); gpu != nullptr && ladder->OnDevice(op)) {
    if (auto engine = cache.Borrow(m.name, gpu); engine.ok()) guess = (*engine)->BatchBytesPerImage();
  }

  std::vector<BatchOutputs> slices(count);  // by first index of the slice that ran it
  auto run = [&](gpu::ComputeBackend& backend, size_t begin, size_t end) -> Status {
    Result<BatchOutputs> out = Status::Internal("not run");
    if (!backend.is_gpu()) {
      out = part(cpu, begin, end);
    } else {
      auto engine = cache.Borrow(m.name, &backend);
      if (!engine.ok()) return engine.status();
      out = part(**engine, begin, end);
    }
    if (!out.ok()) return out.status();
    if (out->size() != end - begin)
      return Status::Internal("model " + m.name + " gave outputs for " +
                              std::to_string(out->size()) + " of " + std::to_string(end - begin) +
                              " items");
    slices[begin] = std::move(out).value();
    return Status::OK();
  };
  std::vector<std::string> device_of;
  FM_RETURN_IF_ERROR(ladder->Run(op, count, pixels, guess, run, &device_of));

  BatchOutputs all;
  all.reserve(count);
  for (size_t i = 0; i < count;) {
    const size_t n = slices[i].size();
    if (n == 0) return Status::Internal("model " + m.name + ": an item was not run");
    for (auto& o : slices[i]) all.push_back(std::move(o));
    i += n;
  }
  *device = device_of.empty() ? cpu.device() : gpu::OneDevice(device_of);
  return all;
}

}  // namespace

Result<BatchOutputs> RunModel(ModelCache& cache, ModelRunner& cpu, const std::vector<cv::Mat>& bgr,
                              gpu::OomLadder* ladder, std::string* device,
                              const std::string& operation) {
  const ModelManifest& m = cpu.manifest();
  const int64_t pixels = static_cast<int64_t>(m.preprocess.width) * m.preprocess.height;
  auto part = [&](ModelRunner& runner, size_t begin, size_t end) {
    return runner.Run(std::vector<cv::Mat>(bgr.begin() + static_cast<long>(begin),
                                           bgr.begin() + static_cast<long>(end)));
  };
  return RunSliced(cache, cpu, bgr.size(), pixels, part, ladder, device, operation);
}

Result<BatchOutputs> RunModelOnTensor(ModelCache& cache, ModelRunner& cpu, const gpu::Tensor& nchw,
                                      gpu::OomLadder* ladder, std::string* device,
                                      const std::string& operation) {
  if (nchw.shape.size() != 4 || nchw.type != gpu::TensorType::kFloat32 || nchw.shape[0] < 0)
    return Status::InvalidArgument("model " + cpu.manifest().name + ": input must be NCHW fp32");
  const size_t count = static_cast<size_t>(nchw.shape[0]);
  if (count == 0) return BatchOutputs{};
  const size_t row = nchw.data.size() / count;  // bytes per item
  auto part = [&](ModelRunner& runner, size_t begin, size_t end) {
    gpu::Tensor slice{nchw.shape, nchw.type, {}};
    slice.shape[0] = static_cast<int64_t>(end - begin);
    slice.data.assign(nchw.data.begin() + static_cast<long>(begin * row),
                      nchw.data.begin() + static_cast<long>(end * row));
    return runner.RunTensor(slice);
  };
  return RunSliced(cache, cpu, count, static_cast<int64_t>(row / 4), part, ladder, device, operation);
}

}  // namespace framemill::models
