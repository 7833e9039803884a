// kerneld/kernels/fp8.h against the format definitions (tests/kernels/fp8_reference.h) and against
// hand-derived values of the three formats.
#include "kerneld/kernels/fp8.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "gtest/gtest.h"
#include "tests/kernels/fp8_reference.h"

namespace kd {
namespace {

using testing_ref::Bits;
using testing_ref::DecodeRef;
using testing_ref::EncoderRef;
using testing_ref::FromBits;

template <typename F>
struct Traits;
template <>
struct Traits<fp8::E4M3FN> {
  static constexpr DType kDType = DType::kE4M3FN;
};
template <>
struct Traits<fp8::E4M3FNUZ> {
  static constexpr DType kDType = DType::kE4M3FNUZ;
};
template <>
struct Traits<fp8::E5M2> {
  static constexpr DType kDType = DType::kE5M2;
};

template <typename F>
class Fp8FormatTest : public ::testing::Test {};
using Formats = ::testing::Types<fp8::E4M3FN, fp8::E4M3FNUZ, fp8::E5M2>;
TYPED_TEST_SUITE(Fp8FormatTest, Formats);

TYPED_TEST(Fp8FormatTest, DecodesAll256CodesToTheirExactValues) {
  using F = TypeParam;
  for (int c = 0; c < 256; ++c) {
    const double expected = DecodeRef(Traits<F>::kDType, static_cast<uint8_t>(c));
    const float got = fp8::Decode<F>(static_cast<uint8_t>(c));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
    } else {
      EXPECT_EQ(static_cast<double>(got), expected) << "code " << c;
      EXPECT_EQ(std::signbit(got), std::signbit(expected)) << "code " << c;
    }
  }
}

TYPED_TEST(Fp8FormatTest, EncodeOfDecodeIsIdentityForEveryFiniteCode) {
  using F = TypeParam;
  int finite = 0;
  for (int c = 0; c < 256; ++c) {
    const float v = fp8::Decode<F>(static_cast<uint8_t>(c));
    if (!std::isfinite(v)) continue;
    ++finite;
    EXPECT_EQ(fp8::Encode<F>(v), c) << "code " << c << " value " << v;
  }
  // e4m3fn: 256 - 2 NaN; e4m3fnuz: 256 - 1 NaN; e5m2: 256 - 2 Inf - 6 NaN.
  const int expected = std::is_same<F, fp8::E4M3FN>::value     ? 254
                       : std::is_same<F, fp8::E4M3FNUZ>::value ? 255
                                                               : 248;
  EXPECT_EQ(finite, expected);
}

TYPED_TEST(Fp8FormatTest, MaxMatchesTheDefinition) {
  using F = TypeParam;
  EXPECT_EQ(static_cast<double>(F::kMax), EncoderRef(Traits<F>::kDType).max());
  EXPECT_EQ(fp8::Decode<F>(F::kMaxCode), F::kMax);
}

// Every midpoint between two adjacent positive codes is a tie and rounds to the even code; a hair
// above or below rounds to the nearer neighbour. Covers subnormals and the subnormal/normal edge.
TYPED_TEST(Fp8FormatTest, TiesRoundToEvenAndNeighboursToNearest) {
  using F = TypeParam;
  for (int c = 0; c < F::kMaxCode; ++c) {
    const double lo = DecodeRef(Traits<F>::kDType, static_cast<uint8_t>(c));
    const double hi = DecodeRef(Traits<F>::kDType, static_cast<uint8_t>(c + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: a few significant bits
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    const int even = (c % 2 == 0) ? c : c + 1;
    EXPECT_EQ(fp8::Encode<F>(mid), even) << "tie between codes " << c << " and " << c + 1;
    EXPECT_EQ(fp8::Encode<F>(std::nextafter(mid, 0.0f)), c);
    EXPECT_EQ(fp8::Encode<F>(std::nextafter(mid, HUGE_VALF)), c + 1);
    // Same for negative values: the sign bit is set on the magnitude's code.
    const int neg_expected = (F::kFnuz && even == 0) ? 0 : (0x80 | even);
    EXPECT_EQ(fp8::Encode<F>(-mid), neg_expected);
  }
}

TYPED_TEST(Fp8FormatTest, SaturatesAtAndBeyondMaxIncludingInfinity) {
  using F = TypeParam;
  const float max = F::kMax;
  const uint8_t neg_max = static_cast<uint8_t>(0x80 | F::kMaxCode);
  EXPECT_EQ(fp8::Encode<F>(max), F::kMaxCode);
  EXPECT_EQ(fp8::Encode<F>(-max), neg_max);
  EXPECT_EQ(fp8::Encode<F>(std::nextafter(max, HUGE_VALF)), F::kMaxCode);
  EXPECT_EQ(fp8::Encode<F>(max * 2), F::kMaxCode);
  EXPECT_EQ(fp8::Encode<F>(std::numeric_limits<float>::max()), F::kMaxCode);
  EXPECT_EQ(fp8::Encode<F>(HUGE_VALF), F::kMaxCode);
  EXPECT_EQ(fp8::Encode<F>(-HUGE_VALF), neg_max);
}

TYPED_TEST(Fp8FormatTest, NanOfEitherSignGivesThePositiveNanCode) {
  using F = TypeParam;
  const uint8_t nan_code = testing_ref::NanCodeRef(Traits<F>::kDType);
  EXPECT_EQ(F::kNanCode, nan_code);
  EXPECT_EQ(fp8::Encode<F>(FromBits(0x7FC00000u)), nan_code);
  EXPECT_EQ(fp8::Encode<F>(FromBits(0xFFC00000u)), nan_code);
  EXPECT_EQ(fp8::Encode<F>(FromBits(0x7F800001u)), nan_code);  // signalling payload
  EXPECT_EQ(fp8::Encode<F>(FromBits(0xFFFFFFFFu)), nan_code);
}

TYPED_TEST(Fp8FormatTest, TinyValuesRoundToSignedZero) {
  using F = TypeParam;
  const double smallest = DecodeRef(Traits<F>::kDType, 1);
  const float half = static_cast<float>(smallest / 2);
  EXPECT_EQ(fp8::Encode<F>(half), 0);  // tie with 0: even
  EXPECT_EQ(fp8::Encode<F>(std::nextafter(half, HUGE_VALF)), 1);
  EXPECT_EQ(fp8::Encode<F>(FromBits(1)), 0);  // smallest fp32 subnormal
  EXPECT_EQ(fp8::Encode<F>(-FromBits(1)), F::kFnuz ? 0 : 0x80);
  EXPECT_EQ(fp8::Encode<F>(-0.0f), F::kFnuz ? 0 : 0x80);
}

// A dense sweep of fp32 values against the nearest-value search of the reference.
TYPED_TEST(Fp8FormatTest, EncodeMatchesNearestValueSearchOverFp32Sweep) {
  using F = TypeParam;
  const EncoderRef ref(Traits<F>::kDType);
  int64_t checked = 0;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 4099) {
    const float x = FromBits(static_cast<uint32_t>(u));
    ASSERT_EQ(fp8::Encode<F>(x), ref(x)) << "bits 0x" << std::hex << u;
    ++checked;
  }
  EXPECT_GT(checked, 1000000);
}

TEST(Fp8Test, KnownCodes) {
  EXPECT_EQ(fp8::Encode<fp8::E4M3FN>(1.0f), 0x38);
  EXPECT_EQ(fp8::Encode<fp8::E4M3FNUZ>(1.0f), 0x40);
  EXPECT_EQ(fp8::Encode<fp8::E5M2>(1.0f), 0x3C);
  EXPECT_EQ(fp8::Encode<fp8::E4M3FN>(448.0f), 0x7E);
  EXPECT_EQ(fp8::Encode<fp8::E4M3FNUZ>(240.0f), 0x7F);
  EXPECT_EQ(fp8::Encode<fp8::E5M2>(57344.0f), 0x7B);
  EXPECT_EQ(fp8::Encode<fp8::E4M3FN>(0.001953125f), 0x01);     // 2^-9
  EXPECT_EQ(fp8::Encode<fp8::E4M3FNUZ>(0.0009765625f), 0x01);  // 2^-10
  EXPECT_EQ(fp8::Encode<fp8::E5M2>(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_TRUE(std::isinf(fp8::Decode<fp8::E5M2>(0x7C)));
  EXPECT_TRUE(std::isnan(fp8::Decode<fp8::E4M3FN>(0xFF)));
  EXPECT_TRUE(std::isnan(fp8::Decode<fp8::E4M3FNUZ>(0x80)));
}

TEST(Fp8Test, Bf16AndF16ConversionsMatchTheDefinitions) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t c = static_cast<uint16_t>(h);
    const float f16 = fp8::F16ToFloat(c), f16_ref = testing_ref::F16Ref(c);
    if (std::isnan(f16_ref)) {
      EXPECT_TRUE(std::isnan(f16));
    } else {
      EXPECT_EQ(Bits(f16), Bits(f16_ref)) << h;
    }
    EXPECT_EQ(Bits(fp8::BF16ToFloat(c)), Bits(testing_ref::Bf16Ref(c)));
  }
  // To bf16: round to nearest even.
  EXPECT_EQ(fp8::FloatToBF16(FromBits(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(fp8::FloatToBF16(FromBits(0x3F818000u)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(fp8::FloatToBF16(FromBits(0x3F808001u)), 0x3F81);
}

TEST(Fp8Test, E8M0DecodesToPowersOfTwo) {
  for (int c = 0; c < 255; ++c) {
    EXPECT_EQ(static_cast<double>(fp8::E8M0ToFloat(static_cast<uint8_t>(c))),
              std::ldexp(1.0, c - 127));
  }
  EXPECT_TRUE(std::isnan(fp8::E8M0ToFloat(0xFF)));
}

}  // namespace
}  // namespace kd
