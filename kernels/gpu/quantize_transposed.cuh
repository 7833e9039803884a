// Y = Xᵀ with one scale for the tensor or per 32x1 block: per_tensor of Xᵀ and mx1x32 of Xᵀ
// (ColTileKernel), and mx1x32 of Xᵀ for two-byte inputs whose rows allow cp.async
// (MxTileAsyncKernel).
#ifndef KERNELD_KERNELS_GPU_QUANTIZE_TRANSPOSED_CUH_
#define KERNELD_KERNELS_GPU_QUANTIZE_TRANSPOSED_CUH_

#include <cstdint>

#include "kernels/gpu/quantize_common.cuh"
#include "kernels/gpu/quantize_rowcol.cuh"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace quant {

// Y = Xᵀ by tiles of X, one kernel: per_tensor of Xᵀ (kTensor: the scale from TensorAmaxKernel's
// partials) and mx1x32 of Xᵀ (kMx: 32x1 blocks of X along M) for f32 X and two-byte X whose
// rows do not allow cp.async chunks (MxTileAsyncKernel below takes the others). A tile is kCtRows
// rows x 16 chunks of X (128 two-byte or 64 f32 columns). Thread t holds chunk column t % 16 of the
// 8 rows of quads t / 16 and t / 16 + 16 (a quad: 4 consecutive rows) in registers, encodes them
// with its columns' scales and transposes the codes through shared memory (4x4 byte transposes; the
// words of Y row `col` swizzled by 2 * (col / kVec), conflict-free), so that the tile's Y rows
// leave with 16-byte stores, a warp writing four 128-byte runs.
// The grid is persistent: CTA b takes items b, b + grid, ..., with the next two items' chunks
// in flight to shared memory (cp.async) while it works on the current one from registers.
// NOTE: this form (2 CTAs per SM, no spills) runs 0.04-0.13 of the copy faster on an H100 than
// direct register loads at 3 CTAs per SM, which spill.
enum class ColMode { kTensor, kMx };

constexpr int kCtThreads = 256;
constexpr int kCtRows = 128;
constexpr int kCtChunks = 16;                         // 16-byte chunks per tile row
constexpr int kCtQuads = kCtRows / 4;                 // code words per Y row of a tile
constexpr int kCtHalfQuads = kCtThreads / kCtChunks;  // quads per half of a tile
constexpr int kCtWarps = kCtThreads / gpu::kLaneGroup;
constexpr int kCtSlots = 8;  // rows a thread holds
static_assert(2 * kCtHalfQuads == kCtQuads, "two quads per thread");

constexpr int kCtStages = 2;  // items whose chunks are in flight ahead of the current one
constexpr int kCtStagedBytes = kCtStages * kCtSlots * kCtThreads * 16;  // dynamic, 64 KB

template <InputType kType>
constexpr int kCtColsOf = kCtChunks* kVecOf<kType>;

struct ColTileArgs {
  bool vec_in = false, vec_out16 = false;
  int64_t row_tiles = 0, strips = 0, items = 0;
  // kTensor
  const uint32_t* partials = nullptr;
  int64_t partial_count = 0;
};

// The local row of slot j of this thread.
__device__ __forceinline__ int CtSlotRow(int j) {
  return 4 * (static_cast<int>(gpu::ThreadIdxX()) / kCtChunks + kCtHalfQuads * (j / 4)) + j % 4;
}

// |x| maxima of the elements of a chunk word, element-wise (two halves of two-byte inputs).
template <InputType kType>
__device__ __forceinline__ uint32_t AbsMaxWord(uint32_t acc, uint32_t w) {
  if constexpr (kType == InputType::kF32) {
    return max(acc, w & kAbsMask);
  } else {
    return MaxU16x2(acc, w & 0x7FFF7FFFu);
  }
}

template <InputType kType>
__device__ __forceinline__ uint32_t WordOf(const uint4& c, int w) {
  return w == 0 ? c.x : w == 1 ? c.y : w == 2 ? c.z : c.w;
}

// Element i of packed maxima `acc` as the bits of an fp32 |x|.
template <InputType kType>
__device__ __forceinline__ uint32_t ColumnBits(const uint32_t (&acc)[4], int i) {
  if constexpr (kType == InputType::kF32) {
    return acc[i];
  } else {
    const uint32_t h = (acc[i / 2] >> (16 * (i % 2))) & 0xFFFFu;
    if constexpr (kType == InputType::kBF16) {
      return h << 16;
    } else {
      return fp8::FloatBits(gpu::HalfBitsToFloat(static_cast<uint16_t>(h)));
    }
  }
}

// Folds the packed column maxima of the warp's two quads (lanes l and l + 16 hold the same
// chunk column) and writes the warp's maximum of each tile column to red_warp (lanes 0..15).
template <InputType kType>
__device__ __forceinline__ void WarpColumnMax(uint32_t (&acc)[4], uint32_t* red_warp) {
  constexpr int kVec = kVecOf<kType>;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const uint32_t other = gpu::ShflXor(acc[w], 16);
    if constexpr (kType == InputType::kF32) {
      acc[w] = max(acc[w], other);
    } else {
      acc[w] = MaxU16x2(acc[w], other);
    }
  }
  const int lane = gpu::ThreadIdxX() % gpu::kLaneGroup;
  if (lane < 16) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) red_warp[lane * kVec + i] = ColumnBits<kType>(acc, i);
  }
}

// The codes of chunk `raw` at the column scales `q`.
template <InputType kType, typename F>
__device__ __forceinline__ void EncodeWords(const uint4& raw, const float (&q)[kVecOf<kType>],
                                            uint32_t (&words)[kVecOf<kType> / 4]) {
  constexpr int kVec = kVecOf<kType>;
  float y[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) y[i] = __fmul_rn(ChunkElement<kType>(raw, i), q[i]);
  PackCodes<F, kVec>(y, words);
}

template <InputType kType, typename F, ColMode kMode>
__global__ void KD_LAUNCH_BOUNDS(kCtThreads, 2) ColTileKernel(RowColKernelArgs p, ColTileArgs a) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  constexpr int kCols = kCtColsOf<kType>;
  constexpr int kHalves = kMode == ColMode::kMx ? 2 : 1;
  constexpr int kPieces = kCols * (kCtRows / 16) / kCtThreads;  // 16-byte stores per thread
  __shared__ uint32_t red[kHalves][kCtWarps][kCols];
  __shared__ float col_quant[kMode == ColMode::kMx ? 4 : 1][kCols];
  __shared__ __align__(16) uint32_t codes[kCols * kCtQuads];
  __shared__ uint32_t warp_max[kCtWarps];
  extern __shared__ uint4 staged[];  // kCtStagedBytes: kCtStages items' chunks
  const int tid = gpu::ThreadIdxX();
  const int cc = tid % kCtChunks;
  const int warp = tid / gpu::kLaneGroup;
  float tensor_quant = 0.0f;
  if constexpr (kMode == ColMode::kTensor) {
    uint32_t m = 0;
    for (int64_t i = tid; i < a.partial_count; i += kCtThreads) m = max(m, a.partials[i]);
    m = CtaMax(m, warp_max);
    const BlockScale sc = ComputeScale(m, F::kMax, p.eps, p.pow2_scales);
    if (gpu::BlockIdxX() == 0 && tid == 0) static_cast<float*>(p.scales)[0] = sc.stored;
    tensor_quant = sc.quant;
  }
  const S* input = static_cast<const S*>(p.input);
  const auto coords = [&](int64_t n, int64_t& m0, int64_t& k0, int64_t& strip) {
    int64_t tile;
    if constexpr (kMode == ColMode::kTensor) {
      // Backwards, row band by row band: the end of X, read last by the amax kernel, first.
      const int64_t r = a.items - 1 - n;
      tile = r / a.strips;
      strip = r % a.strips;
    } else {
      strip = n / a.row_tiles;
      tile = n % a.row_tiles;
    }
    m0 = tile * kCtRows;
    k0 = strip * kCols;
  };
  // Item n's chunks into this thread's slots of stage `stage` (slot j at j * kCtThreads + tid,
  // read back only by this thread): cp.async where a chunk is whole and aligned, else loaded
  // here. Every call commits one cp.async group, an empty one past the last item.
  const auto prefetch = [&](int64_t n, int stage) {
    if (n >= a.items) {
      CpAsyncCommit();
      return;
    }
    int64_t m0, k0, strip;
    coords(n, m0, k0, strip);
    const int64_t c = k0 / kVec + cc;
    const bool whole = a.vec_in && (c + 1) * kVec <= p.k;
#pragma unroll
    for (int j = 0; j < kCtSlots; ++j) {
      const int64_t m = m0 + CtSlotRow(j);
      uint4* dst = &staged[(stage * kCtSlots + j) * kCtThreads + tid];
      if (whole && m < p.m) {
        const S* src = input + m * p.input_stride + c * kVec;
        CpAsync16(dst, src, 16);
      } else {
        *dst = m < p.m ? LoadChunk<kType>(input + m * p.input_stride, c, p.k, a.vec_in)
                       : make_uint4(0, 0, 0, 0);
      }
    }
    CpAsyncCommit();
  };
  const auto step = [&](int64_t n, int stage) {
    int64_t m0, k0, strip;
    coords(n, m0, k0, strip);
    static_assert(kCtStages == 2, "one group (the next item's) may stay in flight");
    CpAsyncWait<1>();
    uint4 tile[kCtSlots];
#pragma unroll
    for (int j = 0; j < kCtSlots; ++j) tile[j] = staged[(stage * kCtSlots + j) * kCtThreads + tid];
    prefetch(n + kCtStages * static_cast<int64_t>(gpu::GridDimX()), stage);
    const int64_t m_end = min(m0 + kCtRows, p.m);
    uint32_t row_codes[kCtSlots][kVec / 4];
#pragma unroll
    for (int j = 0; j < kCtSlots; ++j) {
#pragma unroll
      for (int w = 0; w < kVec / 4; ++w) row_codes[j][w] = 0;
    }
    if constexpr (kMode == ColMode::kTensor) {
      float q[kVec];
#pragma unroll
      for (int i = 0; i < kVec; ++i) q[i] = tensor_quant;
#pragma unroll
      for (int j = 0; j < kCtSlots; ++j) {
        if (m0 + CtSlotRow(j) < m_end) EncodeWords<kType, F>(tile[j], q, row_codes[j]);
      }
    } else {
      // 32x1 blocks: block b holds the rows of half b / 2 of warps 4 * (b % 2) .. + 3.
      uint32_t acc[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
#pragma unroll
      for (int j = 0; j < kCtSlots; ++j) {
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          acc[j / 4][w] = AbsMaxWord<kType>(acc[j / 4][w], WordOf<kType>(tile[j], w));
        }
      }
      WarpColumnMax<kType>(acc[0], red[0][warp]);
      WarpColumnMax<kType>(acc[1], red[1][warp]);
      gpu::SyncThreads();
      if (tid < kCols) {
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          uint32_t m = 0;
#pragma unroll
          for (int w = 0; w < 4; ++w) m = max(m, red[b / 2][4 * (b % 2) + w][tid]);
          const uint8_t sc = MxScaleCode<F>(m, p.mx_rceil);
          col_quant[b][tid] = MxMultiplier(sc);
          if (k0 + tid < p.k && m0 + 32 * b < p.m) {
            static_cast<uint8_t*>(p.scales)[(k0 + tid) * p.scales_stride + m0 / 32 + b] = sc;
          }
        }
      }
      gpu::SyncThreads();
#pragma unroll
      for (int j = 0; j < kCtSlots; ++j) {
        const int row = CtSlotRow(j);
        float q[kVec];
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          q[i] = col_quant[row / 32][cc * kVec + i];
        }
        if (m0 + row < m_end) EncodeWords<kType, F>(tile[j], q, row_codes[j]);
      }
    }
    // Transpose the codes into the tile's Y rows: word `quad` of Y row col holds rows
    // 4 * quad .. + 3 of X column col.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int quad = tid / kCtChunks + kCtHalfQuads * h;
      const int at = quad ^ (2 * cc);
#pragma unroll
      for (int w = 0; w < kVec / 4; ++w) {
        const uint32_t r0 = row_codes[4 * h][w], r1 = row_codes[4 * h + 1][w];
        const uint32_t r2 = row_codes[4 * h + 2][w], r3 = row_codes[4 * h + 3][w];
        const uint32_t lo01 = __byte_perm(r0, r1, 0x5140);
        const uint32_t lo23 = __byte_perm(r2, r3, 0x5140);
        const uint32_t hi01 = __byte_perm(r0, r1, 0x7362);
        const uint32_t hi23 = __byte_perm(r2, r3, 0x7362);
        const int col = cc * kVec + 4 * w;
        codes[(col + 0) * kCtQuads + at] = __byte_perm(lo01, lo23, 0x5410);
        codes[(col + 1) * kCtQuads + at] = __byte_perm(lo01, lo23, 0x7632);
        codes[(col + 2) * kCtQuads + at] = __byte_perm(hi01, hi23, 0x5410);
        codes[(col + 3) * kCtQuads + at] = __byte_perm(hi01, hi23, 0x7632);
      }
    }
    gpu::SyncThreads();
#pragma unroll
    for (int i = 0; i < kPieces; ++i) {
      const int u = i * kCtThreads + tid;
      const int yr = u / 8, part = u % 8;
      const int ccr = yr / kVec;
      uint4 v = *reinterpret_cast<const uint4*>(&codes[yr * kCtQuads + 4 * (part ^ (ccr >> 1))]);
      if (ccr & 1) v = make_uint4(v.z, v.w, v.x, v.y);
      const int64_t k = k0 + yr;
      const int64_t mcol = m0 + 16 * part;
      if (k < p.k && mcol < p.m) {
        uint8_t* dst = p.output + k * p.output_stride + mcol;
        if (a.vec_out16 && mcol + 16 <= p.m) {
          *reinterpret_cast<uint4*>(dst) = v;
        } else {
          const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int b = 0; b < 16; ++b) {
            if (mcol + b < p.m) dst[b] = static_cast<uint8_t>(words[b / 4] >> (8 * (b % 4)));
          }
        }
      }
    }
    gpu::SyncThreads();  // codes (and red, col_quant) are reused by the next item
  };
  if (gpu::BlockIdxX() >= a.items) return;
  prefetch(gpu::BlockIdxX(), 0);
  prefetch(gpu::BlockIdxX() + static_cast<int64_t>(gpu::GridDimX()), 1);
  int stage = 0;
  for (int64_t n = gpu::BlockIdxX(); n < a.items; n += gpu::GridDimX()) {
    step(n, stage);
    stage ^= 1;
  }
}

// mx1x32 of Y = Xᵀ, two-byte inputs: one 128x128 tile of X per CTA (the recipe of
// quantize_tiled.cu's async kernel). The tile arrives by cp.async straight into 32 KB of shared
// memory (rows past M zero-filled); thread t then owns columns 2 * (t % 64) and + 1 over rows
// 32 * (t / 64) .. + 31, which are exactly one 32x1 block of each column: its amax, e8m0 scale
// and codes need no other thread. The codes go over the first 16 KB of the tile (16-byte chunks
// XOR-swizzled, conflict-free) after a barrier, and leave with 16-byte stores, a warp writing 4
// whole 128-byte rows of Y. 48 registers, 32.5 KB of shared memory: 5 CTAs per SM.
// NOTE: 0.85-0.93 of the copy on an H100 against ColTileKernel's 0.68-0.83.
constexpr int kMxtThreads = 256;
constexpr int kMxtEdge = 128;                           // rows and columns of X per tile
constexpr int kMxtRowBytes = kMxtEdge * 2;              // a tile row of X in shared memory
constexpr int kMxtSmemBytes = kMxtEdge * kMxtRowBytes;  // 32 KB
constexpr int kMxtMinBlocks = 5;

// Byte offset of 16-byte chunk `c` of Y row `row` in the code tile.
__device__ __forceinline__ int MxtCodeOffset(int row, int c) {
  return row * kMxtEdge + ((c ^ ((row >> 1) & 7)) * 16);
}

template <InputType kType, typename F>
__global__ void KD_LAUNCH_BOUNDS(kMxtThreads, kMxtMinBlocks)
    MxTileAsyncKernel(RowColKernelArgs p, int group_k, bool vec_out16, bool vec_scales) {
  using S = typename Input<kType>::Storage;
  static_assert(sizeof(S) == 2, "two-byte inputs");
  extern __shared__ __align__(16) unsigned char mxt_smem[];
  __shared__ uint32_t scale_words[kMxtEdge];  // the 4 e8m0 codes of each tile column
  const int tid = gpu::ThreadIdxX();
  // Tile order: row-major, or groups of group_k column tiles taken row band by row band.
  const int k_tiles = static_cast<int>((p.k + kMxtEdge - 1) / kMxtEdge);
  const int tile = static_cast<int>(gpu::BlockIdxX());
  int tile_m, tile_k;
  if (group_k >= k_tiles) {
    tile_m = tile / k_tiles;
    tile_k = tile - tile_m * k_tiles;
  } else {
    const int m_tiles = static_cast<int>((p.m + kMxtEdge - 1) / kMxtEdge);
    const int group = tile / (group_k * m_tiles);
    const int local = tile - group * group_k * m_tiles;
    const int width = min(group_k, k_tiles - group * group_k);
    tile_m = local / width;
    tile_k = group * group_k + local - tile_m * width;
  }
  const int64_t m0 = static_cast<int64_t>(tile_m) * kMxtEdge;
  const int64_t k0 = static_cast<int64_t>(tile_k) * kMxtEdge;
  unsigned char* xs = mxt_smem;
  {
    const S* input = static_cast<const S*>(p.input);
    const int lane_col = tid % 16;
    const int64_t kc = k0 + lane_col * 8;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int row = j * (kMxtThreads / 16) + tid / 16;
      const int64_t r = m0 + row;
      const int bytes = r < p.m && kc < p.k ? 16 : 0;
      const S* src = bytes > 0 ? input + r * p.input_stride + kc : input;
      CpAsync16(xs + row * kMxtRowBytes + lane_col * 16, src, bytes);
    }
    CpAsyncWaitAll();
  }
  gpu::SyncThreads();
  const int pair = tid % 64, block = tid / 64;
  const unsigned char* at = xs + block * 32 * kMxtRowBytes + pair * 4;
  uint32_t acc = 0;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    acc = MaxU16x2(acc, *reinterpret_cast<const uint32_t*>(at + i * kMxtRowBytes) & 0x7FFF7FFFu);
  }
  const uint8_t sa = MxScaleCode<F>(HalfAbsBits<kType>(acc, 0), p.mx_rceil);
  const uint8_t sb = MxScaleCode<F>(HalfAbsBits<kType>(acc, 1), p.mx_rceil);
  const float qa = MxMultiplier(sa), qb = MxMultiplier(sb);
  unsigned char* scale_bytes = reinterpret_cast<unsigned char*>(scale_words);
  scale_bytes[(2 * pair) * 4 + block] = sa;
  scale_bytes[(2 * pair + 1) * 4 + block] = sb;
  // A finite multiplier makes every product of the block finite (|x| <= amax); a NaN one (amax
  // Inf or NaN) makes them all NaN.
  const bool hwa = qa == qa, hwb = qb == qb;
  uint4 held[2][2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    EncodePair16<kType, F>(at + 16 * h * kMxtRowBytes, kMxtRowBytes, qa, qb, hwa, hwb, held[h][0],
                           held[h][1]);
  }
  gpu::SyncThreads();  // every read of the tile done: its first 16 KB take the codes
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    *reinterpret_cast<uint4*>(xs + MxtCodeOffset(2 * pair, 2 * block + h)) = held[h][0];
    *reinterpret_cast<uint4*>(xs + MxtCodeOffset(2 * pair + 1, 2 * block + h)) = held[h][1];
  }
  if (tid < kMxtEdge && k0 + tid < p.k) {
    // Scales (K, M/32): the tile column's 4 codes, one word where aligned (m0 / 32 is a
    // multiple of 4).
    uint8_t* dst = static_cast<uint8_t*>(p.scales) + (k0 + tid) * p.scales_stride + m0 / 32;
    const int64_t left = p.m / 32 - m0 / 32;
    const int n = left < 4 ? static_cast<int>(left) : 4;
    const uint32_t w = scale_words[tid];
    if (vec_scales && n == 4) {
      *reinterpret_cast<uint32_t*>(dst) = w;
    } else {
      for (int b = 0; b < n; ++b) dst[b] = static_cast<uint8_t>(w >> (8 * b));
    }
  }
  gpu::SyncThreads();
#pragma unroll
  for (int i = 0; i < kMxtEdge * (kMxtEdge / 16) / kMxtThreads; ++i) {
    const int idx = i * kMxtThreads + tid;
    const int row = idx / 8, c = idx % 8;
    const int64_t k = k0 + row, m = m0 + c * 16;
    if (k < p.k && m < p.m) {
      const uint4 v = *reinterpret_cast<const uint4*>(xs + MxtCodeOffset(row, c));
      StoreCodes16(p.output + k * p.output_stride + m, m, 0, p.m, v, vec_out16);
    }
  }
}

}  // namespace quant
}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_QUANTIZE_TRANSPOSED_CUH_
