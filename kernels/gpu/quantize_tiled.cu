// The tiled one-pass FP8 quantizer: the granularities whose blocks run across X's rows, or whose
// output is Xᵀ, each in one read of X and one write of every output (the recipe and layouts of
// kernels/cpu/quantize.cc, bit-exact; the scale and encode steps are those of
// quantize_common.cuh):
//   1x128 of Y = Xᵀ        amax down each column of a 128x128 tile of X, Y written transposed
//   128x1 of Y = X         amax down each column of a band of 128 rows, Y written as X
//   128x1 of Y = Xᵀ        amax along each row of a tile, Y written transposed
//   128x128 of Y = Xᵀ      amax over the tile, Y written transposed
//   dual pass              1x128 along X's rows into output/scales and down its columns into
//                          output_t/scales_t, from the same tile
//   128x128 dual pass      amax over the tile, Y = X written as X and Y = Xᵀ written transposed,
//                          one scale for both
// A CTA takes one 128 (rows of X) x 128 (columns of X) tile; partial tiles at the bottom and the
// right edge read zeros (|0| never raises an amax) and write nothing outside Y.
//
// Two kernels of the same steps: the register kernel (every mode; f32, and inputs whose base or
// row pitch is not 16-byte aligned or whose K is not a multiple of 8) and, for the transposed
// forms and the dual pass of two-byte inputs with 16-byte aligned rows, the async kernel
// (kAsync), which loads the tile by cp.async straight into shared memory: no register holds a
// load in flight, so it runs at 48 registers and 5 CTAs per SM against the register kernel's 64
// and 4 (see TileMinBlocks).
//
// Steps of a CTA:
//   1. load: every thread loads its 16-byte chunks of the tile, all in flight (thread t holds
//      chunk column t % kLanes of rows t / kLanes + kRowsPerPass * j): the register kernel into
//      registers, and with a transposed output it stores them to shared memory (xs) once their
//      amax is taken, so that they hold no registers across the scale computations (128x1 of
//      Y = X keeps them in registers); the async kernel by cp.async into xs, each thread then
//      reading back its own chunks for the amax (a partial chunk or a row past M zero-filled);
//   2. amax: along rows by shuffles within the kLanes threads of a row; down columns as the
//      element-wise maximum over the thread's rows, then over the warp's rows by shuffle and over
//      the warps through shared memory; over the tile by warp reduction;
//   3. scales (ComputeScale), each stored by the thread that computed it;
//   4. codes of Y = X by chunk (8- or 4-byte stores, a warp writes whole rows);
//   5. codes of Y = Xᵀ: a thread reads two adjacent columns of X (one 4- or 8-byte word per row,
//      a warp reads a contiguous 128 or 256 bytes of one row: no bank conflict) for 32 rows, and
//      writes the two rows of Y's codes into a 128x128-byte tile in shared memory (os, 16-byte
//      chunks XOR-swizzled so that the stores are conflict-free; the async kernel's os is the
//      first 16 KB of xs, written after a barrier once every thread has read xs); the CTA then
//      copies os out with 16-byte stores, a warp writing 4 whole 128-byte rows of Y.
// Codes are converted by the hardware (fp8::EncodeFinite4) when every scale of the tile (of the
// row, for the dual pass's Y = X) has a finite amax and is finite, else by
// fp8::EncodeBranchFree (exact for every input).
#include <cstdint>
#include <type_traits>

#include "kerneld/kernels/fp8.h"
#include "kernels/gpu/device_attributes.h"
#include "kernels/gpu/fp8_encode.h"
#include "kernels/gpu/quantize_common.cuh"
#include "kernels/gpu/quantize_params.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace quant {
namespace {

// What the tiled kernels take by value: the fields of QuantizeParams they read, in the layout
// their machine code was built for.
struct TiledKernelArgs {
  TiledQuantizeMode mode = TiledQuantizeMode::k128x1;
  const void* input = nullptr;  // X (m, k)
  int64_t input_stride = 0;     // elements
  InputType input_type = InputType::kBF16;
  int64_t m = 0, k = 0;
  Fp8Format format = Fp8Format::kE4M3FN;
  uint8_t* output = nullptr;
  int64_t output_stride = 0;
  float* scales = nullptr;
  int64_t scales_stride = 0;
  uint8_t* output_t = nullptr;  // the dual passes only
  int64_t output_t_stride = 0;
  float* scales_t = nullptr;  // the dual passes only
  int64_t scales_t_stride = 0;
  bool k_block_major_scales = false;  // k1x128Transposed and kDual
  bool pow2_scales = false;
  float eps = 1e-12f;
};

TiledKernelArgs TiledArgsOf(const QuantizeParams& q) {
  TiledKernelArgs a;
  a.mode = q.tiled_mode;
  a.input = q.input;
  a.input_stride = q.input_stride;
  a.input_type = q.input_type;
  a.m = q.m;
  a.k = q.k;
  a.format = q.format;
  a.output = q.output;
  a.output_stride = q.output_stride;
  a.scales = static_cast<float*>(q.scales);
  a.scales_stride = q.scales_stride;
  a.output_t = q.output_t;
  a.output_t_stride = q.output_t_stride;
  a.scales_t = q.scales_t;
  a.scales_t_stride = q.scales_t_stride;
  a.k_block_major_scales = q.k_block_major_scales;
  a.pow2_scales = q.pow2_scales;
  a.eps = q.eps;
  return a;
}

constexpr int kTileThreads = 256;
constexpr int kTileWarps = kTileThreads / gpu::kLaneGroup;
constexpr int kOutChunks = kBlock / 16;  // 16-byte chunks in a 128-byte row of codes

template <InputType kType>
struct TileGeometry {
  using S = typename Input<kType>::Storage;
  static constexpr int kVec = 16 / sizeof(S);                 // elements per chunk
  static constexpr int kLanes = kBlock / kVec;                // threads per tile row
  static constexpr int kRowsPerPass = kTileThreads / kLanes;  // rows one load pass covers
  static constexpr int kChunks = kBlock / kRowsPerPass;       // chunks per thread
  static constexpr int kRowBytes = kBlock * static_cast<int>(sizeof(S));
  // The transposed read takes two adjacent elements of a row at once.
  using Word = std::conditional_t<sizeof(S) == 2, uint32_t, uint2>;
};

template <TiledQuantizeMode kMode>
struct ModeTraits {
  static constexpr bool kRowScale =
      kMode == TiledQuantizeMode::k128x1Transposed || kMode == TiledQuantizeMode::kDual;
  static constexpr bool kColScale = kMode == TiledQuantizeMode::k1x128Transposed ||
                                    kMode == TiledQuantizeMode::k128x1 ||
                                    kMode == TiledQuantizeMode::kDual;
  static constexpr bool kTileScale =
      kMode == TiledQuantizeMode::k128x128Transposed || kMode == TiledQuantizeMode::k128x128Dual;
  static constexpr bool kTransposed = kMode != TiledQuantizeMode::k128x1;
  // The dual passes write Y = X to output and Y = Xᵀ to output_t.
  static constexpr bool kDualPass =
      kMode == TiledQuantizeMode::kDual || kMode == TiledQuantizeMode::k128x128Dual;
};

// Dynamic shared memory of a CTA: the input tile (transposed outputs, and every mode of the async
// kernel) and the transposed codes (the register kernel; the async kernel writes them over the
// tile).
template <InputType kType, TiledQuantizeMode kMode, bool kAsync>
constexpr int TileSharedBytes() {
  constexpr int kTile = kBlock * TileGeometry<kType>::kRowBytes;
  if constexpr (kAsync) return kTile;
  return ModeTraits<kMode>::kTransposed ? kTile + kBlock * kBlock : 0;
}

// CTAs per SM the kernels are compiled for (the register cap of KD_LAUNCH_BOUNDS).
// NOTE: resident CTAs, not loads per CTA, set the transposed forms' bandwidth. The register kernel
// holds its tile in registers while the loads are in flight: 64 registers for two-byte inputs, 4
// CTAs (4 x 48 KB of shared memory). The async kernel needs no registers for its loads: 48
// registers and 32 KB per CTA give 5 CTAs (+0.02-0.04 of the copy on an H100); at 6 (40
// registers) 1x128 of Xᵀ and the dual pass spill. 128x1 of Y = X keeps the register kernel,
// without a shared-memory stage; f32 tiles are twice as large.
template <InputType kType, bool kAsync>
constexpr int TileMinBlocks() {
  if constexpr (kAsync) return 5;
  return sizeof(typename Input<kType>::Storage) == 2 ? 4 : 2;
}

// |x| bit patterns of the elements of a 32-bit word of a chunk, and their element-wise maximum
// (|x| bits compare as unsigned: NaN above Inf above every finite value).
template <InputType kType>
__device__ __forceinline__ uint32_t AbsWord(uint32_t w) {
  return sizeof(typename Input<kType>::Storage) == 2 ? w & 0x7FFF7FFFu : w & 0x7FFFFFFFu;
}
template <InputType kType>
__device__ __forceinline__ uint32_t MaxWord(uint32_t a, uint32_t b) {
  if constexpr (sizeof(typename Input<kType>::Storage) == 2) {
    return MaxU16x2(a, b);
  } else {
    return max(a, b);
  }
}

// The fp32 |x| bits of element e of a chunk of |x| bit patterns.
template <InputType kType>
__device__ __forceinline__ uint32_t AbsBitsOf(uint32_t word, int e) {
  if constexpr (kType == InputType::kF32) {
    return word;
  } else {
    const uint32_t h = (word >> (16 * (e % 2))) & 0xFFFFu;
    if constexpr (kType == InputType::kBF16) {
      return h << 16;
    } else {
      return fp8::FloatBits(gpu::HalfBitsToFloat(static_cast<uint16_t>(h)));
    }
  }
}

// The two elements (columns 2i, 2i+1) of a transposed-read word.
template <InputType kType>
__device__ __forceinline__ void WordElements(const typename TileGeometry<kType>::Word& w, float& a,
                                             float& b) {
  if constexpr (kType == InputType::kF32) {
    a = fp8::BitsToFloat(w.x);
    b = fp8::BitsToFloat(w.y);
  } else if constexpr (kType == InputType::kBF16) {
    a = fp8::BitsToFloat(w << 16);
    b = fp8::BitsToFloat(w & 0xFFFF0000u);
  } else {
    a = gpu::HalfBitsToFloat(static_cast<uint16_t>(w & 0xFFFFu));
    b = gpu::HalfBitsToFloat(static_cast<uint16_t>(w >> 16));
  }
}

// Byte offset of 16-byte chunk `c` of row `row` in the transposed-code tile: XOR-swizzled by
// row / 2, so that the 8 threads of a store phase (rows 2i or 2i+1 for 8 consecutive i, one
// chunk column) and of a load phase (one row, 8 chunks) hit 8 different bank groups.
__device__ __forceinline__ int OutTileOffset(int row, int c) {
  return row * kBlock + ((c ^ ((row >> 1) & 7)) * 16);
}

// `vec_in`: X allows 16-byte loads (aligned base and row pitch); `vec_out`: Y = X allows one
// chunk's codes per store; `vec_out_t`: Y = Xᵀ allows 16-byte stores.
template <InputType kType, typename F, TiledQuantizeMode kMode, bool kAsync>
__global__ void KD_LAUNCH_BOUNDS(kTileThreads, (TileMinBlocks<kType, kAsync>()))
    QuantizeTiledKernel(TiledKernelArgs p, int group_k, bool vec_in, bool vec_out, bool vec_out_t) {
  using G = TileGeometry<kType>;
  using S = typename G::S;
  using T = ModeTraits<kMode>;
  constexpr int kVec = G::kVec;
  constexpr int kLanes = G::kLanes;
  constexpr int kRowsPerPass = G::kRowsPerPass;
  constexpr int kChunks = G::kChunks;
  static_assert(kLanes >= kChunks, "one lane per chunk computes a row's scales");

  extern __shared__ __align__(16) unsigned char tile_smem[];
  __shared__ uint4 col_part[T::kColScale ? kTileWarps * kLanes : 1];
  __shared__ float row_quant[T::kRowScale ? kBlock : 1];
  __shared__ float col_quant[T::kColScale ? kBlock : 1];
  __shared__ uint32_t warp_max[kTileWarps];

  const int tid = gpu::ThreadIdxX();
  const int lane_col = tid % kLanes;
  const int row_in_pass = tid / kLanes;
  // Tile order (TiledGroupK): row-major, or groups of group_k consecutive column tiles taken
  // row band by row band (the tile count fits in an int: the launcher checks). 128x1 of Y = X is
  // row-major only: the index arithmetic of the groups costs it spills (64 registers).
  int64_t m0, k0;
  if constexpr (!T::kTransposed) {
    const int64_t k_tiles = (p.k + kBlock - 1) / kBlock;
    const int64_t tile_m = gpu::BlockIdxX() / k_tiles;
    m0 = tile_m * kBlock;
    k0 = (gpu::BlockIdxX() - tile_m * k_tiles) * kBlock;
  } else {
    const int k_tiles = static_cast<int>((p.k + kBlock - 1) / kBlock);
    const int tile = static_cast<int>(gpu::BlockIdxX());
    if (group_k >= k_tiles) {
      const int tile_m = tile / k_tiles;
      m0 = static_cast<int64_t>(tile_m) * kBlock;
      k0 = static_cast<int64_t>(tile - tile_m * k_tiles) * kBlock;
    } else {
      const int m_tiles = static_cast<int>((p.m + kBlock - 1) / kBlock);
      const int group = tile / (group_k * m_tiles);
      const int local = tile - group * group_k * m_tiles;
      const int width = min(group_k, k_tiles - group * group_k);  // the last group may be narrower
      const int tile_m = local / width;
      m0 = static_cast<int64_t>(tile_m) * kBlock;
      k0 = static_cast<int64_t>(group * group_k + local - tile_m * width) * kBlock;
    }
  }
  const int64_t kc = k0 + lane_col * kVec;  // the first column of the thread's chunks
  const bool full_chunk = kc + kVec <= p.k;
  const S* input = static_cast<const S*>(p.input);
  auto row_of = [&](int j) { return j * kRowsPerPass + row_in_pass; };

  unsigned char* xs = tile_smem;
  // 1. Load. kAsync: every chunk goes straight to shared memory by cp.async (a partial chunk or
  // a row past M is zero-filled), no register holds it in flight; else into registers.
  uint4 raw[kAsync ? 1 : kChunks];
  if constexpr (kAsync) {
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int64_t r = m0 + row_of(j);
      const int64_t left = p.k - kc;  // elements of the row from the chunk on
      const int bytes =
          r < p.m && left > 0 ? static_cast<int>((left < kVec ? left : kVec) * sizeof(S)) : 0;
      const S* src = bytes > 0 ? input + r * p.input_stride + kc : input;
      CpAsync16(xs + row_of(j) * G::kRowBytes + lane_col * 16, src, bytes);
    }
    CpAsyncWaitAll();
  } else {
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int64_t r = m0 + row_of(j);
      raw[j] = make_uint4(0, 0, 0, 0);
      if (r < p.m) {
        const S* src = input + r * p.input_stride + kc;
        if (vec_in && full_chunk) {
          raw[j] = *reinterpret_cast<const uint4*>(src);
        } else {
          uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
          for (int i = 0; i < kVec; ++i) {
            if (kc + i < p.k) {
              w[i * sizeof(S) / 4] |= static_cast<uint32_t>(src[i]) << (8 * ((i * sizeof(S)) % 4));
            }
          }
          raw[j] = make_uint4(w[0], w[1], w[2], w[3]);
        }
      }
    }
  }

  // Transposed outputs (and the async kernel): every step after the amax reads the tile in
  // shared memory, so that the chunks do not hold registers across the scale computations.
  unsigned char* os = tile_smem + (T::kTransposed && !kAsync ? kBlock * G::kRowBytes : 0);
  auto chunk_at = [&](int j) -> uint4 {
    if constexpr (T::kTransposed || kAsync) {
      return *reinterpret_cast<const uint4*>(xs + row_of(j) * G::kRowBytes + lane_col * 16);
    } else {
      return raw[j];
    }
  };

  // Codes of chunk j of Y = X with the scale scale_of(i) of element i, stored (8 or 4 bytes; a
  // warp writes whole rows).
  auto store_direct = [&](int j, auto scale_of, bool hw) {
    const uint4 chunk = chunk_at(j);
    float y[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) y[i] = __fmul_rn(ChunkElement<kType>(chunk, i), scale_of(i));
    uint32_t words[kVec / 4];
#pragma unroll
    for (int w = 0; w < kVec / 4; ++w) {
      words[w] = Encode4<F>(hw, y[4 * w], y[4 * w + 1], y[4 * w + 2], y[4 * w + 3]);
    }
    const int64_t r = m0 + row_of(j);
    if (r >= p.m) return;
    uint8_t* dst = p.output + r * p.output_stride + kc;
    if (vec_out && full_chunk) {
      if constexpr (kVec == 8) {
        *reinterpret_cast<uint2*>(dst) = make_uint2(words[0], words[1]);
      } else {
        *reinterpret_cast<uint32_t*>(dst) = words[0];
      }
    } else {
#pragma unroll
      for (int i = 0; i < kVec; ++i) {
        if (kc + i < p.k) dst[i] = static_cast<uint8_t>(words[i / 4] >> (8 * (i % 4)));
      }
    }
  };

  // 2. Amax from the registers: the warp parts of the column amax, the tile's warp maxima, the
  // row amax; then the row scales. `finite`: every scale this thread computed for the barrier's
  // vote below is finite.
  bool finite = true;
  {
    uint32_t cm[4] = {0, 0, 0, 0};
    uint32_t row_mine = 0, tile_amax = 0;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      uint4 chunk;
      if constexpr (kAsync) {
        chunk = chunk_at(j);  // the thread's own chunk: visible to it after the wait above
      } else {
        chunk = raw[j];
      }
      if constexpr (T::kColScale) {
        const uint32_t words[4] = {chunk.x, chunk.y, chunk.z, chunk.w};
#pragma unroll
        for (int w = 0; w < 4; ++w) cm[w] = MaxWord<kType>(cm[w], AbsWord<kType>(words[w]));
      }
      if constexpr (T::kRowScale) {
        const uint32_t a = GroupMax<kLanes>(ChunkAbsMaxBits<kType>(chunk));
        if (lane_col == j) row_mine = a;
      }
      if constexpr (T::kTileScale) tile_amax = max(tile_amax, ChunkAbsMaxBits<kType>(chunk));
    }
    if constexpr (T::kColScale) {
      // Lanes kLanes apart in a warp hold the same chunk column.
#pragma unroll
      for (int offset = kLanes; offset < 32; offset *= 2) {
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          cm[w] = MaxWord<kType>(cm[w], gpu::ShflXor(cm[w], offset));
        }
      }
      if (tid % gpu::kLaneGroup < kLanes) {
        col_part[(tid / gpu::kLaneGroup) * kLanes + lane_col] =
            make_uint4(cm[0], cm[1], cm[2], cm[3]);
      }
    }
    if constexpr (T::kTileScale) {
      tile_amax = GroupMax<32>(tile_amax);
      if (tid % gpu::kLaneGroup == 0) warp_max[tid / gpu::kLaneGroup] = tile_amax;
    }
    if constexpr (T::kTransposed && !kAsync) {
#pragma unroll
      for (int j = 0; j < kChunks; ++j) {
        *reinterpret_cast<uint4*>(xs + row_of(j) * G::kRowBytes + lane_col * 16) = raw[j];
      }
    }
    if constexpr (T::kRowScale) {
      // NOTE: two IEEE divisions per block cost more than the block's conversion, so lane l of
      // the kLanes lanes of a row group computes the scales of the group's row l only.
      if (lane_col < kChunks) {
        const int r = row_of(lane_col);
        const BlockScale s = ComputeScale(row_mine, F::kMax, p.eps, p.pow2_scales);
        row_quant[r] = s.quant;
        int64_t at = (k0 / kBlock) * p.scales_stride + m0 + r;  // 128x1 of Xᵀ: (ceil(K/128), M)
        if constexpr (kMode == TiledQuantizeMode::kDual) {
          // Y = X takes its rows' own scales (below); the vote is for the columns'.
          if (!p.k_block_major_scales) at = (m0 + r) * p.scales_stride + k0 / kBlock;
        } else {
          finite = s.finite;
        }
        if (m0 + r < p.m) p.scales[at] = s.stored;
      }
    }
  }
  gpu::SyncThreads();

  // 3. The scales that need the whole tile: columns, the tile.
  if constexpr (T::kColScale) {
    if (tid < kBlock) {
      const int c = tid / kVec, e = tid % kVec;
      const int word = e * static_cast<int>(sizeof(S)) / 4;
      const uint32_t* parts = reinterpret_cast<const uint32_t*>(col_part);
      uint32_t packed = 0;
#pragma unroll
      for (int w = 0; w < kTileWarps; ++w) {
        packed = MaxWord<kType>(packed, parts[(w * kLanes + c) * 4 + word]);
      }
      const BlockScale s = ComputeScale(AbsBitsOf<kType>(packed, e), F::kMax, p.eps, p.pow2_scales);
      col_quant[tid] = s.quant;
      finite = finite && s.finite;
      const int64_t k = k0 + tid;
      if (k < p.k) {
        if constexpr (kMode == TiledQuantizeMode::k128x1) {  // scales (ceil(M/128), K)
          p.scales[(m0 / kBlock) * p.scales_stride + k] = s.stored;
        } else {
          // 1x128 of Xᵀ: scales (K, M/128), or K-block-major (M/128, K); the dual pass's
          // scales_t alike.
          float* scales = kMode == TiledQuantizeMode::kDual ? p.scales_t : p.scales;
          const int64_t stride =
              kMode == TiledQuantizeMode::kDual ? p.scales_t_stride : p.scales_stride;
          const int64_t at =
              p.k_block_major_scales ? (m0 / kBlock) * stride + k : k * stride + m0 / kBlock;
          scales[at] = s.stored;
        }
      }
    }
  }
  BlockScale tile_scale{0.0f, 0.0f, true};
  if constexpr (T::kTileScale) {
    uint32_t a = 0;
#pragma unroll
    for (int w = 0; w < kTileWarps; ++w) a = max(a, warp_max[w]);
    tile_scale = ComputeScale(a, F::kMax, p.eps, p.pow2_scales);
    finite = tile_scale.finite;
    if (tid == 0) {
      if constexpr (kMode == TiledQuantizeMode::k128x128Dual) {
        // Scales (M/128, K/128) of X; scales_t (K/128, M/128) of Xᵀ: the same value.
        p.scales[(m0 / kBlock) * p.scales_stride + k0 / kBlock] = tile_scale.stored;
        p.scales_t[(k0 / kBlock) * p.scales_t_stride + m0 / kBlock] = tile_scale.stored;
      } else {
        p.scales[(k0 / kBlock) * p.scales_stride + m0 / kBlock] = tile_scale.stored;
      }
    }
  }
  const bool hw = gpu::SyncThreadsAnd(finite) != 0;

  // 4. Y = X: 128x1 with column scales, the dual pass with row scales, the 128x128 dual pass
  // with the tile's scale. A row's quant scale
  // tells whether its block takes the hardware conversion: it is 0 exactly when the amax is Inf
  // (FP8_MAX over any finite amax is a normal float), NaN when the amax is NaN, Inf on overflow.
  if constexpr (kMode == TiledQuantizeMode::k128x1) {
    float col_q[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) col_q[i] = col_quant[lane_col * kVec + i];
#pragma unroll
    for (int j = 0; j < kChunks; ++j)
      store_direct(
          j, [&col_q](int i) { return col_q[i]; }, hw);
  }
  if constexpr (kMode == TiledQuantizeMode::k128x128Dual) {
    const float q = tile_scale.quant;
#pragma unroll 4
    for (int j = 0; j < kChunks; ++j)
      store_direct(
          j, [q](int) { return q; }, hw);
  }
  if constexpr (kMode == TiledQuantizeMode::kDual) {
    // NOTE: unrolled by 4, not 8: 64 registers hold 4 chunks in flight without a spill.
#pragma unroll 4
    for (int j = 0; j < kChunks; ++j) {
      const float q = row_quant[row_of(j)];
      const bool row_hw = q != 0.0f && (fp8::FloatBits(q) & kInfBits) != kInfBits;
      store_direct(
          j, [q](int) { return q; }, row_hw);
    }
  }

  // 5. Y = Xᵀ, through shared memory.
  if constexpr (T::kTransposed) {
    using Word = typename G::Word;
    const int pair = tid % (kBlock / 2);       // columns 2 * pair and 2 * pair + 1 of the tile
    const int row_group = tid / (kBlock / 2);  // rows 32 * row_group .. + 31
    // The scales of the two columns (1x128 of Xᵀ, the dual pass's Xᵀ) or the tile's (128x128);
    // 128x1 of Xᵀ takes a scale per row of X, below.
    float qa = tile_scale.quant, qb = tile_scale.quant;
    if constexpr (T::kColScale) {
      qa = col_quant[2 * pair];
      qb = col_quant[2 * pair + 1];
    }
    // The codes of the two Y rows, one 16-byte chunk per h, into the code tile (os; kAsync: over
    // the input tile, once every thread has read it).
    uint4 held[2][2] = {};
    auto store_codes = [&](int h) {
      const int c = row_group * 2 + h;
      *reinterpret_cast<uint4*>(os + OutTileOffset(2 * pair, c)) = held[h][0];
      *reinterpret_cast<uint4*>(os + OutTileOffset(2 * pair + 1, c)) = held[h][1];
    };
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // 16 rows of X: one 16-byte chunk of each of the two Y rows
      uint32_t codes_a[4], codes_b[4];
#pragma unroll
      for (int g = 0; g < 4; ++g) {
        float ya[4], yb[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int row = row_group * 32 + h * 16 + g * 4 + i;
          const Word w = *reinterpret_cast<const Word*>(xs + row * G::kRowBytes +
                                                        pair * static_cast<int>(sizeof(Word)));
          float a, b;
          WordElements<kType>(w, a, b);
          if constexpr (kMode == TiledQuantizeMode::k128x1Transposed) {
            const float q = row_quant[row];
            ya[i] = __fmul_rn(a, q);
            yb[i] = __fmul_rn(b, q);
          } else {
            ya[i] = __fmul_rn(a, qa);
            yb[i] = __fmul_rn(b, qb);
          }
        }
        codes_a[g] = Encode4<F>(hw, ya[0], ya[1], ya[2], ya[3]);
        codes_b[g] = Encode4<F>(hw, yb[0], yb[1], yb[2], yb[3]);
      }
      held[h][0] = make_uint4(codes_a[0], codes_a[1], codes_a[2], codes_a[3]);
      held[h][1] = make_uint4(codes_b[0], codes_b[1], codes_b[2], codes_b[3]);
      if constexpr (!kAsync) store_codes(h);
    }
    if constexpr (kAsync) {
      gpu::SyncThreads();  // every read of the tile done: its first 16 KB take the codes
      store_codes(0);
      store_codes(1);
    }
    gpu::SyncThreads();
    uint8_t* out = T::kDualPass ? p.output_t : p.output;
    const int64_t out_stride = T::kDualPass ? p.output_t_stride : p.output_stride;
#pragma unroll
    for (int i = 0; i < kBlock * kOutChunks / kTileThreads; ++i) {
      const int idx = i * kTileThreads + tid;
      const int row = idx / kOutChunks, c = idx % kOutChunks;
      const int64_t k = k0 + row;
      const int64_t m = m0 + c * 16;
      if (k < p.k) {
        const uint4 v = *reinterpret_cast<const uint4*>(os + OutTileOffset(row, c));
        uint8_t* dst = out + k * out_stride + m;
        if (vec_out_t && m + 16 <= p.m) {
          *reinterpret_cast<uint4*>(dst) = v;
        } else {
          const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int b = 0; b < 16; ++b) {
            if (m + b < p.m) dst[b] = static_cast<uint8_t>(words[b / 4] >> (8 * (b % 4)));
          }
        }
      }
    }
  }
}

// Column tiles per group of the tile order. The CTAs resident at once read runs of group_k x 128
// columns of X rows and write runs of (resident CTAs / group_k) x 128 bytes of Y rows: groups of
// 4 give the transposed forms longer runs of Y rows from M = 16384 up (+0.01-0.02 of the copy on
// an H100); the dual passes, which also write Y = X by rows, run ungrouped.
template <TiledQuantizeMode kMode>
int TiledGroupK(int64_t m, int64_t k_tiles) {
  constexpr bool kGrouped = kMode != TiledQuantizeMode::k128x1 && !ModeTraits<kMode>::kDualPass;
  return kGrouped && m >= 16384 && k_tiles > 4 ? 4 : static_cast<int>(k_tiles);
}

// Opts the kernel in to its dynamic shared memory on the current device (once per device).
template <InputType kType, typename F, TiledQuantizeMode kMode, bool kAsync>
cudaError_t OptInTiledKernel() {
  constexpr int kSmem = TileSharedBytes<kType, kMode, kAsync>();
  if constexpr (kSmem > 0) {
    return OptInSharedMemory<QuantizeTiledKernel<kType, F, kMode, kAsync>>(kSmem);
  } else {
    return cudaSuccess;
  }
}

// Whether the mode has the cp.async kernel for this input type (two-byte inputs, a transposed or
// dual mode).
template <InputType kType, TiledQuantizeMode kMode>
constexpr bool kHasAsyncTiles =
    sizeof(typename Input<kType>::Storage) == 2 && kMode != TiledQuantizeMode::k128x1;

template <InputType kType, typename F, TiledQuantizeMode kMode, bool kAsync>
cudaError_t LaunchTiledKernel(const TiledKernelArgs& p, cudaStream_t stream) {
  using S = typename Input<kType>::Storage;
  const auto addr = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  const bool vec_in = addr(p.input) % 16 == 0 && (p.input_stride * sizeof(S)) % 16 == 0;
  constexpr int kDirectBytes = static_cast<int>(16 / sizeof(S));  // one chunk's codes
  const bool vec_out = p.output != nullptr && addr(p.output) % kDirectBytes == 0 &&
                       p.output_stride % kDirectBytes == 0;
  const uint8_t* out_t = ModeTraits<kMode>::kDualPass ? p.output_t : p.output;
  const int64_t out_t_stride = ModeTraits<kMode>::kDualPass ? p.output_t_stride : p.output_stride;
  const bool vec_out_t = addr(out_t) % 16 == 0 && out_t_stride % 16 == 0;
  const int64_t tiles = (p.m + kBlock - 1) / kBlock * ((p.k + kBlock - 1) / kBlock);
  if (tiles > 0x7FFFFFFF) return cudaErrorInvalidConfiguration;
  const auto kernel = QuantizeTiledKernel<kType, F, kMode, kAsync>;
  constexpr int kSmem = TileSharedBytes<kType, kMode, kAsync>();
  const cudaError_t err = OptInTiledKernel<kType, F, kMode, kAsync>();
  if (err != cudaSuccess) return err;
  const int group_k = TiledGroupK<kMode>(p.m, (p.k + kBlock - 1) / kBlock);
  kernel<<<static_cast<unsigned>(tiles), kTileThreads, kSmem, stream>>>(p, group_k, vec_in, vec_out,
                                                                        vec_out_t);
  return cudaGetLastError();
}

template <InputType kType, typename F, TiledQuantizeMode kMode>
cudaError_t LaunchTiledMode(const TiledKernelArgs& p, cudaStream_t stream) {
  if constexpr (kHasAsyncTiles<kType, kMode>) {
    // cp.async reads 16 aligned bytes per chunk. NOTE: K a multiple of 8 too, so that no chunk
    // is cut by K (the zero-filled part of a cut chunk is a path the device tests do not reach);
    // such K take the register kernel, as unaligned rows do.
    if (reinterpret_cast<uintptr_t>(p.input) % 16 == 0 && (p.input_stride * 2) % 16 == 0 &&
        p.k % 8 == 0) {
      return LaunchTiledKernel<kType, F, kMode, true>(p, stream);
    }
  }
  return LaunchTiledKernel<kType, F, kMode, false>(p, stream);
}

template <InputType kType, typename F>
cudaError_t LaunchTiledType(const TiledKernelArgs& p, cudaStream_t stream) {
  switch (p.mode) {
    case TiledQuantizeMode::k1x128Transposed:
      return LaunchTiledMode<kType, F, TiledQuantizeMode::k1x128Transposed>(p, stream);
    case TiledQuantizeMode::k128x1:
      return LaunchTiledMode<kType, F, TiledQuantizeMode::k128x1>(p, stream);
    case TiledQuantizeMode::k128x1Transposed:
      return LaunchTiledMode<kType, F, TiledQuantizeMode::k128x1Transposed>(p, stream);
    case TiledQuantizeMode::k128x128Transposed:
      return LaunchTiledMode<kType, F, TiledQuantizeMode::k128x128Transposed>(p, stream);
    case TiledQuantizeMode::kDual:
      return LaunchTiledMode<kType, F, TiledQuantizeMode::kDual>(p, stream);
    case TiledQuantizeMode::k128x128Dual:
      return LaunchTiledMode<kType, F, TiledQuantizeMode::k128x128Dual>(p, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename F>
cudaError_t LaunchTiledFormat(const TiledKernelArgs& p, cudaStream_t stream) {
  switch (p.input_type) {
    case InputType::kBF16:
      return LaunchTiledType<InputType::kBF16, F>(p, stream);
    case InputType::kF16:
      return LaunchTiledType<InputType::kF16, F>(p, stream);
    case InputType::kF32:
      return LaunchTiledType<InputType::kF32, F>(p, stream);
  }
  return cudaErrorInvalidValue;
}

// The opt-ins of every kernel LaunchTiledMode may launch for this type, format and mode.
template <InputType kType, typename F, TiledQuantizeMode kMode>
cudaError_t WarmTiledMode() {
  const cudaError_t err = OptInTiledKernel<kType, F, kMode, false>();
  if constexpr (kHasAsyncTiles<kType, kMode>) {
    if (err == cudaSuccess) return OptInTiledKernel<kType, F, kMode, true>();
  }
  return err;
}

// The same for several modes: the first error.
template <InputType kType, typename F, TiledQuantizeMode... kModes>
cudaError_t WarmTiledModes() {
  cudaError_t first = cudaSuccess;
  ((first = first == cudaSuccess ? WarmTiledMode<kType, F, kModes>() : first), ...);
  return first;
}

template <InputType kType, typename F>
cudaError_t WarmTiledType() {
  using M = TiledQuantizeMode;
  return WarmTiledModes<kType, F, M::k1x128Transposed, M::k128x1, M::k128x1Transposed,
                        M::k128x128Transposed, M::kDual, M::k128x128Dual>();
}

template <typename F>
cudaError_t WarmTiledFormat() {
  cudaError_t err = WarmTiledType<InputType::kBF16, F>();
  if (err == cudaSuccess) err = WarmTiledType<InputType::kF16, F>();
  if (err == cudaSuccess) err = WarmTiledType<InputType::kF32, F>();
  return err;
}

}  // namespace
}  // namespace quant

cudaError_t WarmQuantizeTiled() {
  cudaError_t err = quant::WarmTiledFormat<fp8::E4M3FN>();
  if (err == cudaSuccess) err = quant::WarmTiledFormat<fp8::E4M3FNUZ>();
  if (err == cudaSuccess) err = quant::WarmTiledFormat<fp8::E5M2>();
  return err;
}

cudaError_t LaunchQuantizeTiled(const QuantizeParams& q, cudaStream_t stream) {
  const quant::TiledKernelArgs p = quant::TiledArgsOf(q);
  if (p.m < 0 || p.k < 0) return cudaErrorInvalidConfiguration;
  if (p.m == 0 || p.k == 0) return cudaSuccess;  // an empty Y: nothing to write
  switch (p.format) {
    case Fp8Format::kE4M3FN:
      return quant::LaunchTiledFormat<fp8::E4M3FN>(p, stream);
    case Fp8Format::kE4M3FNUZ:
      return quant::LaunchTiledFormat<fp8::E4M3FNUZ>(p, stream);
    case Fp8Format::kE5M2:
      return quant::LaunchTiledFormat<fp8::E5M2>(p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd
