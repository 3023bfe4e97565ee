// What the oneDNN backend's files share (engine/dnnl/ only): oneDNN's names, the shape of a
// channels-last tensor, cache keys, a grow-only host buffer, and errors thrown inside a step
// and turned into a Status at its edge (DnnlKernels::Guard).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "base/status.h"
#include "engine/kernels.h"

namespace framemill::engine::dnnl_detail {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;
using Dims = memory::dims;

// The 4-D shape and element type of a channels-last tensor held in a buffer: fp32, or bf16
// (the convolutions' output in bf16 mode: half the buffer's bytes).
struct Nhwc {
  int64_t n = 0, c = 0, h = 0, w = 0;
  Dt dt = Dt::f32;
  bool operator==(const Nhwc& o) const { return n == o.n && c == o.c && h == o.h && w == o.w && dt == o.dt; }
  int64_t elements() const { return n * c * h * w; }
  Dims dims() const { return {n, c, h, w}; }
  memory::desc md() const { return memory::desc(dims(), dt, Tag::nhwc); }
  Nhwc As(Dt t) const { Nhwc o = *this; o.dt = t; return o; }
};

// A cache key from a list of values (the fields of a step's parameters).
inline std::string Key(std::initializer_list<int64_t> v) {
  std::string k(v.size() * sizeof(int64_t), '\0');
  size_t at = 0;
  for (int64_t x : v) { std::memcpy(&k[at], &x, sizeof x); at += sizeof x; }
  return k;
}

inline int64_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline std::string ActKey(const ActivationParams& a) {
  return Key({static_cast<int64_t>(a.kind), Bits(a.alpha), Bits(a.lo), Bits(a.hi)});
}

inline size_t Align(size_t n) { return (n + 255) / 256 * 256; }

// A grow-only host buffer for the kernels' own temporaries.
class Temp {
 public:
  Temp() = default;
  Temp(const Temp&) = delete;
  Temp& operator=(const Temp&) = delete;
  ~Temp() { std::free(p_); }
  void* Get(size_t bytes) {
    if (bytes > size_) {
      std::free(p_);
      size_ = (bytes + 4095) / 4096 * 4096;
      p_ = std::aligned_alloc(64, size_);
      if (!p_) { size_ = 0; throw std::bad_alloc(); }
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  size_t size_ = 0;
};

// A Status thrown inside a step (Check), returned by the step's Guard.
struct StatusError {
  Status status;
};
inline void Check(Status s) {
  if (!s.ok()) throw StatusError{std::move(s)};
}

// Dense row-major strides of `d`.
inline Dims DenseStrides(const Dims& d) {
  Dims s(d.size());
  int64_t acc = 1;
  for (size_t k = d.size(); k-- > 0;) { s[k] = acc; acc *= d[k]; }
  return s;
}

// `n` added to what a step has noted: the worse kind stays, the texts are joined.
inline void Merge(StepNote* into, const StepNote& n) {
  if (n.kind == StepNote::Kind::kNone) return;
  if (into->what.find(n.what) != std::string::npos) return;
  into->what += (into->what.empty() ? "" : "; ") + n.what;
  if (static_cast<int>(n.kind) > static_cast<int>(into->kind)) into->kind = n.kind;
}

}  // namespace framemill::engine::dnnl_detail
