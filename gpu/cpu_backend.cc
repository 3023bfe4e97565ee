#include <tbb/parallel_for.h>
#include <unistd.h>

#include <algorithm>
#include <new>

#include "gpu/compute_backend.h"
#include "engine/reference/cpu_kernels.h"
#include "engine/dnnl/dnnl_kernels.h"
#include "gpu/shared_device.h"

namespace framemill::gpu {
namespace {

// `one` over each input, on the host, in order; the host's memory running out is
// OutOfMemory naming what was being done (the ladder's last step hands it back).
template <class Out, class In, class Fn>
Result<std::vector<Out>> EachOnHost(const std::vector<In>& inputs, Fn one, const char* doing) {
  try {
    std::vector<Out> out;
    for (const In& in : inputs) out.push_back(one(in));
    return out;
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory(std::string("host memory exhausted ") + doing);
  }
}

class CpuBackend : public ComputeBackend {
 public:
  explicit CpuBackend(engine::DnnlOptions engine = {}) : engine_(engine) {}
  std::string device() const override { return "cpu"; }
  bool is_gpu() const override { return false; }
  Result<std::unique_ptr<engine::Kernels>> MakeEngineKernels() override {
    return engine::MakeDnnlKernels(engine_);
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
    return EachOnHost<cv::Mat>(pairs, [&](const FlowPair& p) { return DenseFlowCpu(p, spec); },
                               "computing optical flow");
  }
  Result<std::vector<PatchMatchResult>> PatchMatchBatch(const std::vector<PatchMatchTask>& tasks,
                                                        const PatchMatchSpec& spec) override {
    for (const PatchMatchTask& t : tasks) FM_RETURN_IF_ERROR(CheckPatchMatchTask(t, spec));
    return EachOnHost<PatchMatchResult>(
        tasks, [&](const PatchMatchTask& t) { return PatchMatchCpu(t, spec); }, "searching patches");
  }
  Result<std::vector<cv::Mat>> HoleFillBatch(const std::vector<HoleFillTask>& tasks,
                                             const HoleFillSpec& spec) override {
    for (const HoleFillTask& t : tasks) FM_RETURN_IF_ERROR(CheckHoleFillTask(t, spec));
    return EachOnHost<cv::Mat>(tasks, [&](const HoleFillTask& t) { return HoleFillCpu(t, spec); },
                               "filling a hole");
  }
 private:
  engine::DnnlOptions engine_;  // the oneDNN kernels' options, their precision among them
};

// The simulated device's arithmetic: the CPU's, named as a device. Its memory is the
// ledger ShareDevice puts in front of it (gpu/shared_device.h), so the batch tuner and the
// out-of-memory ladder run in CI exactly as they would against a real card, and several
// worker processes share one simulated card as they would a real one.
class SimCore : public CpuBackend {
 public:
  explicit SimCore(int64_t vram_bytes) : vram_(vram_bytes) {}
  std::string device() const override { return "sim:0"; }
  bool is_gpu() const override { return true; }
  // The reference kernels, the CPU twin of a device's (and fp16 storage, which the CPU's
  // oneDNN kernels do not keep).
  Result<std::unique_ptr<engine::Kernels>> MakeEngineKernels() override {
    return engine::MakeCpuKernels();
  }
  Result<DeviceInfo> Info() override {
    DeviceInfo d;
    d.name = "simulated device";
    d.total_bytes = vram_;
    d.free_bytes = vram_;  // what is planned on it is the ledger's to say
    return d;
  }

 private:
  int64_t vram_;
};

}  // namespace

std::unique_ptr<ComputeBackend> MakeCpuBackend(engine::DnnlOptions engine) {
  return std::make_unique<CpuBackend>(engine);
}

std::unique_ptr<ComputeBackend> MakeSimBackend(int64_t vram_mb, double cost_multiplier) {
  return MakeSharedSimBackend(DeviceLedger::Private("sim:0", vram_mb << 20), cost_multiplier);
}

std::unique_ptr<ComputeBackend> MakeSharedSimBackend(std::shared_ptr<DeviceLedger> ledger,
                                                     double cost_multiplier,
                                                     std::optional<EngineStorage> storage) {
  const int64_t vram = ledger->total_bytes();
  return ShareDevice(std::make_unique<SimCore>(vram), std::move(ledger), cost_multiplier, storage);
}

}  // namespace framemill::gpu
