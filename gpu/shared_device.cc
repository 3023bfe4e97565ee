#include "gpu/shared_device.h"

#include <algorithm>
#include <map>
#include <utility>

#include "engine/kernels.h"

namespace framemill::gpu {
namespace {

// Bytes this worker's engines hold on the device, for GPU_MEMORY_LIMIT_GB (a cap per
// worker process, over all its engines together).
struct EngineBytes {
  int64_t held = 0;
};

// The engine's kernels on a shared device: every allocation is reserved on the ledger
// while it lives (an engine keeps its weights and arena between batches). Everything
// else is the device's own kernels.
class LedgerKernels final : public engine::Kernels {
 public:
  LedgerKernels(std::unique_ptr<engine::Kernels> inner, std::shared_ptr<DeviceLedger> ledger,
                std::shared_ptr<EngineBytes> held, int64_t memory_limit)
      : inner_(std::move(inner)), ledger_(std::move(ledger)), held_(std::move(held)),
        limit_(memory_limit) {}
  ~LedgerKernels() override {
    for (auto& [p, n] : live_) Released(n);
  }

  std::string name() const override { return inner_->name(); }
  Status Prepare(engine::StorageType s) override { return inner_->Prepare(s); }
  Status Alloc(size_t bytes, void** out) override {
    const auto n = static_cast<int64_t>(std::max<size_t>(bytes, 1) + 255) / 256 * 256;
    if (limit_ > 0 && held_->held + n > limit_)
      return Status::OutOfMemory(ledger_->device() + ": the engine needs " + MiBText(n) + " more, " +
                                 MiBText(held_->held) + " held of GPU_MEMORY_LIMIT_GB's " +
                                 MiBText(limit_));
    FM_RETURN_IF_ERROR(ledger_->Reserve(n, "the engine's allocation"));
    Status s = inner_->Alloc(bytes, out);
    if (!s.ok()) {
      ledger_->Release(n);
      return s;
    }
    live_[*out] = n;
    held_->held += n;
    return s;
  }
  void Free(void* p) override {
    if (p == nullptr) return;
    inner_->Free(p);
    if (auto it = live_.find(p); it != live_.end()) {
      Released(it->second);
      live_.erase(it);
    }
  }
  Status Upload(void* d, const void* s, size_t n) override { return inner_->Upload(d, s, n); }
  Status Download(void* d, const void* s, size_t n) override { return inner_->Download(d, s, n); }
  Status Sync() override { return inner_->Sync(); }
  int64_t Conv2dScratchBytes(const engine::Conv2dParams& p) const override {
    return inner_->Conv2dScratchBytes(p);
  }
  int64_t ConvTranspose2dScratchBytes(const engine::ConvTranspose2dParams& p) const override {
    return inner_->ConvTranspose2dScratchBytes(p);
  }
  int64_t MatMulScratchBytes(const engine::MatMulParams& p) const override {
    return inner_->MatMulScratchBytes(p);
  }
  Status Conv2d(const engine::Conv2dParams& p, const void* x, const void* w, const void* bias,
                const void* residual, void* y, void* scratch) override {
    return inner_->Conv2d(p, x, w, bias, residual, y, scratch);
  }
  Status ConvTranspose2d(const engine::ConvTranspose2dParams& p, const void* x, const void* w,
                         const void* bias, void* y, void* scratch) override {
    return inner_->ConvTranspose2d(p, x, w, bias, y, scratch);
  }
  Status Pool2d(const engine::Pool2dParams& p, const void* x, void* y) override {
    return inner_->Pool2d(p, x, y);
  }
  Status Binary(const engine::BinaryParams& p, const void* a, const void* b, void* out) override {
    return inner_->Binary(p, a, b, out);
  }
  Status Unary(const engine::UnaryParams& p, const void* x, void* y) override {
    return inner_->Unary(p, x, y);
  }
  Status Resize(const engine::ResizeParams& p, const void* x, void* y) override {
    return inner_->Resize(p, x, y);
  }
  Status Pad(const engine::PadParams& p, const void* x, void* y) override {
    return inner_->Pad(p, x, y);
  }
  Status Concat(const engine::ConcatParams& p, const void* const* in, void* y) override {
    return inner_->Concat(p, in, y);
  }
  Status Transpose(const engine::TransposeParams& p, const void* x, void* y) override {
    return inner_->Transpose(p, x, y);
  }
  Status Slice(const engine::SliceParams& p, const void* x, void* y) override {
    return inner_->Slice(p, x, y);
  }
  Status Reduce(const engine::ReduceParams& p, const void* x, void* y) override {
    return inner_->Reduce(p, x, y);
  }
  Status Softmax(const engine::SoftmaxParams& p, const void* x, void* y) override {
    return inner_->Softmax(p, x, y);
  }
  Status MatMul(const engine::MatMulParams& p, const void* a, const void* b, const void* c,
                void* y, void* scratch) override {
    return inner_->MatMul(p, a, b, c, y, scratch);
  }
  Status ArgMax(const engine::ArgMaxParams& p, const void* x, void* y) override {
    return inner_->ArgMax(p, x, y);
  }
  Status Copy(const void* src, void* dst, int64_t elements) override {
    return inner_->Copy(src, dst, elements);
  }

 private:
  void Released(int64_t n) {
    ledger_->Release(n);
    held_->held -= n;
  }
  std::unique_ptr<engine::Kernels> inner_;
  std::shared_ptr<DeviceLedger> ledger_;  // shared: an engine may outlive its backend
  std::shared_ptr<EngineBytes> held_;
  int64_t limit_;
  std::map<void*, int64_t> live_;
};

class SharedDevice final : public ComputeBackend {
 public:
  SharedDevice(std::unique_ptr<ComputeBackend> inner, std::shared_ptr<DeviceLedger> ledger,
               double cost, std::optional<EngineStorage> storage)
      : inner_(std::move(inner)), ledger_(std::move(ledger)), cost_(cost),
        storage_(storage.value_or(inner_->Storage())),
        engines_(std::make_shared<EngineBytes>()) {}

  std::string device() const override { return inner_->device(); }
  bool is_gpu() const override { return inner_->is_gpu(); }
  Result<DeviceInfo> Info() override {
    auto d = inner_->Info();
    if (!d.ok()) return d;
    d->total_bytes = ledger_->total_bytes();
    d->free_bytes = std::min(d->free_bytes, ledger_->Available());
    return d;
  }
  void SetMemoryLimit(int64_t bytes) override {
    memory_limit_ = bytes;
    inner_->SetMemoryLimit(bytes);
  }
  int64_t LastBatchBytes() const override { return last_bytes_; }
  void SetLastBatchBytes(int64_t bytes) override { last_bytes_ = bytes; }
  Result<std::unique_ptr<engine::Kernels>> MakeEngineKernels() override {
    auto k = inner_->MakeEngineKernels();
    if (!k.ok()) return k;
    return std::unique_ptr<engine::Kernels>(
        new LedgerKernels(std::move(k).value(), ledger_, engines_, memory_limit_));
  }
  EngineStorage Storage() const override { return storage_; }
  void WorkBegins() override { ledger_->SetWorking(true); }
  void WorkEnds() override { ledger_->SetWorking(false); }

  Result<std::vector<LumaStats>> LumaStatsBatch(const std::vector<cv::Mat>& images) override {
    int64_t need = 0;
    for (const cv::Mat& m : images) need += LumaStatsBytesPerItem(m);
    return Planned(need, images.size(), [&] { return inner_->LumaStatsBatch(images); });
  }
  Result<Tensor> PreprocessBatch(const std::vector<cv::Mat>& images,
                                 const PreprocessSpec& spec) override {
    int64_t need = 0;
    for (const cv::Mat& m : images) need += PreprocessBytesPerItem(m, spec);
    return Planned(need, images.size(), [&] { return inner_->PreprocessBatch(images, spec); });
  }
  Result<TopK> TopKSimilar(const SimilarityQuery& q) override {
    FM_RETURN_IF_ERROR(CheckSimilarityQuery(q));
    return Planned(TopKSimilarBytes(q), static_cast<size_t>(q.nq),
                   [&] { return inner_->TopKSimilar(q); });
  }
  Result<std::vector<cv::Mat>> DenseFlowBatch(const std::vector<FlowPair>& pairs,
                                              const FlowSpec& spec) override {
    FM_RETURN_IF_ERROR(CheckFlowPairs(pairs, spec));
    int64_t need = 0;
    for (const FlowPair& p : pairs) need += DenseFlowBytesPerItem(p.from.size(), spec);
    return Planned(need, pairs.size(), [&] { return inner_->DenseFlowBatch(pairs, spec); });
  }
  Result<std::vector<PatchMatchResult>> PatchMatchBatch(const std::vector<PatchMatchTask>& tasks,
                                                        const PatchMatchSpec& spec) override {
    for (const PatchMatchTask& t : tasks) FM_RETURN_IF_ERROR(CheckPatchMatchTask(t, spec));
    int64_t need = 0;
    for (const PatchMatchTask& t : tasks) need += PatchMatchBytesPerItem(t.image.size());
    return Planned(need, tasks.size(), [&] { return inner_->PatchMatchBatch(tasks, spec); });
  }
  Result<std::vector<cv::Mat>> HoleFillBatch(const std::vector<HoleFillTask>& tasks,
                                             const HoleFillSpec& spec) override {
    for (const HoleFillTask& t : tasks) FM_RETURN_IF_ERROR(CheckHoleFillTask(t, spec));
    int64_t need = 0;
    for (const HoleFillTask& t : tasks) need += HoleFillBytesPerItem(t.image.size());
    return Planned(need, tasks.size(), [&] { return inner_->HoleFillBatch(tasks, spec); });
  }

 private:
  // Runs `run` with the batch's bytes reserved on the ledger; OutOfMemory, before running
  // anything, when GPU_MEMORY_LIMIT_GB or the device cannot hold them.
  template <class Run>
  auto Planned(int64_t bytes, size_t n, const Run& run) -> decltype(run()) {
    const auto need = static_cast<int64_t>(static_cast<double>(bytes) * cost_);
    const std::string what = "a batch of " + std::to_string(n);
    if (memory_limit_ > 0 && need > memory_limit_)
      return Status::OutOfMemory(device() + ": " + what + " needs " + MiBText(need) +
                                 ", GPU_MEMORY_LIMIT_GB allows " + MiBText(memory_limit_));
    auto held = Reservation::Take(ledger_.get(), need, what);
    if (!held.ok()) return held.status();
    auto out = run();
    if (out.ok()) last_bytes_ = inner_->LastBatchBytes() > 0 ? inner_->LastBatchBytes() : need;
    return out;
  }

  std::unique_ptr<ComputeBackend> inner_;
  std::shared_ptr<DeviceLedger> ledger_;
  double cost_;
  EngineStorage storage_;
  std::shared_ptr<EngineBytes> engines_;
  int64_t last_bytes_ = 0;
};

}  // namespace

std::unique_ptr<ComputeBackend> ShareDevice(std::unique_ptr<ComputeBackend> device,
                                            std::shared_ptr<DeviceLedger> ledger, double cost,
                                            std::optional<EngineStorage> storage) {
  return std::make_unique<SharedDevice>(std::move(device), std::move(ledger), cost, storage);
}

}  // namespace framemill::gpu
