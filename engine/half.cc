// Half <-> float over arrays: the engine's CPU kernels keep fp16 tensors as IEEE half bits and
// convert them on every read and write. With F16C (x86-64 since 2012) eight values convert in
// one instruction; the scalar conversions in tensor.cc stay the definition, and the blocks whose
// values F16C would treat differently (NaNs: it keeps their payload, ops.cc does not) go
// through them. tests/gpu/half_test.cc checks every half and the float rounding boundaries.
#include <immintrin.h>

#include "engine/tensor.h"

namespace framemill::engine {
namespace {

bool HaveF16c() {
  static const bool have = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return have;
}

__attribute__((target("avx,f16c"))) void HalvesToFloatsF16c(const uint16_t* in, float* out, size_t n) {
  const __m128i exp_mask = _mm_set1_epi16(0x7C00);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_and_si128(h, exp_mask), exp_mask)) != 0) {
      for (size_t k = i; k < i + 8; ++k) out[k] = HalfToFloat(in[k]);  // an inf or NaN
      continue;
    }
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = HalfToFloat(in[i]);
}

__attribute__((target("avx,f16c"))) void FloatsToHalvesF16c(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 f = _mm256_loadu_ps(in + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)) != 0) {
      for (size_t k = i; k < i + 8; ++k) out[k] = FloatToHalf(in[k]);  // a NaN
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) out[i] = FloatToHalf(in[i]);
}

}  // namespace

void HalvesToFloats(const uint16_t* in, float* out, size_t n) {
  if (HaveF16c()) return HalvesToFloatsF16c(in, out, n);
  for (size_t i = 0; i < n; ++i) out[i] = HalfToFloat(in[i]);
}

void FloatsToHalves(const float* in, uint16_t* out, size_t n) {
  if (HaveF16c()) return FloatsToHalvesF16c(in, out, n);
  for (size_t i = 0; i < n; ++i) out[i] = FloatToHalf(in[i]);
}

}  // namespace framemill::engine
