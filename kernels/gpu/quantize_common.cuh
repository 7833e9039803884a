// Device pieces every CUDA quantizer shares: element access of the three input types, |x| maxima,
// the scale of a block, the FP8 encode of a chunk, and 16-byte chunk loads and stores. The recipe
// is exactly that of kernels/cpu/quantize.cc (bit-exact):
//   amax   = max |x| over the block, NaN if any element is NaN
//   scale  = FP8_MAX / max(amax, eps)          IEEE division (__fdiv_rn)
//   scale  = 2^floor(log2(scale))              pow2 scales only
//   code   = fp8::Encode(x * scale)            IEEE product (__fmul_rn), saturating RNE, computed
//                                              by the hardware conversion (fp8::EncodeFinite4)
//                                              where every product of the block is finite, else
//                                              by fp8::EncodeBranchFree (both give fp8::Encode's
//                                              byte, see fp8_encode.h)
//   stored = 1 / scale                         IEEE division
// A NaN amax stores the quiet NaN 0x7fc00000, the NaN the CPU reference's arithmetic carries.
// mx1x32 takes torchao's e8m0 scale instead (MxScaleCode).
#ifndef KERNELD_KERNELS_GPU_QUANTIZE_COMMON_CUH_
#define KERNELD_KERNELS_GPU_QUANTIZE_COMMON_CUH_

#include <cstdint>
#include <type_traits>

#include "kerneld/kernels/fp8.h"
#include "kernels/gpu/fp8_encode.h"
#include "kernels/gpu/quantize_params.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace quant {

constexpr int kBlock = 128;  // the quantization block edge
constexpr uint32_t kQuietNanBits = 0x7FC00000u;
constexpr uint32_t kInfBits = 0x7F800000u;

// Element access for the three input types: a 16-byte chunk holds kVec elements.
template <InputType kType>
struct Input;
template <>
struct Input<InputType::kBF16> {
  using Storage = uint16_t;
  static __device__ __forceinline__ float ToFloat(Storage v) { return fp8::BF16ToFloat(v); }
};
template <>
struct Input<InputType::kF16> {
  using Storage = uint16_t;
  // The hardware conversion is exact for every finite value and Inf; a NaN stays a NaN, which
  // is all the recipe looks at.
  static __device__ __forceinline__ float ToFloat(Storage v) { return gpu::HalfBitsToFloat(v); }
};
template <>
struct Input<InputType::kF32> {
  using Storage = uint32_t;
  static __device__ __forceinline__ float ToFloat(Storage v) { return fp8::BitsToFloat(v); }
};

template <InputType kType>
__device__ __forceinline__ float ChunkElement(const uint4& chunk, int i) {
  using S = typename Input<kType>::Storage;
  const uint32_t words[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
  if constexpr (sizeof(S) == 4) {
    return Input<kType>::ToFloat(words[i]);
  } else if constexpr (kType == InputType::kBF16) {
    const uint32_t w = words[i / 2];
    return fp8::BitsToFloat(i % 2 == 0 ? w << 16 : w & 0xFFFF0000u);
  } else {
    return Input<kType>::ToFloat(static_cast<S>(words[i / 2] >> (16 * (i % 2))));
  }
}

// max |x| bit pattern of a 16-byte chunk (|x| bits compare as unsigned: NaN above Inf above
// every finite value), as the bits of the fp32 |x|. Two-byte inputs take the maximum of two
// halves at a time (max.u16x2, sm_90).
__device__ __forceinline__ uint32_t MaxU16x2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t r;
  asm("max.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
#else
  return max(a & 0xFFFFu, b & 0xFFFFu) | (max(a >> 16, b >> 16) << 16);
#endif
}
template <InputType kType>
__device__ __forceinline__ uint32_t ChunkAbsMaxBits(const uint4& c) {
  if constexpr (kType == InputType::kF32) {
    return max(max(c.x & 0x7FFFFFFFu, c.y & 0x7FFFFFFFu),
               max(c.z & 0x7FFFFFFFu, c.w & 0x7FFFFFFFu));
  } else {
    constexpr uint32_t kAbs = 0x7FFF7FFFu;
    const uint32_t m2 =
        MaxU16x2(MaxU16x2(c.x & kAbs, c.y & kAbs), MaxU16x2(c.z & kAbs, c.w & kAbs));
    const uint32_t m = max(m2 & 0xFFFFu, m2 >> 16);
    if constexpr (kType == InputType::kBF16) {
      return m << 16;
    } else {
      return fp8::FloatBits(gpu::HalfBitsToFloat(static_cast<uint16_t>(m)));
    }
  }
}

// The two scales of a block from the bits of its amax (|x| bits, so NaN compares highest).
// `finite`: amax and scale are finite, so every product x * quant is finite and the hardware
// conversion gives fp8::Encode's bytes; else (an Inf or NaN in the block, or an eps so small
// that the scale overflows) the block takes the exact software encode.
struct BlockScale {
  float quant;
  float stored;
  bool finite;
};
__device__ __forceinline__ BlockScale ComputeScale(uint32_t amax_bits, float fp8_max, float eps,
                                                   bool pow2) {
  if (amax_bits > kInfBits) {
    const float nan = fp8::BitsToFloat(kQuietNanBits);
    return {nan, nan, false};
  }
  const float amax = fp8::BitsToFloat(amax_bits);
  const float clamped = amax < eps ? eps : amax;
  float scale = __fdiv_rn(fp8_max, clamped);
  if (pow2) scale = fp8::RoundDownPow2(scale);
  const bool finite = amax_bits < kInfBits && (fp8::FloatBits(scale) & kInfBits) != kInfBits;
  return {scale, __fdiv_rn(1.0f, scale), finite};
}

template <int kWidth>
__device__ __forceinline__ uint32_t GroupMax(uint32_t v) {
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset /= 2) {
    v = max(v, gpu::ShflXor(v, offset, kWidth));
  }
  return v;
}

// n / d for 32-bit n and d >= 1 by a multiply-high and one correction step (the magic is
// floor(2^32 / d), 2^32 - 1 for d = 1; the estimate is the quotient or one less).
struct FastDivU32 {
  uint32_t d;
  uint32_t magic;
};
inline FastDivU32 MakeFastDiv(uint32_t d) {
  return {d, d == 1 ? 0xFFFFFFFFu : static_cast<uint32_t>((uint64_t{1} << 32) / d)};
}
__device__ __forceinline__ uint32_t Div(uint32_t n, FastDivU32 f) {
  uint32_t q = gpu::UMulHi(n, f.magic);
  if (n - q * f.d >= f.d) ++q;
  return q;
}

// The codes of one 16-byte chunk of inputs (kVec elements, kVec / 4 words, first element in the
// low byte) at scale `quant`; `finite`: every product of the chunk's block is finite, so the
// hardware conversion gives fp8::Encode's bytes (see the file comment).
template <InputType kType, typename F>
__device__ __forceinline__ void EncodeChunk(
    const uint4& raw, float quant, bool finite,
    uint32_t (&words)[16 / sizeof(typename Input<kType>::Storage) / 4]) {
  constexpr int kVec = 16 / sizeof(typename Input<kType>::Storage);
  float y[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) y[i] = __fmul_rn(ChunkElement<kType>(raw, i), quant);
#if defined(KD_HAVE_HW_FP8_CVT)
  if (finite) {
#pragma unroll
    for (int w = 0; w < kVec / 4; ++w) {
      words[w] = fp8::EncodeFinite4<F>(y[4 * w], y[4 * w + 1], y[4 * w + 2], y[4 * w + 3]);
    }
    return;
  }
#endif
#pragma unroll
  for (int w = 0; w < kVec / 4; ++w) {
    words[w] = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      words[w] |= static_cast<uint32_t>(fp8::EncodeBranchFree<F>(y[4 * w + i])) << (8 * i);
    }
  }
}

constexpr uint32_t kAbsMask = 0x7FFFFFFFu;

// Elements per 16-byte chunk.
template <InputType kType>
constexpr int kVecOf = 16 / static_cast<int>(sizeof(typename Input<kType>::Storage));

// Chunk c of a row of `len` elements (elements [c*kVec, c*kVec + kVec)), zeros past `len`: one
// 16-byte load when `vec` (the row starts 16-byte aligned) and the chunk is whole.
template <InputType kType>
__device__ __forceinline__ uint4 LoadChunk(const typename Input<kType>::Storage* row, int64_t c,
                                           int64_t len, bool vec) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  const int64_t e0 = c * kVec;
  if (vec && e0 + kVec <= len) return *reinterpret_cast<const uint4*>(row + e0);
  uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    if (e0 + i < len) {
      w[i * sizeof(S) / 4] |= static_cast<uint32_t>(row[e0 + i]) << (8 * ((i * sizeof(S)) % 4));
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// The codes of kVec products, packed little-endian into kVec/4 words.
template <typename F, int kVec>
__device__ __forceinline__ void PackCodes(const float (&y)[kVec], uint32_t (&words)[kVec / 4]) {
#if defined(KD_HAVE_HW_FP8_CVT)
  bool nan = false;
#pragma unroll
  for (int i = 0; i < kVec; ++i) nan |= y[i] != y[i];
  if (!nan) {
#pragma unroll
    for (int w = 0; w < kVec / 4; ++w) {
      words[w] = fp8::EncodeFinite4<F>(y[4 * w], y[4 * w + 1], y[4 * w + 2], y[4 * w + 3]);
    }
    return;
  }
#endif
#pragma unroll
  for (int w = 0; w < kVec / 4; ++w) {
    words[w] = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      words[w] |= static_cast<uint32_t>(fp8::EncodeBranchFree<F>(y[4 * w + i])) << (8 * i);
    }
  }
}

// Codes of chunk c of a row of `len` elements: one store when `vec` and the chunk is whole.
template <int kVec>
__device__ __forceinline__ void StoreCodes(uint8_t* row, int64_t c, int64_t len,
                                           const uint32_t (&words)[kVec / 4], bool vec) {
  const int64_t e0 = c * kVec;
  if (vec && e0 + kVec <= len) {
    if constexpr (kVec == 8) {
      *reinterpret_cast<uint2*>(row + e0) = make_uint2(words[0], words[1]);
    } else {
      *reinterpret_cast<uint32_t*>(row + e0) = words[0];
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    if (e0 + i < len) row[e0 + i] = static_cast<uint8_t>(words[i / 4] >> (8 * (i % 4)));
  }
}

// Chunk `raw` times `scale`, encoded and stored as chunk c of `row`.
template <InputType kType, typename F>
__device__ __forceinline__ void EncodeStore(const uint4& raw, float scale, uint8_t* row, int64_t c,
                                            int64_t len, bool vec) {
  constexpr int kVec = kVecOf<kType>;
  float y[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) y[i] = __fmul_rn(ChunkElement<kType>(raw, i), scale);
  uint32_t words[kVec / 4];
  PackCodes<F, kVec>(y, words);
  StoreCodes<kVec>(row, c, len, words, vec);
}

// torchao's to_mx e8m0 exponent S from the bits of amax (see kernels/cpu/quantize.cc).
template <typename F>
__device__ __forceinline__ uint8_t MxScaleCode(uint32_t bits, bool rceil) {
  if ((bits & kInfBits) == kInfBits) return 0xFF;
  if (!rceil) {
    constexpr uint32_t kEmax = (F::kMaxCode >> F::kManBits) - F::kBias;
    const uint32_t e = bits >> 23;
    return static_cast<uint8_t>(e > kEmax ? e - kEmax : 0);
  }
  constexpr float kInvMax = 1.0f / F::kMax;
  const uint32_t d = fp8::FloatBits(__fmul_rn(fp8::BitsToFloat(bits), kInvMax));
  const uint32_t e = d >> 23, man = d & 0x7FFFFFu;
  return static_cast<uint8_t>(e + (e == 0 ? (man > 0x400000u) : (man != 0)));
}

// 2^(127 - s) exactly (s = 254: the subnormal 2^-127); NaN for s = 0xff.
__device__ __forceinline__ float MxMultiplier(uint8_t s) {
  if (s == 0xFF) return fp8::BitsToFloat(kQuietNanBits);
  const uint32_t e = 254u - s;
  return fp8::BitsToFloat(e == 0 ? 0x00400000u : e << 23);
}

// The maximum of `v` over the CTA (gpu::BlockDimX() a multiple of 32), through `buf` (one word per
// warp). Callers that reduce again alternate between two buffers: the barrier of the next
// reduction keeps a fast warp from overwriting a buffer a slow warp still reads.
__device__ __forceinline__ uint32_t CtaMax(uint32_t v, uint32_t* buf) {
  v = GroupMax<32>(v);
  if (gpu::ThreadIdxX() % gpu::kLaneGroup == 0) buf[gpu::ThreadIdxX() / gpu::kLaneGroup] = v;
  gpu::SyncThreads();
  uint32_t m = 0;
  const int warps = static_cast<int>(gpu::BlockDimX() / gpu::kLaneGroup);
  for (int w = 0; w < warps; ++w) m = max(m, buf[w]);
  return m;
}

// 16 bytes from global to shared memory by cp.async, zero-filled past `src_bytes` (0: nothing
// read; `src` must still be a valid, 16-byte aligned address). AMD has no asynchronous global to
// LDS copy the compiler exposes for gfx9: the chunk goes through registers there, and the commit
// and wait calls are no-ops (the copy is complete when the call returns).
__device__ __forceinline__ void CpAsync16(void* smem, const void* src, int src_bytes) {
#if KD_GPU_NVIDIA
  const auto dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
#else
  if (src_bytes == 16) {
    *static_cast<uint4*>(smem) = *static_cast<const uint4*>(src);
    return;
  }
  // A partial chunk byte by byte, every index a constant (no private-memory array).
  const auto* in = static_cast<const uint8_t*>(src);
  uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    if (i < src_bytes) w[i / 4] |= static_cast<uint32_t>(in[i]) << (8 * (i % 4));
  }
  *static_cast<uint4*>(smem) = make_uint4(w[0], w[1], w[2], w[3]);
#endif
}

// Commits the cp.async copies issued since the last commit as one group.
__device__ __forceinline__ void CpAsyncCommit() {
#if KD_GPU_NVIDIA
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most `kPending` committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
#if KD_GPU_NVIDIA
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

__device__ __forceinline__ void CpAsyncWaitAll() {
  CpAsyncCommit();
  CpAsyncWait<0>();
}

// The two elements of a word of a two-byte row (columns 2i, 2i+1).
template <InputType kType>
__device__ __forceinline__ void PairElements(uint32_t w, float& a, float& b) {
  if constexpr (kType == InputType::kBF16) {
    a = fp8::BitsToFloat(w << 16);
    b = fp8::BitsToFloat(w & 0xFFFF0000u);
  } else {
    a = gpu::HalfBitsToFloat(static_cast<uint16_t>(w & 0xFFFFu));
    b = gpu::HalfBitsToFloat(static_cast<uint16_t>(w >> 16));
  }
}

// The fp32 |x| bits of half `i` of a word of two-byte |x| patterns.
template <InputType kType>
__device__ __forceinline__ uint32_t HalfAbsBits(uint32_t packed, int i) {
  const uint32_t h = (packed >> (16 * i)) & 0xFFFFu;
  if constexpr (kType == InputType::kBF16) {
    return h << 16;
  } else {
    return fp8::FloatBits(gpu::HalfBitsToFloat(static_cast<uint16_t>(h)));
  }
}

// Four codes, packed little-endian: the hardware conversion when `hw` (no product is NaN),
// else the exact software encode.
template <typename F>
__device__ __forceinline__ uint32_t Encode4(bool hw, float y0, float y1, float y2, float y3) {
#if defined(KD_HAVE_HW_FP8_CVT)
  if (hw) return fp8::EncodeFinite4<F>(y0, y1, y2, y3);
#endif
  return static_cast<uint32_t>(fp8::EncodeBranchFree<F>(y0)) |
         (static_cast<uint32_t>(fp8::EncodeBranchFree<F>(y1)) << 8) |
         (static_cast<uint32_t>(fp8::EncodeBranchFree<F>(y2)) << 16) |
         (static_cast<uint32_t>(fp8::EncodeBranchFree<F>(y3)) << 24);
}

// The codes of 16 consecutive rows of two adjacent columns of a two-byte tile in shared memory
// (`at`: the first row's word; rows `pitch` bytes apart) at the columns' scales qa and qb.
template <InputType kType, typename F>
__device__ __forceinline__ void EncodePair16(const unsigned char* at, int pitch, float qa, float qb,
                                             bool hwa, bool hwb, uint4& ya_codes, uint4& yb_codes) {
  uint32_t ca[4], cb[4];
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    float ya[4], yb[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float a, b;
      PairElements<kType>(*reinterpret_cast<const uint32_t*>(at + (4 * g + i) * pitch), a, b);
      ya[i] = __fmul_rn(a, qa);
      yb[i] = __fmul_rn(b, qb);
    }
    ca[g] = Encode4<F>(hwa, ya[0], ya[1], ya[2], ya[3]);
    cb[g] = Encode4<F>(hwb, yb[0], yb[1], yb[2], yb[3]);
  }
  ya_codes = make_uint4(ca[0], ca[1], ca[2], ca[3]);
  yb_codes = make_uint4(cb[0], cb[1], cb[2], cb[3]);
}

// 16 codes to Y row `dst` (columns m .. m + 15 of Y, those in [lo, hi)): one 16-byte store
// when `vec` and all 16 are in range.
__device__ __forceinline__ void StoreCodes16(uint8_t* dst, int64_t m, int64_t lo, int64_t hi,
                                             const uint4& v, bool vec) {
  if (vec && m >= lo && m + 16 <= hi) {
    *reinterpret_cast<uint4*>(dst) = v;
    return;
  }
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int b = 0; b < 16; ++b) {
    if (m + b >= lo && m + b < hi) dst[b] = static_cast<uint8_t>(words[b / 4] >> (8 * (b % 4)));
  }
}

}  // namespace quant
}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_QUANTIZE_COMMON_CUH_
