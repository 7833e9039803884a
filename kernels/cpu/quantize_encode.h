// Branch-free element conversions for the CPU quantizer's inner loops. Each gives the same bits as
// its scalar counterpart in kerneld/kernels/fp8.h for every input (tests/kernels/
// quantize_encode_test.cc sweeps the fp32 range against fp8::Encode), but is written with selects
// instead of branches so that GCC vectorises loops over it. They assume the default floating-point
// environment (round to nearest even, no flush-to-zero), which kerneld never changes.
#ifndef KERNELD_KERNELS_CPU_QUANTIZE_ENCODE_H_
#define KERNELD_KERNELS_CPU_QUANTIZE_ENCODE_H_

#include <cstdint>

#include "kerneld/kernels/fp8.h"

#define KD_ALWAYS_INLINE inline __attribute__((always_inline))

namespace kd {
namespace cpu_quant {

// fp32 bit pattern of F::kMax, derived from the format's max code.
template <typename F>
constexpr uint32_t MaxBits() {
  constexpr uint32_t kManMask = (1u << F::kManBits) - 1u;
  return ((static_cast<uint32_t>(F::kMaxCode >> F::kManBits) - F::kBias + 127u) << 23) |
         ((F::kMaxCode & kManMask) << (23 - F::kManBits));
}

// fp8::Encode<F>(v), branch-free: saturating, round to nearest even, NaN to the positive NaN code.
template <typename F>
KD_ALWAYS_INLINE uint8_t EncodeLane(float v) {
  constexpr int kShift = 23 - F::kManBits;
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(128 - F::kBias) << 23;
  // Adding 2^(24 - kBias - kManBits) leaves the value in units of the smallest FP8 subnormal in
  // the low mantissa bits, rounded to nearest even by the FPU.
  constexpr uint32_t kSubnormalMagicBits = static_cast<uint32_t>(151 - F::kBias - F::kManBits)
                                           << 23;
  const uint32_t bits = fp8::FloatBits(v);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t abs = bits & 0x7FFFFFFFu;
  const uint32_t rounded = abs + ((1u << (kShift - 1)) - 1u) + ((abs >> kShift) & 1u);
  const uint32_t normal =
      (rounded >> kShift) - (static_cast<uint32_t>(127 - F::kBias) << F::kManBits);
  const float magic = fp8::BitsToFloat(kSubnormalMagicBits);
  const uint32_t subnormal = fp8::FloatBits(fp8::BitsToFloat(abs) + magic) - kSubnormalMagicBits;
  uint32_t mag = abs < kMinNormalBits ? subnormal : normal;
  mag = abs >= MaxBits<F>() ? static_cast<uint32_t>(F::kMaxCode) : mag;
  uint32_t code = sign | mag;
  if (F::kFnuz) code = mag == 0 ? 0u : code;
  code = abs > 0x7F800000u ? static_cast<uint32_t>(F::kNanCode) : code;
  return static_cast<uint8_t>(code);
}

// fp8::F16ToFloat, branch-free: the exponent/mantissa bits placed in an fp32 and multiplied by
// 2^112 (exact for normals and subnormals alike); Inf/NaN keep their payload.
KD_ALWAYS_INLINE float F16ToFloatLane(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7FFFu;
  const uint32_t finite =
      fp8::FloatBits(fp8::BitsToFloat(em << 13) * fp8::BitsToFloat(0x77800000u));
  const uint32_t special = 0x7F800000u | ((em & 0x3FFu) << 13);
  return fp8::BitsToFloat(sign | (em >= 0x7C00u ? special : finite));
}

KD_ALWAYS_INLINE float BF16ToFloatLane(uint16_t h) {
  return fp8::BitsToFloat(static_cast<uint32_t>(h) << 16);
}

}  // namespace cpu_quant
}  // namespace kd

#endif  // KERNELD_KERNELS_CPU_QUANTIZE_ENCODE_H_
