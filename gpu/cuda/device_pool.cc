#include "gpu/cuda/device_pool.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "engine/cuda/cuda_status.h"

namespace framemill::gpu::cuda {
namespace {

constexpr size_t kDeviceGranule = size_t{2} << 20;  // cudaMalloc's own granularity
constexpr size_t kHostGranule = size_t{1} << 20;
constexpr size_t kMinBlock = 256;

std::string MiB(int64_t bytes) {
  return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB";
}

}  // namespace

CachingPool::Lease& CachingPool::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    reset();
    pool_ = o.pool_;
    ptr_ = o.ptr_;
    size_ = o.size_;
    o.pool_ = nullptr;
    o.ptr_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void CachingPool::Lease::reset() {
  if (pool_ != nullptr && ptr_ != nullptr) pool_->GiveBack(ptr_);
  pool_ = nullptr;
  ptr_ = nullptr;
  size_ = 0;
}

CachingPool::~CachingPool() {
  for (Block& b : blocks_) FreeBlock(b.ptr);
  blocks_.clear();
  // Errors at teardown (e.g. the runtime already unloaded at exit) are not reportable.
  (void)cudaGetLastError();
}

size_t CachingPool::Rounded(size_t bytes) const {
  const size_t g = kind_ == MemoryKind::kDevice ? kDeviceGranule : kHostGranule;
  size_t r = (bytes + g - 1) / g * g;
  if (limit_ > 0 && r > static_cast<size_t>(limit_)) r = bytes;  // rounding must not cross the limit
  return r;
}

int64_t CachingPool::idle_bytes() const {
  int64_t n = 0;
  for (const Block& b : blocks_)
    if (!b.in_use) n += static_cast<int64_t>(b.bytes);
  return n;
}

void CachingPool::FreeBlock(void* ptr) {
  if (ptr == nullptr) return;
  if (kind_ == MemoryKind::kDevice) {
    (void)cudaFree(ptr);
  } else {
    (void)cudaFreeHost(ptr);
  }
}

void CachingPool::GiveBack(void* ptr) {
  for (Block& b : blocks_) {
    if (b.ptr == ptr) {
      b.in_use = false;
      break;
    }
  }
  if (limit_ > 0 && reserved_ > limit_) Release();
}

void CachingPool::Release() {
  std::erase_if(blocks_, [this](const Block& b) {
    if (b.in_use) return false;
    FreeBlock(b.ptr);
    reserved_ -= static_cast<int64_t>(b.bytes);
    return true;
  });
  (void)cudaGetLastError();
}

void CachingPool::SetLimit(int64_t bytes) {
  limit_ = std::max<int64_t>(0, bytes);
  if (limit_ > 0 && reserved_ > limit_) Release();
}

Status CachingPool::Allocate(size_t bytes, void** out, std::string_view what) {
  ++allocations_;
  cudaError_t err = kind_ == MemoryKind::kDevice ? cudaMalloc(out, bytes)
                                                 : cudaHostAlloc(out, bytes, cudaHostAllocDefault);
  if (err == cudaSuccess) return Status::OK();
  *out = nullptr;
  std::string msg(what);
  msg += kind_ == MemoryKind::kDevice ? ": cudaMalloc(" : ": cudaHostAlloc(";
  msg += MiB(static_cast<int64_t>(bytes)) + ")";
  return FromCuda(err, msg);
}

Result<CachingPool::Lease> CachingPool::Acquire(size_t bytes, std::string_view what) {
  bytes = std::max(bytes, kMinBlock);
  // The smallest idle block that holds the request.
  Block* best = nullptr;
  for (Block& b : blocks_) {
    if (!b.in_use && b.bytes >= bytes && (best == nullptr || b.bytes < best->bytes)) best = &b;
  }
  if (best != nullptr) {
    best->in_use = true;
    return Lease(this, best->ptr, bytes);
  }
  if (limit_ > 0) {
    if (static_cast<int64_t>(bytes) > limit_) {
      Release();
      return Status::OutOfMemory(std::string(what) + ": needs " + MiB(static_cast<int64_t>(bytes)) +
                                 ", over the memory limit of " + MiB(limit_));
    }
    if (reserved_ + static_cast<int64_t>(Rounded(bytes)) > limit_) Release();
    if (reserved_ + static_cast<int64_t>(bytes) > limit_) {
      return Status::OutOfMemory(std::string(what) + ": needs " + MiB(static_cast<int64_t>(bytes)) +
                                 " more with " + MiB(reserved_) + " in use; memory limit " +
                                 MiB(limit_));
    }
  }
  size_t size = Rounded(bytes);
  if (limit_ > 0 && reserved_ + static_cast<int64_t>(size) > limit_) size = bytes;
  void* ptr = nullptr;
  Status s = Allocate(size, &ptr, what);
  if (s.IsOutOfMemory()) {
    // Our cache may be what fills the device: give it back and try once more, exactly.
    Release();
    size = bytes;
    s = Allocate(size, &ptr, what);
  }
  if (!s.ok()) return s;
  blocks_.push_back(Block{ptr, size, true});
  reserved_ += static_cast<int64_t>(size);
  return Lease(this, ptr, bytes);
}

}  // namespace framemill::gpu::cuda
