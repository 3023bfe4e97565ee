// The opened models of one process, on the CPU and on devices alike (our inference engine:
// on the CPU its oneDNN kernels, on a device that backend's) alike, in one cache with one lifetime: a
// runner is opened on first use, lent to one borrower at a time, and kept until the
// cache is destroyed (or its device is forgotten).
// ModelCache is thread-safe; a ModelRunner is used by one thread at a time (a Lease
// hands it to exactly one borrower).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "base/status.h"
#include "gpu/compute_backend.h"
#include "models/manifest.h"
#include "models/output_tensor.h"
#include "models/model_store.h"

namespace framemill::models {

// Runs one model on a batch of images on one device.
class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const ModelManifest& manifest() const = 0;
  virtual std::string device() const = 0;  // "cpu", "cuda:0": what an outcome records
  // result[b][i] = manifest().outputs[i] of image b (8-bit BGR, any size).
  virtual Result<std::vector<std::vector<OutputTensor>>> Run(const std::vector<cv::Mat>& bgr) = 0;
  // The same for an already prepared NCHW fp32 input, one result per row of its batch (a
  // model whose input is not an image: the VAD's audio windows).
  virtual Result<std::vector<std::vector<OutputTensor>>> RunTensor(const gpu::Tensor& nchw) = 0;
  // One forward for a whole batch (false: the runner goes image by image anyway).
  virtual bool batchable() const { return manifest().batchable; }
  // Device bytes one image's share of a batch needs (the engine's memory plan, known
  // before anything runs: the batch tuner's first guess); 0 on the CPU.
  virtual int64_t BatchBytesPerImage() { return 0; }
};

// Opens `manifest`'s model on `device`: our engine on the CPU's oneDNN kernels when null,
// else our engine on that backend (which must outlive the runner). An OutOfMemory (the weights do not fit)
// comes back as the device reported it, for the out-of-memory ladder.
// `cpu_precision`: CPU_PRECISION (auto | bf16 | fp32), for the CPU's runner.
Result<std::unique_ptr<ModelRunner>> OpenRunner(const ModelManifest& manifest,
                                                gpu::ComputeBackend* device,
                                                const std::string& cpu_precision = "auto");
using RunnerFactory = std::function<Result<std::unique_ptr<ModelRunner>>(
    const ModelManifest& manifest, gpu::ComputeBackend* device)>;

class ModelCache {
 public:
  class Lease {
   public:
    Lease(Lease&& o) noexcept
        : cache_(o.cache_), key_(std::move(o.key_)), device_(o.device_),
          runner_(std::move(o.runner_)) {
      o.cache_ = nullptr;
    }
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    ~Lease();
    ModelRunner* operator->() const { return runner_.get(); }
    ModelRunner& operator*() const { return *runner_; }

   private:
    friend class ModelCache;
    Lease(ModelCache* cache, std::string key, const gpu::ComputeBackend* device,
          std::unique_ptr<ModelRunner> r)
        : cache_(cache), key_(std::move(key)), device_(device), runner_(std::move(r)) {}
    ModelCache* cache_;
    std::string key_;
    const gpu::ComputeBackend* device_;
    std::unique_ptr<ModelRunner> runner_;
  };

  // Opening is lazy (constructing a cache reads nothing), so commands that never run a
  // model pay nothing. A model that cannot be opened on the CPU (not installed,
  // damaged) yields the same status on every borrow without touching the disk again
  // until `recheck` has passed (so `framemill models fetch` run beside a --forever
  // worker is picked up). Failures on a device are not remembered: an OutOfMemory there
  // is the ladder's to act on, every time.
  explicit ModelCache(std::string models_dir, RunnerFactory factory = {},  // {}: OpenRunner
                      std::chrono::milliseconds recheck = std::chrono::seconds(10));
  ModelCache(const ModelCache&) = delete;
  ModelCache& operator=(const ModelCache&) = delete;

  // A runner of `name` on `device` (null: the CPU), or why there is none: the
  // ModelStore's status (NotFound names `framemill models fetch` and FRAMEMILL_MODELS),
  // or the runner's own (Corruption, OutOfMemory...).
  Result<Lease> Borrow(const std::string& name, gpu::ComputeBackend* device = nullptr);

  // Drops the idle runners on `device`: call it before destroying a device whose engines
  // this cache holds. (A worker's devices and its cache both last until the worker process
  // exits, so it never needs to.)
  void Forget(const gpu::ComputeBackend* device);

  const std::string& dir() const { return store_.dir(); }
  // Runners ever created for `name`, on any device (tests: reuse, one per borrower).
  int Created(const std::string& name) const;

 private:
  struct Model {  // what is known of a model by name
    bool resolved = false;
    Status status;  // why it cannot be used on the CPU, when not ok
    std::chrono::steady_clock::time_point failed_at;
    ModelManifest manifest;
    int created = 0;
  };
  struct Idle {
    const gpu::ComputeBackend* device;
    std::vector<std::unique_ptr<ModelRunner>> runners;
  };
  Result<ModelManifest> Resolve(const std::string& name);
  void Return(const std::string& key, const gpu::ComputeBackend* device,
              std::unique_ptr<ModelRunner> r);
  static std::string KeyOf(const std::string& name, const gpu::ComputeBackend* device);

  ModelStore store_;
  RunnerFactory factory_;
  std::chrono::milliseconds recheck_;
  mutable std::mutex mu_;
  std::map<std::string, Model> models_;
  std::map<std::string, Idle> idle_;  // by KeyOf(name, device)
};

}  // namespace framemill::models
