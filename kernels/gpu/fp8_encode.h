// A branch-free form of kd::fp8::Encode for GPU inner loops. fp8::Encode branches on NaN,
// saturation, normal and subnormal targets; in a loop over 64 elements per thread those branches
// cost more than the memory traffic. EncodeBranchFree computes the same byte for every one of the
// 2^32 float inputs (checked exhaustively against fp8::Encode on the device by
// tests/gpu/fp8_encode_test.cc):
//   - normal targets: the same integer round-to-nearest-even as fp8::Encode;
//   - subnormal targets: |x| + 2^(e_sub + 23) in fp32 rounds |x| to a multiple of the smallest
//     subnormal 2^e_sub (IEEE addition is round-to-nearest-even), so the low bits of the sum are
//     the subnormal code, up to 2^M for the smallest normal, exactly as fp8::Encode rounds;
//   - saturation: the normal-path code grows with |x|, so a min() with the largest finite code
//     saturates every |x| >= FP8_MAX, Inf included;
//   - NaN: the format's positive NaN code; e4m3fnuz writes 0x00 for both zeros.
// Plain C++ (host and device), so the host can run the same check.
#ifndef KERNELD_KERNELS_GPU_FP8_ENCODE_H_
#define KERNELD_KERNELS_GPU_FP8_ENCODE_H_

#include <cstdint>

#include "kerneld/kernels/fp8.h"

namespace kd {
namespace fp8 {

template <typename F>
KD_HOST_DEVICE uint8_t EncodeBranchFree(float x) {
  constexpr int kMinNormalExp = 1 - F::kBias;
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + kMinNormalExp) << 23;
  constexpr int kShift = 23 - F::kManBits;
  // 2^(smallest subnormal exponent + 23): its ulp is the smallest subnormal.
  constexpr uint32_t kMagicBits = static_cast<uint32_t>(127 + kMinNormalExp - F::kManBits + 23)
                                  << 23;
  const uint32_t bits = FloatBits(x);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t rounded = abs + ((1u << (kShift - 1)) - 1u) + ((abs >> kShift) & 1u);
  const uint32_t normal_mag =
      (rounded >> kShift) - (static_cast<uint32_t>(127 - F::kBias) << F::kManBits);
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  const float sum = __fadd_rn(BitsToFloat(abs), BitsToFloat(kMagicBits));
#else
  const float sum = BitsToFloat(abs) + BitsToFloat(kMagicBits);
#endif
  const uint32_t subnormal_mag = FloatBits(sum) - kMagicBits;
  uint32_t mag = abs >= kMinNormalBits ? normal_mag : subnormal_mag;
  mag = mag < F::kMaxCode ? mag : F::kMaxCode;
  uint32_t code = sign | mag;
  if (F::kFnuz && mag == 0) code = 0;
  return static_cast<uint8_t>(abs > 0x7F800000u ? F::kNanCode : code);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
#define KD_HAVE_HW_FP8_CVT 1

// Four codes of fp8::Encode<F>(x0..x3), packed little-endian (x0 in the low byte), by the
// hardware conversion cvt.rn.satfinite.{e4m3,e5m2}x2.f32 (sm_89+): IEEE round-to-nearest-even,
// values beyond FP8_MAX (Inf too) saturate to ±FP8_MAX, -0 keeps its sign, as fp8::Encode does.
// A NaN input gives a NaN code whose sign follows the input, unlike fp8::Encode: callers use
// this only on blocks without NaN products (finite amax and scale; see quantize_common.cuh).
// e4m3fnuz has no hardware conversion. Its codes are those of e4m3fn for 2x (the fnuz bias is
// one more, so every fnuz value is half the fn value of the same code; 2x is exact), except
//   - |x| <= 2^-11 rounds to zero, written 0x00 (fnuz has no -0): such x is replaced by +0;
//   - |x| > 232 rounds to code 0x7f (240), which is NaN in e4m3fn: the fn conversion saturates
//     2x to 0x7e, and the low bit is set.
// tests/gpu/cuda_backend_test.cc (Fp8HardwareEncode) checks all 2^32 non-NaN inputs.
template <typename F>
__device__ __forceinline__ uint32_t HwEncodePair(float lo, float hi) {
  uint16_t r;
  if constexpr (F::kExpBits == 5) {
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

template <typename F>
__device__ __forceinline__ uint32_t EncodeFinite4(float x0, float x1, float x2, float x3) {
  if constexpr (!F::kFnuz) {
    return HwEncodePair<F>(x0, x1) | (HwEncodePair<F>(x2, x3) << 16);
  } else {
    const float x[4] = {x0, x1, x2, x3};
    float d[4];
    uint32_t top = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float a = fabsf(x[i]);
      d[i] = a <= 0x1p-11f ? 0.0f : __fmul_rn(x[i], 2.0f);
      top |= (a > 232.0f ? 1u : 0u) << (8 * i);
    }
    return (HwEncodePair<E4M3FN>(d[0], d[1]) | (HwEncodePair<E4M3FN>(d[2], d[3]) << 16)) | top;
  }
}
#endif

}  // namespace fp8
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_FP8_ENCODE_H_
