#include <tbb/parallel_for.h>
#include <unistd.h>

#include <algorithm>
#include <new>

#include "gpu/compute_backend.h"
#include "gpu/engine/cpu_kernels.h"

namespace framemill::gpu {
namespace {

class CpuBackend : public ComputeBackend {
 public:
  std::string device() const override { return "cpu"; }
  bool is_gpu() const override { return false; }
  Result<std::unique_ptr<engine::Kernels>> MakeEngineKernels() override {
    return engine::MakeCpuKernels();
  }
  Result<DeviceInfo> Info() override {
    DeviceInfo d;
    d.name = "host CPU";
    const int64_t page = sysconf(_SC_PAGESIZE);
    d.total_bytes = sysconf(_SC_PHYS_PAGES) * page;
    d.free_bytes = sysconf(_SC_AVPHYS_PAGES) * page;
    return d;
  }
  Result<std::vector<LumaStats>> LumaStatsBatch(const std::vector<cv::Mat>& images) override {
    for (const cv::Mat& m : images)
      if (m.empty() || m.type() != CV_8UC3) return Status::InvalidArgument("LumaStats needs 8-bit BGR");
    try {
      std::vector<LumaStats> out(images.size());
      tbb::parallel_for(size_t{0}, images.size(), [&](size_t i) { out[i] = LumaStatsCpu(images[i]); });
      return out;
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("host memory exhausted computing luminance statistics");
    }
  }
  Result<Tensor> PreprocessBatch(const std::vector<cv::Mat>& images,
                                 const PreprocessSpec& spec) override {
    for (const cv::Mat& m : images)
      if (m.empty() || m.type() != CV_8UC3) return Status::InvalidArgument("Preprocess needs 8-bit BGR");
    try {
      // One image per task, all cores: each writes its own slice of the tensor.
      Tensor out;
      out.type = spec.type;
      out.shape = {static_cast<int64_t>(images.size()), 3, spec.height, spec.width};
      const size_t per = 3ULL * spec.width * spec.height * out.ElementBytes();
      out.data.resize(per * images.size());
      tbb::parallel_for(size_t{0}, images.size(), [&](size_t i) {
        Tensor one = PreprocessCpu({images[i]}, spec);
        std::copy(one.data.begin(), one.data.end(), out.data.begin() + static_cast<long>(per * i));
      });
      return out;
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("host memory exhausted preprocessing a batch");
    }
  }
  Result<TopK> TopKSimilar(const SimilarityQuery& q) override {
    FM_RETURN_IF_ERROR(CheckSimilarityQuery(q));
    try {
      return TopKSimilarCpu(q);
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("host memory exhausted computing similarities");
    }
  }
  Result<std::vector<cv::Mat>> DenseFlowBatch(const std::vector<FlowPair>& pairs,
                                              const FlowSpec& spec) override {
    FM_RETURN_IF_ERROR(CheckFlowPairs(pairs, spec));
    try {
      std::vector<cv::Mat> out;
      for (const FlowPair& p : pairs) out.push_back(DenseFlowCpu(p, spec));
      return out;
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("host memory exhausted computing optical flow");
    }
  }
  Result<std::vector<PatchMatchResult>> PatchMatchBatch(const std::vector<PatchMatchTask>& tasks,
                                                        const PatchMatchSpec& spec) override {
    for (const PatchMatchTask& t : tasks) FM_RETURN_IF_ERROR(CheckPatchMatchTask(t, spec));
    try {
      std::vector<PatchMatchResult> out;
      for (const PatchMatchTask& t : tasks) out.push_back(PatchMatchCpu(t, spec));
      return out;
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("host memory exhausted searching patches");
    }
  }
};

// The simulated device: CPU arithmetic behind a VRAM budget, so the batch tuner and
// the out-of-memory ladder run in CI exactly as they would against a real card.
class SimBackend : public ComputeBackend {
 public:
  SimBackend(int64_t vram_mb, double cost) : budget_(vram_mb << 20), cost_(cost) {}
  std::string device() const override { return "sim:0"; }
  bool is_gpu() const override { return true; }
  int64_t LastBatchBytes() const override { return last_bytes_; }
  void SetLastBatchBytes(int64_t bytes) override { last_bytes_ = bytes; }
  Result<std::unique_ptr<engine::Kernels>> MakeEngineKernels() override {
    // The engine keeps its weights and arena allocated between batches, so its kernels
    // get the whole budget as a running total rather than per batch.
    const int64_t budget = memory_limit_ > 0 ? std::min(budget_, memory_limit_) : budget_;
    return engine::MakeCpuKernels(budget);
  }
  Result<DeviceInfo> Info() override {
    DeviceInfo d;
    d.name = "simulated device";
    d.total_bytes = budget_;
    d.free_bytes = budget_;  // nothing stays allocated between batches
    return d;
  }
  Result<std::vector<LumaStats>> LumaStatsBatch(const std::vector<cv::Mat>& images) override {
    int64_t need = 0;
    for (const cv::Mat& m : images) need += LumaStatsBytesPerItem(m);
    FM_RETURN_IF_ERROR(Charge(need, images.size()));
    last_bytes_ = static_cast<int64_t>(static_cast<double>(need) * cost_);
    return cpu_.LumaStatsBatch(images);
  }
  Result<Tensor> PreprocessBatch(const std::vector<cv::Mat>& images,
                                 const PreprocessSpec& spec) override {
    int64_t need = 0;
    for (const cv::Mat& m : images) need += PreprocessBytesPerItem(m, spec);
    FM_RETURN_IF_ERROR(Charge(need, images.size()));
    last_bytes_ = static_cast<int64_t>(static_cast<double>(need) * cost_);
    return cpu_.PreprocessBatch(images, spec);
  }
  Result<TopK> TopKSimilar(const SimilarityQuery& q) override {
    FM_RETURN_IF_ERROR(CheckSimilarityQuery(q));
    const int64_t need = TopKSimilarBytes(q);
    FM_RETURN_IF_ERROR(Charge(need, static_cast<size_t>(q.nq)));
    last_bytes_ = static_cast<int64_t>(static_cast<double>(need) * cost_);
    return cpu_.TopKSimilar(q);
  }
  Result<std::vector<cv::Mat>> DenseFlowBatch(const std::vector<FlowPair>& pairs,
                                              const FlowSpec& spec) override {
    FM_RETURN_IF_ERROR(CheckFlowPairs(pairs, spec));
    int64_t need = 0;
    for (const FlowPair& p : pairs) need += DenseFlowBytesPerItem(p.from.size(), spec);
    FM_RETURN_IF_ERROR(Charge(need, pairs.size()));
    last_bytes_ = static_cast<int64_t>(static_cast<double>(need) * cost_);
    return cpu_.DenseFlowBatch(pairs, spec);
  }
  Result<std::vector<PatchMatchResult>> PatchMatchBatch(const std::vector<PatchMatchTask>& tasks,
                                                        const PatchMatchSpec& spec) override {
    for (const PatchMatchTask& t : tasks) FM_RETURN_IF_ERROR(CheckPatchMatchTask(t, spec));
    int64_t need = 0;
    for (const PatchMatchTask& t : tasks) need += PatchMatchBytesPerItem(t.image.size());
    FM_RETURN_IF_ERROR(Charge(need, tasks.size()));
    last_bytes_ = static_cast<int64_t>(static_cast<double>(need) * cost_);
    return cpu_.PatchMatchBatch(tasks, spec);
  }

 private:
  Status Charge(int64_t bytes, size_t n) {
    auto need = static_cast<int64_t>(static_cast<double>(bytes) * cost_);
    const int64_t budget = memory_limit_ > 0 ? std::min(budget_, memory_limit_) : budget_;
    if (need > budget) {
      return Status::OutOfMemory("sim:0: batch of " + std::to_string(n) + " needs " +
                                 std::to_string(need >> 20) + " MiB, device has " +
                                 std::to_string(budget >> 20) + " MiB");
    }
    return Status::OK();
  }
  int64_t budget_;
  double cost_;
  int64_t last_bytes_ = 0;
  CpuBackend cpu_;
};

}  // namespace

std::unique_ptr<ComputeBackend> MakeCpuBackend() { return std::make_unique<CpuBackend>(); }

std::unique_ptr<ComputeBackend> MakeSimBackend(int64_t vram_mb, double cost_multiplier) {
  return std::make_unique<SimBackend>(vram_mb, cost_multiplier);
}

}  // namespace framemill::gpu
