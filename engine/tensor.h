// A host tensor, the engine's input and output, and IEEE half <-> float: what the engine,
// its backends and every device's callers share (gpu/ops.h names them in gpu::). Plain
// data; functions are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace framemill::engine {

enum class TensorType { kFloat32, kFloat16 };

// A dense NCHW tensor in host memory. float16 values are stored as IEEE half bits.
struct Tensor {
  std::vector<int64_t> shape;  // {N, 3, H, W}
  TensorType type = TensorType::kFloat32;
  std::vector<uint8_t> data;
  size_t ElementBytes() const { return type == TensorType::kFloat32 ? 4 : 2; }
  // Element i as float (decoding half if needed).
  float At(size_t i) const;
};

// IEEE 754 half <-> float, round to nearest even.
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
// The same over n values, bit for bit (F16C where the CPU has it; engine/half.cc).
void FloatsToHalves(const float* in, uint16_t* out, size_t n);
void HalvesToFloats(const uint16_t* in, float* out, size_t n);

}  // namespace framemill::engine
