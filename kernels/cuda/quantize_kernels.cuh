// The blockwise FP8 quantizer, one kernel template for 1x128 and 128x128 blocks of Y = X (the
// fast path; every other granularity and Y = Xᵀ go through quantize_generic.cu).
// Included by one .cu file per FP8 format so that the formats compile in parallel. The recipe is exactly that of kernels/cpu/quantize.cc (bit-exact):
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

constexpr int kBlock = 128;    // the quantization block edge
constexpr int kThreads = 256;  // per CTA; one CTA quantizes one 128x128 tile of X
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
    return max(max(c.x & 0x7FFFFFFFu, c.y & 0x7FFFFFFFu), max(c.z & 0x7FFFFFFFu, c.w & 0x7FFFFFFFu));
  } else {
    constexpr uint32_t kAbs = 0x7FFF7FFFu;
    const uint32_t m2 = MaxU16x2(MaxU16x2(c.x & kAbs, c.y & kAbs), MaxU16x2(c.z & kAbs, c.w & kAbs));
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

// A CTA quantizes 128x128 tiles (blockIdx.x: K block, blockIdx.y strides over M tiles). Each
// thread holds kChunks 16-byte chunks of a tile in registers: loads first, all in flight, then
// the amax, then the codes. Thread t covers chunk column t % kLanes and rows 4g..4g+3 of each
// pass of 4 * kGroupsPerPass rows. `vec_in`/`vec_out`: the tensors allow 16-byte (one chunk's
// codes) accesses; else element accesses.
template <InputType kType, typename F, bool kTile128>
__global__ void __launch_bounds__(kThreads, 2) QuantizeBlockwiseKernel(QuantizeParams p, bool vec_in,
                                                                     bool vec_out) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = 16 / sizeof(S);             // elements per chunk
  constexpr int kLanes = kBlock / kVec;            // threads per 128-element row
  constexpr int kGroupsPerPass = kThreads / kLanes;
  constexpr int kChunks = kBlock * kLanes / kThreads;

  const int tid = threadIdx.x;
  const int lane_col = tid % kLanes;
  const int group = tid / kLanes;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kBlock;
  const int64_t row_tiles = (p.m + kBlock - 1) / kBlock;
  const S* input = static_cast<const S*>(p.input);

  auto row_of = [&](int j) { return (j / 4) * (4 * kGroupsPerPass) + group * 4 + (j % 4); };
  auto load_tile = [&](int64_t tile, uint4 (&raw)[kChunks]) {
    const int64_t row0 = tile * kBlock;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int64_t r = row0 + row_of(j);
      raw[j] = make_uint4(0, 0, 0, 0);
      if (tile < row_tiles && r < p.m) {
        const S* src = input + r * p.input_stride + col0 + lane_col * kVec;
        if (vec_in) {
          raw[j] = *reinterpret_cast<const uint4*>(src);
        } else {
          uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
          for (int i = 0; i < kVec; ++i) {
            w[i * sizeof(S) / 4] |= static_cast<uint32_t>(src[i]) << (8 * ((i * sizeof(S)) % 4));
          }
          raw[j] = make_uint4(w[0], w[1], w[2], w[3]);
        }
      }
    }
  };

  // NOTE: the CTA walks row tiles and loads tile n+1 into registers before it computes tile n,
  // so that every thread keeps its loads in flight while it converts (the conversion costs
  // about as many cycles as the memory traffic of a tile). Two-byte inputs only: for f32 the
  // second register set would halve the resident CTAs.
  constexpr bool kPrefetch = sizeof(S) == 2;
  uint4 raw[kChunks];
  uint4 next[kPrefetch ? kChunks : 1];
  load_tile(blockIdx.y, raw);
  for (int64_t tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
    const int64_t row0 = tile * kBlock;
    if constexpr (kPrefetch) load_tile(tile + gridDim.y, next);

    // amax bits per chunk (|x| bits compare as unsigned: NaN above Inf above every finite).
    uint32_t amax[kChunks];
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      amax[j] = ChunkAbsMaxBits<kType>(raw[j]);
    }

    BlockScale scale[kTile128 ? 1 : kChunks];
    if constexpr (kTile128) {
      __shared__ uint32_t warp_max[kThreads / 32];
      uint32_t a = 0;
#pragma unroll
      for (int j = 0; j < kChunks; ++j) a = max(a, amax[j]);
      a = GroupMax<32>(a);
      if (tid % 32 == 0) warp_max[tid / 32] = a;
      __syncthreads();
      a = 0;
#pragma unroll
      for (int w = 0; w < kThreads / 32; ++w) a = max(a, warp_max[w]);
      __syncthreads();  // warp_max is reused by the next tile
      scale[0] = ComputeScale(a, F::kMax, p.eps, p.pow2_scales);
      if (tid == 0) p.scales[tile * p.scales_stride + blockIdx.x] = scale[0].stored;
    } else {
      // NOTE: two IEEE divisions per block cost more than the block's conversion; so lane l of
      // the kLanes lanes sharing a block row computes the scales of chunk l only and hands the
      // quant scale to the other lanes by shuffle.
      static_assert(kLanes >= kChunks, "one lane per chunk computes its scales");
      uint32_t mine = 0;
#pragma unroll
      for (int j = 0; j < kChunks; ++j) {
        amax[j] = GroupMax<kLanes>(amax[j]);
        if (lane_col == j) mine = amax[j];
      }
      const BlockScale own = ComputeScale(mine, F::kMax, p.eps, p.pow2_scales);
      {
        const int64_t r = row0 + row_of(lane_col);
        if (lane_col < kChunks && r < p.m) {
          const int64_t s = p.k_block_major_scales ? blockIdx.x * p.scales_stride + r
                                                   : r * p.scales_stride + blockIdx.x;
          p.scales[s] = own.stored;
        }
      }
      const int lane_base = (tid % 32) / kLanes * kLanes;
#pragma unroll
      for (int j = 0; j < kChunks; ++j) {
        scale[j].quant = __shfl_sync(0xFFFFFFFFu, own.quant, lane_base + j);
        scale[j].finite =
            amax[j] < kInfBits && (fp8::FloatBits(scale[j].quant) & kInfBits) != kInfBits;
      }
    }
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int64_t r = row0 + row_of(j);
      const BlockScale& sc = scale[kTile128 ? 0 : j];
      uint32_t words[kVec / 4];
      float y[kVec];
#pragma unroll
      for (int i = 0; i < kVec; ++i) y[i] = __fmul_rn(ChunkElement<kType>(raw[j], i), sc.quant);
#if defined(KD_HAVE_HW_FP8_CVT)
      if (sc.finite) {
#pragma unroll
        for (int w = 0; w < kVec / 4; ++w) {
          words[w] = fp8::EncodeFinite4<F>(y[4 * w], y[4 * w + 1], y[4 * w + 2], y[4 * w + 3]);
        }
      } else
#endif
      {
#pragma unroll
        for (int w = 0; w < kVec / 4; ++w) {
          words[w] = 0;
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            words[w] |= static_cast<uint32_t>(fp8::EncodeBranchFree<F>(y[4 * w + i])) << (8 * i);
          }
        }
      }
      if (r < p.m) {
        uint8_t* dst = p.output + r * p.output_stride + col0 + lane_col * kVec;
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
    if constexpr (kPrefetch) {
#pragma unroll
      for (int j = 0; j < kChunks; ++j) raw[j] = next[j];
    } else {
      load_tile(tile + gridDim.y, raw);
    }
  }
}

template <InputType kType, typename F, bool kTile128>
cudaError_t LaunchQuantizeVariant(const QuantizeParams& p, cudaStream_t stream) {
  using S = typename Input<kType>::Storage;
  const auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  const bool vec_in = addr(p.input) % 16 == 0 && (p.input_stride * sizeof(S)) % 16 == 0;
  // One chunk's codes are stored at a time.
  const int out_align = static_cast<int>(16 / sizeof(S));
  const bool vec_out = addr(p.output) % out_align == 0 && p.output_stride % out_align == 0;
  const int64_t row_tiles = (p.m + kBlock - 1) / kBlock;
  const int64_t col_tiles = p.k / kBlock;
  if (col_tiles > 0x7FFFFFFF || row_tiles < 1) return cudaErrorInvalidConfiguration;
  // As many CTAs as fit on the device at once, each walking row tiles (see the kernel's NOTE).
  const auto kernel = QuantizeBlockwiseKernel<kType, F, kTile128>;
  static int resident_per_sm = 0;  // per instantiation; the same on every device of a node
  int device = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess && resident_per_sm == 0) {
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident_per_sm, kernel, kThreads, 0);
  }
  if (err != cudaSuccess) return err;
  const int64_t resident = static_cast<int64_t>(sms) * (resident_per_sm > 0 ? resident_per_sm : 1);
  // NOTE: never more CTAs than fit at once: a CTA of a second wave would start its walk only
  // when a first-wave CTA finished it, doubling the time of the row tiles it owns.
  int64_t rows_of_ctas = resident / col_tiles;
  if (rows_of_ctas < 1) rows_of_ctas = 1;
  if (rows_of_ctas > row_tiles) rows_of_ctas = row_tiles;
  if (rows_of_ctas > 65535) rows_of_ctas = 65535;
  const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(rows_of_ctas));
  kernel<<<grid, kThreads, 0, stream>>>(p, vec_in, vec_out);
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
