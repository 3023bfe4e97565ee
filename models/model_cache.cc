#include "models/model_cache.h"

#include "base/time_split.h"
#include "models/catalog.h"
#include "models/engine_model.h"

namespace framemill::models {
namespace {

class EngineRunner : public ModelRunner {
 public:
  // `own`: the backend the model runs on, when the runner owns it (the CPU's).
  explicit EngineRunner(std::unique_ptr<EngineModel> m, std::unique_ptr<gpu::ComputeBackend> own = nullptr)
      : own_(std::move(own)), model_(std::move(m)) {}
  const ModelManifest& manifest() const override { return model_->manifest(); }
  std::string device() const override { return model_->device(); }
  Result<std::vector<std::vector<OutputTensor>>> Run(const std::vector<cv::Mat>& bgr) override {
    return model_->Run(bgr);
  }
  Result<std::vector<std::vector<OutputTensor>>> RunTensor(const gpu::Tensor& nchw) override {
    return model_->RunTensor(nchw);
  }
  int64_t BatchBytesPerImage() override { return own_ ? 0 : model_->BatchBytesPerImage(); }
  bool batchable() const override { return model_->batched(); }

 private:
  std::unique_ptr<gpu::ComputeBackend> own_;  // before model_: destroyed after it
  std::unique_ptr<EngineModel> model_;
};

}  // namespace

Result<std::unique_ptr<ModelRunner>> OpenRunner(const ModelManifest& manifest,
                                                gpu::ComputeBackend* device,
                                                const std::string& cpu_precision) {
  if (device == nullptr) {  // the CPU: our engine on its oneDNN kernels, a backend of its own
    std::unique_ptr<gpu::ComputeBackend> cpu =
        gpu::MakeCpuBackend({.bf16 = PrecisionOnCpu(manifest.name, cpu_precision).precision == "bf16"});
    auto m = EngineModel::Open(manifest, *cpu);
    if (m.status().IsCorruption())  // a damaged model: its jobs fail for good, saying which file
      return Status::Corruption("model " + manifest.name + ": cannot load '" + manifest.graph_file +
                                "': " + m.status().message());
    if (!m.ok()) return m.status();
    return std::unique_ptr<ModelRunner>(new EngineRunner(std::move(m).value(), std::move(cpu)));
  }
  auto e = EngineModel::Open(manifest, *device);
  if (!e.ok()) return e.status();
  return std::unique_ptr<ModelRunner>(new EngineRunner(std::move(e).value()));
}

ModelCache::Lease::~Lease() {
  if (cache_ != nullptr && runner_ != nullptr) cache_->Return(key_, device_, std::move(runner_));
}

ModelCache::ModelCache(std::string models_dir, RunnerFactory factory,
                       std::chrono::milliseconds recheck)
    : store_(models_dir), factory_(std::move(factory)), recheck_(recheck) {
  if (!factory_)
    factory_ = [](const ModelManifest& m, gpu::ComputeBackend* device) { return OpenRunner(m, device); };
}

std::string ModelCache::KeyOf(const std::string& name, const gpu::ComputeBackend* device) {
  // The backend's address tells two devices (or two runtimes) apart.
  return device == nullptr ? name + "@cpu"
                           : name + "@" + device->device() + "#" +
                                 std::to_string(reinterpret_cast<uintptr_t>(device));
}

Result<ModelManifest> ModelCache::Resolve(const std::string& name) {
  {
    std::lock_guard<std::mutex> l(mu_);
    Model& m = models_[name];
    if (m.resolved && !m.manifest.name.empty()) return m.manifest;
    if (m.resolved && !m.status.ok() && std::chrono::steady_clock::now() - m.failed_at < recheck_)
      return m.status;
  }
  // Reading the manifest touches the disk: outside the lock.
  auto manifest = store_.Open(name);
  std::lock_guard<std::mutex> l(mu_);
  Model& m = models_[name];
  m.resolved = true;
  if (!manifest.ok()) {
    m.status = manifest.status();
    m.failed_at = std::chrono::steady_clock::now();
    return manifest.status();
  }
  m.manifest = *manifest;
  return m.manifest;
}

Result<ModelCache::Lease> ModelCache::Borrow(const std::string& name,
                                             gpu::ComputeBackend* device) {
  const std::string key = KeyOf(name, device);
  {
    std::lock_guard<std::mutex> l(mu_);
    Model& m = models_[name];
    if (device == nullptr && m.resolved && !m.status.ok() &&
        std::chrono::steady_clock::now() - m.failed_at < recheck_)
      return m.status;
    auto it = idle_.find(key);
    if (it != idle_.end() && !it->second.runners.empty()) {
      std::unique_ptr<ModelRunner> r = std::move(it->second.runners.back());
      it->second.runners.pop_back();
      return Lease(this, key, device, std::move(r));
    }
  }
  // Opening parses the model (tens of ms, or an upload to the device): outside the lock,
  // so other models and borrowers of idle runners are not held up. The job waits for it.
  TimeSpent opening(TimePart::kWait);
  auto manifest = Resolve(name);
  if (!manifest.ok()) return manifest.status();
  auto r = factory_(*manifest, device);
  std::lock_guard<std::mutex> l(mu_);
  Model& m = models_[name];
  if (!r.ok()) {
    if (device == nullptr) {
      m.status = r.status();
      m.failed_at = std::chrono::steady_clock::now();
    }
    return r.status();
  }
  if (device == nullptr) m.status = Status::OK();
  ++m.created;
  return Lease(this, key, device, std::move(r).value());
}

void ModelCache::Return(const std::string& key, const gpu::ComputeBackend* device,
                        std::unique_ptr<ModelRunner> r) {
  std::lock_guard<std::mutex> l(mu_);
  Idle& idle = idle_[key];
  idle.device = device;
  idle.runners.push_back(std::move(r));
}

void ModelCache::Forget(const gpu::ComputeBackend* device) {
  std::vector<std::unique_ptr<ModelRunner>> dropped;  // destroyed outside the lock
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = idle_.begin(); it != idle_.end();) {
    if (it->second.device != device) {
      ++it;
      continue;
    }
    for (auto& r : it->second.runners) dropped.push_back(std::move(r));
    it = idle_.erase(it);
  }
}

int ModelCache::Created(const std::string& name) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = models_.find(name);
  return it == models_.end() ? 0 : it->second.created;
}

}  // namespace framemill::models
