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
#ifndef KERNELD_KERNELS_CUDA_FP8_ENCODE_H_
#define KERNELD_KERNELS_CUDA_FP8_ENCODE_H_

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

}  // namespace fp8
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_FP8_ENCODE_H_
