// Which device each operation runs on, and why: a pure function of the GPU settings
// (ALL_GPU, <OPERATION>_GPU, GPU_BACKEND, GPU_DEVICE_ID) and the devices found, so
// every combination is testable without a GPU. Asking for a GPU that is not there
// falls back to the CPU with a warning, never a failure. Plain values.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/option_rows.h"
#include "gpu/compute_backend.h"

namespace framemill::gpu {

// The device operations of the contract, each with its <OPERATION>_GPU variable.
const std::vector<std::string>& DeviceOperations();

// ALL_GPU and <OPERATION>_GPU: auto, or a request for the GPU or the CPU.
enum class DeviceChoice { kAuto, kGpu, kCpu };

// The GPU settings (gpu.* in the configuration), filled by the CLI.
struct GpuOptions {
  DeviceChoice all = DeviceChoice::kAuto;
  std::map<std::string, DeviceChoice> ops;  // operation name (LIGHTING, POSE...) -> choice
  std::string backend = "auto";             // auto | cuda | cpu | sim
  int device_id = 0;
  double memory_limit_gb = 0;               // 0: no limit beyond the device's
  int batch_size = 0;                       // 0: tune to free VRAM
  int sim_vram_mb = 8192;
  double sim_cost = 1.0;                    // multiplies each item's bytes on the sim device
  // How the inference engine stores activations and weights on a device, the simulated one
  // included (fp32 accumulation either way): fp16 halves memory and traffic; fp32 gives the
  // CPU's numbers. auto: each model's own (models/catalog.cc, ModelSpec::precision: pose in
  // fp32, whose tracks differed in fp16, issue 40); fp16 or fp32 force one for every model.
  // The simulated device rounds through half as CUDA does, so a test on the CPU sees what a
  // GPU run sees.
  std::string precision = "auto";           // auto | fp16 | fp32
  // Worker processes that use one device; the others run every operation on the CPU.
  // Measured end to end on an H100 with 16 cores (2026-11-27, bench/README.md "End to end
  // on a GPU"; 16 workers, 600 photos and 3 videos): 4 took 40.7 s (1.7x the 16 cores), 8
  // took 16.7 s (4.2x; 14 on it by the end), 16 took 16.3 s. A device worker does its
  // items' host work too, so more of them keep the device fed; the engine alone plateaus
  // at 4. With 2.5 GB of the device free, 4 and 8 let 4 on (28.5 s, 40.8 s), and 16 let
  // 3 on and ran at the CPU's speed (70.7 s). Each costs ~600 MiB for its CUDA context.
  int workers_per_device = 8;
  // Tuned at run time (issue 38): while the device is busy less than `join_below_busy` of
  // the time and work is waiting, a worker of the run that is on the CPU joins it, up to
  // max_workers_per_device members. On an H100, 8 workers on the device beat 4 (2.56x the
  // CPU against 2.06x, bench/README "End to end on a GPU"): a fixed number is right for
  // one mix of stages and host cores only. max_workers_per_device <= workers_per_device:
  // never more than at the start.
  int max_workers_per_device = 16;
  double join_below_busy = 0.8;    // 0: never join; above 1: whenever work waits
  int64_t join_window_ms = 5'000;  // the busy share is judged over this long
  // Where the device ledgers live (gpu/device_ledger.h); empty: /dev/shm, else /tmp.
  std::string ledger_dir;

  bool operator==(const GpuOptions&) const = default;
};

// GpuOptions::precision as the engine's storage on a device.
EngineStorage StorageOf(const GpuOptions& o);

// The gpu.* rows (ALL_GPU, <OPERATION>_GPU, GPU_BACKEND, ...) bound to `o` (gpu/gpu_rows.cc).
void AddGpuRows(GpuOptions* o, OptionRows* rows);

struct OpDecision {
  std::string op;          // LIGHTING, PREPROCESS, ...
  bool use_gpu = false;
  // The policy put it on the device: true on every worker of the run, whether it has a seat
  // on the device or runs on the CPU because the device had its workers (use_gpu false).
  bool run_on_device = false;
  std::string device;      // "cuda:0", "sim:0" or "cpu"
  std::string reason;
  // Every operation DeviceOperations() lists runs on a device (engine/, gpu/cuda); kept
  // for `framemill gpu --json`'s readers (docs/REFERENCE.md).
  bool gpu_implemented = true;
};

struct GpuPlan {
  std::string backend;       // "cuda", "sim" or "cpu": the device kind GPU ops use
  int device_index = 0;
  std::vector<DeviceInfo> devices;  // CUDA devices found
  std::string no_device_reason;     // why none, when none
  std::vector<OpDecision> ops;      // one per DeviceOperations(), in that order
  std::vector<std::string> warnings;
  const OpDecision& For(const std::string& op) const;
  bool AnyGpu() const;
};

// `cuda_devices` and `why_none` are what CudaDevices() reported (ignored unless
// GPU_BACKEND is auto or cuda).
GpuPlan PlanDevices(const GpuOptions& options, const std::vector<DeviceInfo>& cuda_devices,
                    const std::string& why_none);

}  // namespace framemill::gpu
