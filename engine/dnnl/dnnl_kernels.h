// The engine's CPU backend (engine/kernels.h) on oneDNN (Debian's libdnnl 2.6, GNU
// OpenMP threads): convolutions with their fused activation and residual as post-ops,
// pooling, binary and unary ops, concatenation and channel slices run as oneDNN primitives
// made once per shape, each in a form that runs on a JIT kernel at the CPU's ISA
// (primitives.h: a step split where oneDNN would otherwise run its reference kernel, noted
// in LastStepNote); our own loops where oneDNN lacks an op on channels-last tensors
// (own_loops.h); every other op is the reference kernels' (cpu_kernels.h), the twin each op
// here is tested against.
//
// Layout (layouts.h): a tensor that a oneDNN primitive writes stays channels-last (NHWC) in
// its own buffer (the same bytes as NCHW, so the engine's memory plan holds) for as long as
// its readers take NHWC; an op that needs the plain NCHW the plan promises first turns it
// back in place, and so does Download.
// Thread-safety: one thread at a time (as every Kernels); oneDNN is internally parallel.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/kernels.h"

namespace framemill::engine {

struct DnnlOptions {
  // > 0: Alloc refuses (OutOfMemory) past this many live bytes, as MakeCpuKernels does.
  int64_t memory_limit = 0;
  // Convolutions and matrix products compute in bf16 (fp32 storage and accumulation:
  // oneDNN's fpmath_mode::bf16) where the CPU has AVX512-BF16 or AMX; ignored elsewhere.
  bool bf16 = false;
};

std::unique_ptr<Kernels> MakeDnnlKernels(DnnlOptions options = {});

// The threads each oneDNN primitive of this process runs on (GNU OpenMP's team). A worker
// sets its share of the cores, as it does for OpenCV and TBB. libgomp is not fork-safe
// once its thread pool has started: a process forks its workers before its first
// primitive runs (the supervisor runs none), and a child forked after one would hang in
// its first parallel region; InferenceStarted() says whether this process has run one.
void SetCpuInferenceThreads(int threads);
int CpuInferenceThreads();
bool InferenceStarted();

// Whether this CPU computes bf16 natively (AVX512-BF16 or AMX): what DnnlOptions::bf16 needs.
bool CpuHasBf16();
// The instruction set oneDNN's kernels use in this process, as its verbose output names it
// ("avx2", "avx512_core_amx"): the CPU's, or less under ONEDNN_MAX_CPU_ISA.
std::string CpuIsa();

}  // namespace framemill::engine
