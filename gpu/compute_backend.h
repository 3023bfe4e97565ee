// ComputeBackend: where an operation's arithmetic runs (CPU, a CUDA device, or the
// simulated device of the tests). The interface has no CUDA types; the CUDA
// implementation lives in gpu/cuda/ and is compiled only when CUDA is found.
// A backend instance is used by one thread at a time (each worker owns its own).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/dnnl/dnnl_kernels.h"
#include "gpu/ops.h"

namespace framemill::engine {
class Kernels;
}  // namespace framemill::engine

namespace framemill::gpu {

// How the inference engine stores activations and weights on a backend (fp32 accumulation
// either way): fp16 halves memory and traffic; fp32 gives the CPU's numbers.
enum class EngineStorage {
  kFp32,        // every model in fp32
  kFp16,        // every model in fp16 (GPU_PRECISION=fp16)
  kModelsOwn,   // each model's own precision (models/catalog.h ModelSpec::precision)
};

struct DeviceInfo {
  int index = 0;
  std::string name;
  int64_t total_bytes = 0, free_bytes = 0;
  int cc_major = 0, cc_minor = 0;
  int multiprocessors = 0;
};

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;
  // As recorded in results: "cpu", "cuda:0", "sim:0".
  virtual std::string device() const = 0;
  virtual bool is_gpu() const = 0;
  // Free and total memory of the device (host RAM for the CPU backend).
  virtual Result<DeviceInfo> Info() = 0;
  // Caps the device memory this backend allocates (GPU_MEMORY_LIMIT_GB on a shared
  // card): a batch that would need more fails with OutOfMemory. 0 = no cap.
  virtual void SetMemoryLimit(int64_t bytes) { memory_limit_ = bytes; }
  int64_t memory_limit() const { return memory_limit_; }
  // Device bytes the last successful batch needed (0 if unknown): what the batch
  // tuner learns bytes-per-item from.
  virtual int64_t LastBatchBytes() const { return 0; }
  // For work that runs on this backend's device outside its own operations (the
  // inference engine): the bytes that batch needed, so the tuner learns from it.
  virtual void SetLastBatchBytes(int64_t bytes) {}

  // A batch of work is on the device from Begin to End (OomLadder marks each device slice):
  // a device shared by several workers counts its busy time from these, once however many
  // overlap (gpu/shared_device.h). No-ops elsewhere.
  virtual void WorkBegins() {}
  virtual void WorkEnds() {}

  // Kernels of the inference engine (engine/) on this backend's device, for the
  // neural operations: CUDA's own kernels on a CUDA device (capped by SetMemoryLimit),
  // the reference kernels on the CPU, and on the simulated device the reference kernels
  // behind its VRAM budget (an allocation past it is OutOfMemory). The caller owns them.
  virtual Result<std::unique_ptr<engine::Kernels>> MakeEngineKernels() = 0;
  // How the engine stores tensors here: each model's own precision on CUDA devices; fp32
  // elsewhere; GPU_PRECISION forces one for every model (gpu/shared_device.h).
  virtual EngineStorage Storage() const { return EngineStorage::kFp32; }

  // Each returns one output per input image, or a typed error: OutOfMemory when the
  // device could not hold the batch (its memory is released before returning, so the
  // caller may retry smaller), InvalidArgument for unusable inputs.
  virtual Result<std::vector<LumaStats>> LumaStatsBatch(const std::vector<cv::Mat>& images) = 0;
  virtual Result<Tensor> PreprocessBatch(const std::vector<cv::Mat>& images,
                                         const PreprocessSpec& spec) = 0;
  // The k most similar base rows to each query (gpu/ops.h), the whole matrix in tiles:
  // the blocks of face clustering's exact neighbour graph. InvalidArgument as
  // CheckSimilarityQuery says; OutOfMemory when the rows do not fit the device.
  virtual Result<TopK> TopKSimilar(const SimilarityQuery& q) = 0;
  // Dense optical flow of each pair (gpu/ops.h: DenseFlowCpu defines it), CV_32FC2 in
  // the frames' pixels. InvalidArgument as CheckFlowPairs says.
  virtual Result<std::vector<cv::Mat>> DenseFlowBatch(const std::vector<FlowPair>& pairs,
                                                      const FlowSpec& spec) = 0;
  // The patch search of exemplar inpainting for each task (gpu/ops.h: PatchMatchCpu
  // defines it). InvalidArgument as CheckPatchMatchTask says.
  virtual Result<std::vector<PatchMatchResult>> PatchMatchBatch(
      const std::vector<PatchMatchTask>& tasks, const PatchMatchSpec& spec) = 0;
  // The harmonic hole fill of each task (gpu/ops.h: HoleFillCpu defines it): the image with
  // its hole filled. InvalidArgument as CheckHoleFillTask says.
  virtual Result<std::vector<cv::Mat>> HoleFillBatch(const std::vector<HoleFillTask>& tasks,
                                                     const HoleFillSpec& spec) = 0;

 protected:
  int64_t memory_limit_ = 0;
};

// The CPU backend: the reference implementations, parallel over the batch; the engine's
// kernels are oneDNN's, made with `engine` (engine/dnnl/dnnl_kernels.h: the backend's own
// options, its precision among them: bf16 where the CPU has AVX512-BF16 or AMX and it is
// asked, fp32 elsewhere).
std::unique_ptr<ComputeBackend> MakeCpuBackend(engine::DnnlOptions engine = {});

// A simulated GPU for tests and CI: runs the CPU code but enforces a VRAM budget of
// `vram_mb`, charging each batch the per-item bytes of gpu/ops.h (times
// `cost_multiplier`) and the engine its allocations; a batch over budget fails with
// OutOfMemory like a real device. This one is the process's own; `framemill run`'s
// workers share one on a DeviceLedger (gpu/shared_device.h: MakeSharedSimBackend).
std::unique_ptr<ComputeBackend> MakeSimBackend(int64_t vram_mb, double cost_multiplier = 1.0);

// CUDA devices visible to this process; empty (with the reason in *why) when CUDA
// is not built in, no driver is loaded, or no device is present.
std::vector<DeviceInfo> CudaDevices(std::string* why);
// The CUDA backend on device `index`; NotFound/Unsupported when unavailable.
Result<std::unique_ptr<ComputeBackend>> MakeCudaBackend(int index);
// True when this binary was built with CUDA.
bool CudaCompiledIn();

}  // namespace framemill::gpu
