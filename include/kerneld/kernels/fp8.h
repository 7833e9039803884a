// FP8 and other narrow-float conversions, one header for host and device code (CPU, CUDA, HIP).
//
// Encoding is saturating and rounds to nearest, ties to even:
//   - |x| >= FP8_MAX (Inf included) gives ±FP8_MAX;
//   - NaN gives the format's positive NaN code (0x7f for e4m3fn and e5m2, 0x80 for e4m3fnuz);
//     the sign of a NaN is not kept, so that every backend writes the same byte;
//   - values under the smallest subnormal round to (signed) zero; e4m3fnuz has no -0 and writes
//     0x00 for both zeros.
// Only integer arithmetic and exact power-of-two products are used, so the result is the same
// bit pattern on every compiler and device.
#ifndef KERNELD_KERNELS_FP8_H_
#define KERNELD_KERNELS_FP8_H_

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KD_HOST_DEVICE __host__ __device__ __forceinline__
#elif defined(__HIPCC__)
// HIP's __forceinline__ comes with its runtime header, which this header does not need.
#define KD_HOST_DEVICE __host__ __device__ inline __attribute__((always_inline))
#else
#define KD_HOST_DEVICE inline
#endif

namespace kd {
namespace fp8 {

KD_HOST_DEVICE uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#elif defined(__HIP_DEVICE_COMPILE__)
  return __builtin_bit_cast(uint32_t, f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

KD_HOST_DEVICE float BitsToFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#elif defined(__HIP_DEVICE_COMPILE__)
  return __builtin_bit_cast(float, u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

// Format traits. kMaxCode is the positive code of FP8_MAX.
struct E4M3FN {
  static constexpr int kExpBits = 4, kManBits = 3, kBias = 7;
  static constexpr bool kFnuz = false, kHasInf = false;
  static constexpr uint8_t kMaxCode = 0x7E, kNanCode = 0x7F;
  static constexpr float kMax = 448.0f;
};
struct E4M3FNUZ {
  static constexpr int kExpBits = 4, kManBits = 3, kBias = 8;
  static constexpr bool kFnuz = true, kHasInf = false;
  static constexpr uint8_t kMaxCode = 0x7F, kNanCode = 0x80;
  static constexpr float kMax = 240.0f;
};
struct E5M2 {
  static constexpr int kExpBits = 5, kManBits = 2, kBias = 15;
  static constexpr bool kFnuz = false, kHasInf = true;
  static constexpr uint8_t kMaxCode = 0x7B, kNanCode = 0x7F;
  static constexpr float kMax = 57344.0f;
};

// 2^e as a float, for -126 <= e <= 127.
KD_HOST_DEVICE float Pow2(int e) { return BitsToFloat(static_cast<uint32_t>(e + 127) << 23); }

template <typename F>
KD_HOST_DEVICE uint8_t Encode(float x) {
  const uint32_t bits = FloatBits(x);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return F::kNanCode;
  if (BitsToFloat(abs) >= F::kMax) return static_cast<uint8_t>(sign | F::kMaxCode);
  constexpr int kMinNormalExp = 1 - F::kBias;
  const int exp = static_cast<int>(abs >> 23) - 127;
  uint32_t mag;
  if (exp >= kMinNormalExp) {
    // Normal in the target: drop 23-M mantissa bits with round-to-nearest-even, then rebias.
    constexpr int kShift = 23 - F::kManBits;
    const uint32_t rounded = abs + ((1u << (kShift - 1)) - 1u) + ((abs >> kShift) & 1u);
    mag = (rounded >> kShift) - (static_cast<uint32_t>(127 - F::kBias) << F::kManBits);
  } else if ((abs >> 23) == 0) {
    mag = 0;  // an fp32 subnormal is far under the smallest FP8 subnormal
  } else {
    // Subnormal in the target: the value in units of the smallest subnormal, 2^(kMinNormalExp-M),
    // rounded to nearest even. Rounding up to 2^M lands on the smallest normal, which is right.
    const uint32_t sig = (abs & 0x7FFFFFu) | 0x800000u;
    const int shift = 23 + kMinNormalExp - F::kManBits - exp;  // > 23 - M here
    if (shift >= 26) {
      mag = 0;  // under half of the smallest subnormal
    } else {
      mag = sig >> shift;
      const uint32_t rem = sig & ((1u << shift) - 1u);
      const uint32_t half = 1u << (shift - 1);
      if (rem > half || (rem == half && (mag & 1u))) ++mag;
    }
  }
  if (F::kFnuz && mag == 0) return 0;
  return static_cast<uint8_t>(sign | mag);
}

template <typename F>
KD_HOST_DEVICE float Decode(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t mag = code & 0x7Fu;
  constexpr uint32_t kManMask = (1u << F::kManBits) - 1u;
  constexpr uint32_t kExpAllOnes = (1u << F::kExpBits) - 1u;
  const float nan = BitsToFloat(0x7FC00000u);
  if (F::kFnuz) {
    if (code == 0x80u) return nan;
  } else if (F::kHasInf) {
    if ((mag >> F::kManBits) == kExpAllOnes) {
      return (mag & kManMask) ? nan : BitsToFloat(sign | 0x7F800000u);
    }
  } else if (mag == 0x7Fu) {
    return nan;
  }
  const uint32_t exp = mag >> F::kManBits;
  const uint32_t man = mag & kManMask;
  if (exp == 0) {
    const float v = static_cast<float>(man) * Pow2(1 - F::kBias - F::kManBits);
    return BitsToFloat(FloatBits(v) | sign);
  }
  return BitsToFloat(sign | ((exp - F::kBias + 127u) << 23) | (man << (23 - F::kManBits)));
}

// bfloat16 <-> float. To bf16 rounds to nearest even; NaN stays a quiet NaN.
KD_HOST_DEVICE float BF16ToFloat(uint16_t h) { return BitsToFloat(static_cast<uint32_t>(h) << 16); }
KD_HOST_DEVICE uint16_t FloatToBF16(float f) {
  const uint32_t u = FloatBits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// IEEE binary16 -> float (exact).
KD_HOST_DEVICE float F16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  if (exp == 0x1Fu) return BitsToFloat(sign | 0x7F800000u | (man << 13));
  if (exp == 0) {
    const float v = static_cast<float>(man) * Pow2(-24);
    return BitsToFloat(FloatBits(v) | sign);
  }
  return BitsToFloat(sign | ((exp + 112u) << 23) | (man << 13));
}

// e8m0 (MX scale) -> float: 2^(code-127); 0xff is NaN. Code 0 is 2^-127, an fp32 subnormal.
KD_HOST_DEVICE float E8M0ToFloat(uint8_t code) {
  if (code == 0xFFu) return BitsToFloat(0x7FC00000u);
  if (code == 0) return BitsToFloat(0x00400000u);
  return BitsToFloat(static_cast<uint32_t>(code) << 23);
}

// The largest power of two <= x, for finite x > 0 in the normal range; other values pass through.
KD_HOST_DEVICE float RoundDownPow2(float x) {
  const uint32_t u = FloatBits(x);
  const uint32_t exp = (u >> 23) & 0xFFu;
  if (exp == 0 || exp == 0xFFu) return x;
  return BitsToFloat(u & 0xFF800000u);
}

}  // namespace fp8
}  // namespace kd

#endif  // KERNELD_KERNELS_FP8_H_
