// The CUDA implementation of ComputeBackend (gpu/compute_backend.h), for the tests
// and benchmarks that want to look inside it. Callers elsewhere use MakeCudaBackend().
// Internal to gpu/cuda/; no CUDA types here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace framemill::gpu::cuda {

// Pinned staging: uploads go through kUploadSlots buffers of kSlotBytes (host packing
// of one overlaps the DMA of the others), downloads through kDownloadSlots. Allocated
// once per backend, on its first batch.
constexpr size_t kSlotBytes = size_t{8} << 20;
constexpr int kUploadSlots = 4;
constexpr int kDownloadSlots = 2;
// A batch is cut into slices of about this many input bytes (whole chunks of pixels
// for LumaStats, whole images for Preprocess); the upload of slice k+1 overlaps the
// kernel of slice k.
constexpr size_t kSliceBytes = size_t{16} << 20;

}  // namespace framemill::gpu::cuda
