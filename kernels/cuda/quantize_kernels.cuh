// The blockwise FP8 quantizer, one kernel template for 1x128 and 128x128 blocks of Y = X (the
// fast path; every other granularity and Y = Xᵀ go through the other quantizers).
// Included by one .cu file per FP8 format so that the formats compile in parallel. The recipe is
// exactly that of kernels/cpu/quantize.cc (bit-exact):
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
#ifndef KERNELD_KERNELS_CUDA_QUANTIZE_KERNELS_CUH_
#define KERNELD_KERNELS_CUDA_QUANTIZE_KERNELS_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kerneld/kernels/fp8.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/fp8_encode.h"

namespace kd {
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
  static __device__ __forceinline__ float ToFloat(Storage v) {
    return __half2float(__ushort_as_half(v));
  }
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
      return fp8::FloatBits(__half2float(__ushort_as_half(static_cast<uint16_t>(m))));
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
    v = max(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset, kWidth));
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
  uint32_t q = __umulhi(n, f.magic);
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

// Launch shape of the blockwise kernel. A work item is kItemBlocks 1x128 blocks that follow each
// other in row-major order (8 KB of two-byte inputs), or one 128x128 tile; one CTA per item.
// Thread t holds kChunks 16-byte chunks of its item: chunk u is column t % kLanes of item row
// u * kRowsPerPass + t / kLanes (an item row is a block for 1x128, a tile row for 128x128).
// NOTE: measured on H100 (bench/RESULTS.md, "CUDA quantize and pad"): one small item per CTA
// and a grid of every item in row-major order beat a persistent grid of resident CTAs walking
// items with the next item's loads in flight (ranges or round-robin, one or two register sets)
// by 0.04-0.11 of the copy bandwidth at every shape. Other CTA sizes and chunk counts came within
// 0.03 where registers allowed 1024+ resident threads per SM; these keep 1536 (1x128) and 1024
// (128x128) resident without spills.
template <InputType kType, bool kTile128>
struct Geometry {
  static constexpr int kVec = 16 / static_cast<int>(sizeof(typename Input<kType>::Storage));
  static constexpr int kLanes = kBlock / kVec;  // threads per 128-element row
  static constexpr int kThreads = kTile128 ? 512 : 256;
  static constexpr int kMinBlocksPerSm = kTile128 ? 2 : 6;
  static constexpr int kRowsPerPass = kThreads / kLanes;
  static constexpr int kChunks = kTile128 ? kBlock / kRowsPerPass : 2;
  static constexpr uint32_t kItemBlocks = kTile128 ? 1 : kRowsPerPass * kChunks;
  static_assert(!kTile128 || kRowsPerPass * kChunks == kBlock, "an item is one tile");
  static_assert(kTile128 || kLanes >= kChunks, "one lane per chunk computes its scales");
};

// Quantizes work item blockIdx.x (see Geometry). `units`: the 1x128 blocks (m * k / 128) or
// 128x128 tiles (ceil(m / 128) * k / 128) of X; `kb`: k / 128. kDense (1x128 only): rows of X and
// Y are contiguous (stride k), so block b starts at element 128 b of both; else the block's row
// and column come from a division by kb. `vec_in`/`vec_out`: the tensors allow 16-byte (one
// chunk's inputs) and kVec-byte (its codes) accesses; else element accesses.
template <InputType kType, typename F, bool kTile128, bool kDense>
__global__ void __launch_bounds__(Geometry<kType, kTile128>::kThreads,
                                  Geometry<kType, kTile128>::kMinBlocksPerSm)
    QuantizeBlockwiseKernel(QuantizeParams p, FastDivU32 kb, uint32_t units, bool vec_in,
                            bool vec_out) {
  using G = Geometry<kType, kTile128>;
  using S = typename Input<kType>::Storage;
  constexpr int kVec = G::kVec;
  constexpr int kLanes = G::kLanes;
  constexpr int kChunks = G::kChunks;
  const uint32_t item = blockIdx.x;
  const int tid = threadIdx.x;
  const int lane_col = tid % kLanes;
  const int item_row = tid / kLanes;
  const S* input = static_cast<const S*>(p.input);

  // Element offsets of chunk u in X and Y; `valid` is false past the end of X.
  struct Loc {
    int64_t in, out;
    bool valid;
  };
  auto locate = [&](int u) -> Loc {
    if constexpr (kTile128) {
      const uint32_t tile_row = Div(item, kb);
      const int64_t row = static_cast<int64_t>(tile_row) * kBlock + u * G::kRowsPerPass + item_row;
      const int64_t col = static_cast<int64_t>(item - tile_row * kb.d) * kBlock + lane_col * kVec;
      return {row * p.input_stride + col, row * p.output_stride + col, row < p.m};
    } else {
      const uint32_t block =
          item * G::kItemBlocks + static_cast<uint32_t>(u * G::kRowsPerPass + item_row);
      if constexpr (kDense) {
        const int64_t offset = static_cast<int64_t>(block) * kBlock + lane_col * kVec;
        return {offset, offset, block < units};
      } else {
        const uint32_t row = Div(block, kb);
        const int64_t col = static_cast<int64_t>(block - row * kb.d) * kBlock + lane_col * kVec;
        return {row * p.input_stride + col, row * p.output_stride + col, block < units};
      }
    }
  };

  // Every load first, all in flight, then the amax, then the codes.
  uint4 raw[kChunks];
#pragma unroll
  for (int u = 0; u < kChunks; ++u) {
    const Loc l = locate(u);
    raw[u] = make_uint4(0, 0, 0, 0);
    if (l.valid) {
      const S* src = input + l.in;
      if (vec_in) {
        raw[u] = *reinterpret_cast<const uint4*>(src);
      } else {
        uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          w[i * sizeof(S) / 4] |= static_cast<uint32_t>(src[i]) << (8 * ((i * sizeof(S)) % 4));
        }
        raw[u] = make_uint4(w[0], w[1], w[2], w[3]);
      }
    }
  }

  // amax bits per chunk (|x| bits compare as unsigned: NaN above Inf above every finite).
  uint32_t amax[kChunks];
#pragma unroll
  for (int u = 0; u < kChunks; ++u) amax[u] = ChunkAbsMaxBits<kType>(raw[u]);

  float quant[kTile128 ? 1 : kChunks];
  bool finite[kTile128 ? 1 : kChunks];
  if constexpr (kTile128) {
    __shared__ uint32_t warp_max[G::kThreads / 32];
    uint32_t a = 0;
#pragma unroll
    for (int u = 0; u < kChunks; ++u) a = max(a, amax[u]);
    a = GroupMax<32>(a);
    if (tid % 32 == 0) warp_max[tid / 32] = a;
    __syncthreads();
    a = 0;
#pragma unroll
    for (int w = 0; w < G::kThreads / 32; ++w) a = max(a, warp_max[w]);
    const BlockScale sc = ComputeScale(a, F::kMax, p.eps, p.pow2_scales);
    quant[0] = sc.quant;
    finite[0] = sc.finite;
    if (tid == 0) {
      const uint32_t tile_row = Div(item, kb);
      p.scales[static_cast<int64_t>(tile_row) * p.scales_stride + (item - tile_row * kb.d)] =
          sc.stored;
    }
  } else {
    // NOTE: two IEEE divisions per block cost more than the block's conversion; so lane l of
    // the kLanes lanes sharing a block computes the scales of chunk l only and hands the quant
    // scale to the other lanes by shuffle.
    uint32_t mine = 0;
#pragma unroll
    for (int u = 0; u < kChunks; ++u) {
      amax[u] = GroupMax<kLanes>(amax[u]);
      if (lane_col == u) mine = amax[u];
    }
    const BlockScale own = ComputeScale(mine, F::kMax, p.eps, p.pow2_scales);
    const uint32_t block =
        item * G::kItemBlocks + static_cast<uint32_t>(lane_col * G::kRowsPerPass + item_row);
    if (lane_col < kChunks && block < units) {
      const uint32_t row = Div(block, kb);
      const uint32_t col = block - row * kb.d;
      const int64_t s = p.k_block_major_scales ? static_cast<int64_t>(col) * p.scales_stride + row
                                               : static_cast<int64_t>(row) * p.scales_stride + col;
      p.scales[s] = own.stored;
    }
    const int lane_base = (tid % 32) / kLanes * kLanes;
#pragma unroll
    for (int u = 0; u < kChunks; ++u) {
      quant[u] = __shfl_sync(0xFFFFFFFFu, own.quant, lane_base + u);
      finite[u] = amax[u] < kInfBits && (fp8::FloatBits(quant[u]) & kInfBits) != kInfBits;
    }
  }

#pragma unroll
  for (int u = 0; u < kChunks; ++u) {
    const Loc l = locate(u);
    uint32_t words[kVec / 4];
    EncodeChunk<kType, F>(raw[u], quant[kTile128 ? 0 : u], finite[kTile128 ? 0 : u], words);
    if (l.valid) {
      uint8_t* dst = p.output + l.out;
      if (vec_out) {
        if constexpr (kVec == 8) {
          *reinterpret_cast<uint2*>(dst) = make_uint2(words[0], words[1]);
        } else {
          *reinterpret_cast<uint32_t*>(dst) = words[0];
        }
      } else {
#pragma unroll
        for (int i = 0; i < kVec; ++i) dst[i] = static_cast<uint8_t>(words[i / 4] >> (8 * (i % 4)));
      }
    }
  }
}

template <InputType kType, typename F, bool kTile128>
cudaError_t LaunchQuantizeVariant(const QuantizeParams& p, cudaStream_t stream) {
  using G = Geometry<kType, kTile128>;
  using S = typename Input<kType>::Storage;
  const auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  const bool vec_in = addr(p.input) % 16 == 0 && (p.input_stride * sizeof(S)) % 16 == 0;
  // One chunk's codes are stored at a time.
  const bool vec_out = addr(p.output) % G::kVec == 0 && p.output_stride % G::kVec == 0;
  const int64_t kb = p.k / kBlock;
  const int64_t units = kTile128 ? (p.m + kBlock - 1) / kBlock * kb : p.m * kb;
  // Block and tile indices are 32-bit: 2^31 blocks are 2^38 elements, more than a device holds.
  if (kb < 1 || units < 1 || units > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
  const int64_t items = (units + G::kItemBlocks - 1) / G::kItemBlocks;
  const FastDivU32 div = MakeFastDiv(static_cast<uint32_t>(kb));
  const auto n = static_cast<uint32_t>(units);
  const dim3 grid(static_cast<unsigned>(items));
  if constexpr (!kTile128) {
    if (p.input_stride == p.k && p.output_stride == p.k) {
      QuantizeBlockwiseKernel<kType, F, false, true>
          <<<grid, G::kThreads, 0, stream>>>(p, div, n, vec_in, vec_out);
      return cudaGetLastError();
    }
  }
  QuantizeBlockwiseKernel<kType, F, kTile128, false>
      <<<grid, G::kThreads, 0, stream>>>(p, div, n, vec_in, vec_out);
  return cudaGetLastError();
}

template <typename F>
cudaError_t LaunchQuantizeFormat(const QuantizeParams& p, cudaStream_t stream) {
  auto by_type = [&](auto tile128) -> cudaError_t {
    constexpr bool kTile128 = decltype(tile128)::value;
    switch (p.input_type) {
      case InputType::kBF16:
        return LaunchQuantizeVariant<InputType::kBF16, F, kTile128>(p, stream);
      case InputType::kF16:
        return LaunchQuantizeVariant<InputType::kF16, F, kTile128>(p, stream);
      case InputType::kF32:
        return LaunchQuantizeVariant<InputType::kF32, F, kTile128>(p, stream);
    }
    return cudaErrorInvalidValue;
  };
  return p.tile_128x128 ? by_type(std::true_type{}) : by_type(std::false_type{});
}

}  // namespace quant
}  // namespace cuda
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_QUANTIZE_KERNELS_CUH_
