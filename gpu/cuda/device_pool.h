// Caching allocators for the CUDA backend: device memory (cudaMalloc) and pinned host
// memory (cudaHostAlloc, the staging buffers that uploads and downloads go through).
//
// A batch borrows a block (a Lease) and gives it back when the Lease is destroyed;
// the block stays cached for the next batch, so steady-state batches allocate
// nothing. A request is served by the smallest idle block that holds it, or by a new
// allocation. When the device says cudaErrorMemoryAllocation, the idle blocks are
// freed and the allocation tried once more; if it still fails the caller gets
// Status::OutOfMemory. With a limit (GPU_MEMORY_LIMIT_GB, ComputeBackend::
// SetMemoryLimit) the pool refuses, with OutOfMemory, any request that would take
// its reserved bytes (in use + cached) over the limit once idle blocks are freed.
// Release() frees every idle block: the OOM ladder's "release, then retry smaller".
//
// Internal to gpu/cuda/ (no CUDA types here, but only the backend uses it).
// Thread-safety: none; one backend (one thread at a time) owns its pools.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace framemill::gpu::cuda {

enum class MemoryKind { kDevice, kPinnedHost };

class CachingPool {
 public:
  // A borrowed block. Move-only; returns the block to its pool when destroyed.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept { *this = std::move(o); }
    Lease& operator=(Lease&& o) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { reset(); }
    uint8_t* data() const { return static_cast<uint8_t*>(ptr_); }
    size_t size() const { return size_; }  // the bytes requested (the block may be larger)
    explicit operator bool() const { return ptr_ != nullptr; }
    void reset();

   private:
    friend class CachingPool;
    Lease(CachingPool* pool, void* ptr, size_t size) : pool_(pool), ptr_(ptr), size_(size) {}
    CachingPool* pool_ = nullptr;
    void* ptr_ = nullptr;
    size_t size_ = 0;
  };

  explicit CachingPool(MemoryKind kind) : kind_(kind) {}
  ~CachingPool();  // frees every block; outstanding Leases must be gone by then
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;

  // A block of at least `bytes`. OutOfMemory when it cannot be had (over the limit, or
  // the allocation failed even after freeing the cache); other CUDA errors mapped by
  // cuda_status. `what` names the request in error messages.
  Result<Lease> Acquire(size_t bytes, std::string_view what);
  // Frees every idle block. Blocks still leased are untouched.
  void Release();
  // 0 = no limit. Frees idle blocks if the pool already holds more than the limit.
  void SetLimit(int64_t bytes);

  int64_t limit() const { return limit_; }
  int64_t reserved_bytes() const { return reserved_; }  // in use + cached
  int64_t idle_bytes() const;
  int64_t allocations() const { return allocations_; }  // cudaMalloc/cudaHostAlloc calls so far

 private:
  struct Block {
    void* ptr = nullptr;
    size_t bytes = 0;
    bool in_use = false;
  };
  Status Allocate(size_t bytes, void** out, std::string_view what);
  void FreeBlock(void* ptr);
  void GiveBack(void* ptr);
  size_t Rounded(size_t bytes) const;

  MemoryKind kind_;
  int64_t limit_ = 0;
  int64_t reserved_ = 0;
  int64_t allocations_ = 0;
  std::vector<Block> blocks_;
};

// Device memory of the current device (the backend sets the device first).
class DevicePool : public CachingPool {
 public:
  DevicePool() : CachingPool(MemoryKind::kDevice) {}
};

// Page-locked host memory for staging copies.
class PinnedHostPool : public CachingPool {
 public:
  PinnedHostPool() : CachingPool(MemoryKind::kPinnedHost) {}
};

}  // namespace framemill::gpu::cuda
