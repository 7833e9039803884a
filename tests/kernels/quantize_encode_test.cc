// The branch-free conversions of kernels/cpu/quantize_encode.h give the same bits as the scalar
// ones of kerneld/kernels/fp8.h.
#include "kernels/cpu/quantize_encode.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "tests/kernels/fp8_reference.h"

namespace kd {
namespace {

using testing_ref::Bits;
using testing_ref::FromBits;

template <typename F>
class EncodeLaneTest : public ::testing::Test {};
using Formats = ::testing::Types<fp8::E4M3FN, fp8::E4M3FNUZ, fp8::E5M2>;
TYPED_TEST_SUITE(EncodeLaneTest, Formats);

TYPED_TEST(EncodeLaneTest, MatchesScalarEncodeOverFp32Sweep) {
  using F = TypeParam;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 251) {
    const float x = FromBits(static_cast<uint32_t>(u));
    ASSERT_EQ(cpu_quant::EncodeLane<F>(x), fp8::Encode<F>(x)) << "bits 0x" << std::hex << u;
  }
}

// Every fp32 value within 2^12 ulps of each FP8 value, of each midpoint, and of the
// saturation point, both signs: where rounding decisions are made.
TYPED_TEST(EncodeLaneTest, MatchesScalarEncodeAroundEveryCodeAndMidpoint) {
  using F = TypeParam;
  for (int c = 0; c < 0x80; ++c) {
    const float v = fp8::Decode<F>(static_cast<uint8_t>(c));
    const float next = fp8::Decode<F>(static_cast<uint8_t>(c + 1));
    for (float center : {v, (v + next) / 2}) {
      if (!(center == center)) continue;
      for (int32_t d = -4096; d <= 4096; ++d) {
        const uint32_t b = Bits(center) + static_cast<uint32_t>(d);
        for (uint32_t s : {0u, 0x80000000u}) {
          const float x = FromBits(b ^ s);
          ASSERT_EQ(cpu_quant::EncodeLane<F>(x), fp8::Encode<F>(x))
              << "bits 0x" << std::hex << (b ^ s);
        }
      }
    }
  }
}

TEST(F16ToFloatLaneTest, MatchesScalarConversionForAllCodes) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float lane = cpu_quant::F16ToFloatLane(static_cast<uint16_t>(h));
    const float ref = fp8::F16ToFloat(static_cast<uint16_t>(h));
    EXPECT_EQ(Bits(lane), Bits(ref)) << "f16 0x" << std::hex << h;
  }
}

}  // namespace
}  // namespace kd
