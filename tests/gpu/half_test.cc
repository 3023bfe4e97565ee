// engine/half.cc's array conversions against the scalar definitions in gpu/ops.cc, bit for bit:
// every half, and floats at every rounding boundary of every half plus a seeded sample.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/ops.h"
#include "tests/support/chaos.h"

namespace framemill::gpu {
namespace {

uint32_t FloatBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

TEST(HalfArrayTest, EveryHalfBecomesTheFloatTheScalarConversionGives) {
  std::vector<uint16_t> halves(65536 + 5);  // + 5: a tail shorter than a block
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> floats(halves.size());
  HalvesToFloats(halves.data(), floats.data(), halves.size());
  int wrong = 0;
  for (size_t i = 0; i < halves.size(); ++i)
    wrong += FloatBits(floats[i]) != FloatBits(HalfToFloat(halves[i]));
  EXPECT_EQ(wrong, 0);
}

TEST(HalfArrayTest, FloatsRoundToTheHalfTheScalarConversionGivesAtEveryBoundary) {
  // Around each float that is exactly a half (and halfway between two), 3 ulps either side,
  // NaNs with payloads, infinities, the overflow edge, float subnormals; then a sample.
  std::vector<float> floats;
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t exact = FloatBits(HalfToFloat(static_cast<uint16_t>(h)));
    const uint32_t next = FloatBits(HalfToFloat(static_cast<uint16_t>(h + 1)));
    const uint32_t mid = exact + (next > exact && ((h + 1) & 0x7FFF) != 0 ? (next - exact) / 2 : 0);
    for (uint32_t centre : {exact, mid})
      for (int d = -3; d <= 3; ++d) floats.push_back(FromBits(centre + static_cast<uint32_t>(d)));
  }
  for (uint32_t b : {0x7F800001u, 0x7FC12345u, 0xFFBFFFFFu, 0x7F800000u, 0xFF800000u, 0x477FF000u,
                     0x477FEFFFu, 0x00000001u, 0x807FFFFFu})
    floats.push_back(FromBits(b));
  std::mt19937 rng(testing::ChaosSeed());
  for (int i = 0; i < 1 << 21; ++i) floats.push_back(FromBits(rng()));
  std::vector<uint16_t> halves(floats.size());
  FloatsToHalves(floats.data(), halves.data(), floats.size());
  int wrong = 0;
  for (size_t i = 0; i < floats.size(); ++i) {
    const bool ok = halves[i] == FloatToHalf(floats[i]);
    if (!ok && wrong < 5) ADD_FAILURE() << std::hex << "float 0x" << FloatBits(floats[i]) << ": 0x" << halves[i];
    wrong += !ok;
  }
  EXPECT_EQ(wrong, 0) << "of " << floats.size();
}

}  // namespace
}  // namespace framemill::gpu
