// One scale per (group, column of X) with Y = Xᵀ: jagged_colwise, and per_row of Xᵀ (one group of
// every row). ColStripKernel reads X once where a group's rows of a column strip fit in shared
// memory; otherwise ColAmaxKernel, ColScaleKernel and ColEncodeKernel read it twice.
#ifndef KERNELD_KERNELS_GPU_QUANTIZE_COLWISE_CUH_
#define KERNELD_KERNELS_GPU_QUANTIZE_COLWISE_CUH_

#include <cstdint>

#include "kernels/gpu/quantize_common.cuh"
#include "kernels/gpu/quantize_group_ends.cuh"
#include "kernels/gpu/quantize_rowcol.cuh"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace quant {

// Where the stored scale of (group g, column col of X) goes: (groups, k) for jagged_colwise,
// (k, 1) for per_row of Xᵀ.
__device__ __forceinline__ int64_t ColScaleAt(const RowColKernelArgs& p, int64_t g, int64_t col) {
  return p.kind == RowQuantizeKind::kPerRowTransposed ? col * p.scales_stride
                                                      : g * p.scales_stride + col;
}

// Amax per (group, column of X): thread = one chunk of columns over kColAmaxRows rows; it folds
// its column maxima into the cells of a group with atomicMax when it leaves the group.
template <InputType kType>
__global__ void KD_LAUNCH_BOUNDS(kColAmaxThreads)
    ColAmaxKernel(RowColKernelArgs p, bool vec_in, JaggedScratch s) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  if (*s.valid == 0) return;
  const int64_t cpr = (p.k + kVec - 1) / kVec;
  const int64_t c = static_cast<int64_t>(gpu::BlockIdxX()) * kColAmaxThreads + gpu::ThreadIdxX();
  if (c >= cpr) return;
  const int64_t r_begin = static_cast<int64_t>(gpu::BlockIdxY()) * kColAmaxRows;
  const int64_t r_end = min(p.m, r_begin + kColAmaxRows);
  const S* input = static_cast<const S*>(p.input);
  int64_t g = GroupOfRow(s.ends, ColGroups(p), r_begin);  // < groups: the last end is m
  int64_t g_end = s.ends[g];
  uint32_t acc[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) acc[i] = 0;
  const int64_t col0 = c * kVec;
  auto flush = [&]() {
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      if (acc[i] != 0 && col0 + i < p.k) atomicMax(&s.cell_amax[g * p.k + col0 + i], acc[i]);
      acc[i] = 0;
    }
  };
  for (int64_t r0 = r_begin; r0 < r_end; r0 += kRowsInFlight) {
    uint4 raw[kRowsInFlight];
#pragma unroll
    for (int i = 0; i < kRowsInFlight; ++i) {
      raw[i] = r0 + i < r_end ? LoadChunk<kType>(input + (r0 + i) * p.input_stride, c, p.k, vec_in)
                              : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < kRowsInFlight; ++i) {
      const int64_t r = r0 + i;
      if (r < r_end) {
        while (r >= g_end) {
          flush();
          ++g;
          g_end = s.ends[g];
        }
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          acc[e] = max(acc[e], fp8::FloatBits(ChunkElement<kType>(raw[i], e)) & kAbsMask);
        }
      }
    }
  }
  flush();
}

template <typename F>
__global__ void KD_LAUNCH_BOUNDS(kColThreads) ColScaleKernel(RowColKernelArgs p, JaggedScratch s) {
  if (*s.valid == 0) return;
  const int64_t cells = ColGroups(p) * p.k;
  for (int64_t cell = static_cast<int64_t>(gpu::BlockIdxX()) * kColThreads + gpu::ThreadIdxX();
       cell < cells; cell += static_cast<int64_t>(gpu::GridDimX()) * kColThreads) {
    const BlockScale sc = ComputeScale(s.cell_amax[cell], F::kMax, p.eps, p.pow2_scales);
    s.cell_scale[cell] = sc.quant;
    static_cast<float*>(p.scales)[ColScaleAt(p, cell / p.k, cell % p.k)] = sc.stored;
  }
}

// Y = Xᵀ encode: a CTA converts a tile of kColTileRows rows x kColTileCols columns of X, each
// element with the scale of its (group, column), into shared memory transposed, then writes
// kColTileCols rows of Y. Thread unit = 4 consecutive rows x one chunk, so that the codes of one
// column of the 4 rows form one word. Row tiles are walked from the last.
template <InputType kType, typename F>
__global__ void KD_LAUNCH_BOUNDS(kColThreads)
    ColEncodeKernel(RowColKernelArgs p, bool vec_in, bool vec_out16, JaggedScratch s) {
  using S = typename Input<kType>::Storage;
  constexpr int kVec = kVecOf<kType>;
  constexpr int kRowChunks = kColTileCols / kVec;        // chunks per tile row
  constexpr int kUnits = kColTileRows / 4 * kRowChunks;  // 4-row units per tile
  constexpr int kUnitsPerThread = kUnits / kColThreads;
  constexpr int kPitch = kColTileRows / 4 + 1;  // words per tile row of Y
  static_assert(kUnits % kColThreads == 0, "whole units per thread");
  __shared__ int64_t group_of[kColTileRows];
  __shared__ uint32_t tile[kColTileCols * kPitch];
  if (*s.valid == 0) return;
  const int tid = gpu::ThreadIdxX();
  const S* input = static_cast<const S*>(p.input);
  const int64_t k0 = static_cast<int64_t>(gpu::BlockIdxX()) * kColTileCols;
  const int64_t row_tiles = (p.m + kColTileRows - 1) / kColTileRows;
  for (int64_t t = gpu::BlockIdxY(); t < row_tiles; t += gpu::GridDimY()) {
    const int64_t m0 = (row_tiles - 1 - t) * kColTileRows;
    if (tid < kColTileRows) {
      group_of[tid] = m0 + tid < p.m ? GroupOfRow(s.ends, ColGroups(p), m0 + tid) : 0;
    }
    gpu::SyncThreads();
#pragma unroll
    for (int u = 0; u < kUnitsPerThread; ++u) {
      const int unit = u * kColThreads + tid;
      const int cc = unit % kRowChunks, quad = unit / kRowChunks;
      const int64_t col0 = k0 + static_cast<int64_t>(cc) * kVec;  // first column of the chunk
      const int64_t chunk = col0 / kVec;
      uint4 raw[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int64_t m = m0 + quad * 4 + r;
        raw[r] = m < p.m ? LoadChunk<kType>(input + m * p.input_stride, chunk, p.k, vec_in)
                         : make_uint4(0, 0, 0, 0);
      }
      uint32_t rows[4][kVec / 4];
      float scale[kVec];
      int64_t scale_group = -1;
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int64_t g = group_of[quad * 4 + r];
        if (g != scale_group) {
          scale_group = g;
#pragma unroll
          for (int i = 0; i < kVec; ++i) {
            scale[i] = col0 + i < p.k ? s.cell_scale[g * p.k + col0 + i] : 0.0f;
          }
        }
        float y[kVec];
#pragma unroll
        for (int i = 0; i < kVec; ++i) y[i] = __fmul_rn(ChunkElement<kType>(raw[r], i), scale[i]);
        PackCodes<F, kVec>(y, rows[r]);
      }
      // 4x4 byte transposes: word w of rows 0..3 -> the words of columns 4w..4w+3.
#pragma unroll
      for (int w = 0; w < kVec / 4; ++w) {
        const uint32_t lo01 = __byte_perm(rows[0][w], rows[1][w], 0x5140);
        const uint32_t lo23 = __byte_perm(rows[2][w], rows[3][w], 0x5140);
        const uint32_t hi01 = __byte_perm(rows[0][w], rows[1][w], 0x7362);
        const uint32_t hi23 = __byte_perm(rows[2][w], rows[3][w], 0x7362);
        const int col = cc * kVec + 4 * w;
        tile[(col + 0) * kPitch + quad] = __byte_perm(lo01, lo23, 0x5410);
        tile[(col + 1) * kPitch + quad] = __byte_perm(lo01, lo23, 0x7632);
        tile[(col + 2) * kPitch + quad] = __byte_perm(hi01, hi23, 0x5410);
        tile[(col + 3) * kPitch + quad] = __byte_perm(hi01, hi23, 0x7632);
      }
    }
    gpu::SyncThreads();
    // Rows of Y: 8 threads per row, 4 words (16 codes) each.
    constexpr int kThreadsPerRow = kColTileRows / 16;
    constexpr int kRowsPerPass = kColThreads / kThreadsPerRow;
#pragma unroll
    for (int pass = 0; pass < kColTileCols / kRowsPerPass; ++pass) {
      const int yr = pass * kRowsPerPass + tid / kThreadsPerRow;
      const int q = tid % kThreadsPerRow;
      const int64_t k = k0 + yr;
      if (k >= p.k) continue;
      uint32_t w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] = tile[yr * kPitch + 4 * q + i];
      const int64_t mcol = m0 + 16 * q;
      uint8_t* dst = p.output + k * p.output_stride + mcol;
      if (vec_out16 && mcol + 16 <= p.m) {
        *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
      } else {
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          if (mcol + i < p.m) dst[i] = static_cast<uint8_t>(w[i / 4] >> (8 * (i % 4)));
        }
      }
    }
    gpu::SyncThreads();  // group_of and tile are reused by the next row tile
  }
}

// jagged_colwise and per_row of Xᵀ in one read, two-byte inputs: one CTA per (column strip of
// kCsCols columns, group). The group's rows of the strip go by cp.async into shared memory
// (`cap` rows of kCsRowBytes at a time, from the group's first row rounded down to a multiple of
// 16, rows outside the group zero-filled); the column maxima come from shared memory, then the
// scales, then the codes of the rows still in shared memory. A group taller than `cap` rows is
// taken in pieces of `cap` rows: the amax walks them all, the encode walks them back from the
// last, which is still in shared memory, reading the others again. Encode unit: a word (two
// columns) of 16 rows of a 16-row-aligned block, whose 2 x 16 codes go to the two Y rows with
// 16-byte stores.
constexpr int kCsThreads = 256;
constexpr int kCsCols = 32;
constexpr int kCsRowBytes = kCsCols * 2;   // 64: one strip row of X in shared memory
constexpr int kCsWords = kCsRowBytes / 4;  // 16
constexpr int kCsChunks = kCsRowBytes / 16;

template <InputType kType, typename F>
__global__ void KD_LAUNCH_BOUNDS(kCsThreads, 3)
    ColStripKernel(RowColKernelArgs p, JaggedScratch s, int cap, bool vec_out16) {
  using S = typename Input<kType>::Storage;
  static_assert(sizeof(S) == 2, "two-byte inputs");
  extern __shared__ __align__(16) unsigned char cs_smem[];
  __shared__ uint32_t red[kCsThreads / gpu::kLaneGroup][kCsWords];
  __shared__ float col_quant[kCsCols];
  if (*s.valid == 0) return;
  const int tid = gpu::ThreadIdxX();
  const int64_t k0 = static_cast<int64_t>(gpu::BlockIdxX()) * kCsCols;
  const int64_t g = gpu::BlockIdxY();
  const int64_t start = g == 0 ? 0 : s.ends[g - 1], end = s.ends[g];
  const int64_t a0 = start / 16 * 16;
  const int64_t pieces = end > start ? (end - a0 + cap - 1) / cap : 0;
  const S* input = static_cast<const S*>(p.input);
  unsigned char* xs = cs_smem;
  auto rows_of = [&](int64_t piece) {
    const int64_t left = end - a0 - piece * cap;
    return static_cast<int>(left < cap ? left : cap);
  };
  auto load = [&](int64_t piece) {
    const int64_t base = a0 + piece * cap;
    const int n = rows_of(piece) * kCsChunks;
    for (int u = tid; u < n; u += kCsThreads) {
      const int row = u / kCsChunks, c = u % kCsChunks;
      const int64_t r = base + row, col = k0 + c * 8;
      const int bytes = r >= start && col < p.k ? 16 : 0;
      const S* src = bytes > 0 ? input + r * p.input_stride + col : input;
      CpAsync16(xs + row * kCsRowBytes + c * 16, src, bytes);
    }
    CpAsyncWaitAll();
    gpu::SyncThreads();
  };
  // Column maxima: thread t folds word t % 16 of rows t / 16, + 16, ... (a warp reads two whole
  // rows, 128 bytes: conflict-free).
  uint32_t acc = 0;
  for (int64_t piece = 0; piece < pieces; ++piece) {
    if (piece > 0) gpu::SyncThreads();  // every read of the previous piece done
    load(piece);
    const int n = rows_of(piece);
    for (int row = tid / kCsWords; row < n; row += kCsThreads / kCsWords) {
      acc = MaxU16x2(
          acc, *reinterpret_cast<const uint32_t*>(xs + row * kCsRowBytes + (tid % kCsWords) * 4) &
                   0x7FFF7FFFu);
    }
  }
  acc = MaxU16x2(acc, gpu::ShflXor(acc, 16));
  if (tid % gpu::kLaneGroup < kCsWords) red[tid / gpu::kLaneGroup][tid % gpu::kLaneGroup] = acc;
  gpu::SyncThreads();
  bool finite = true;
  if (tid < kCsCols) {
    uint32_t m = 0;
#pragma unroll
    for (int w = 0; w < kCsThreads / gpu::kLaneGroup; ++w) m = MaxU16x2(m, red[w][tid / 2]);
    const BlockScale sc =
        ComputeScale(HalfAbsBits<kType>(m, tid % 2), F::kMax, p.eps, p.pow2_scales);
    col_quant[tid] = sc.quant;
    finite = sc.finite;
    if (k0 + tid < p.k) static_cast<float*>(p.scales)[ColScaleAt(p, g, k0 + tid)] = sc.stored;
  }
  const bool hw = gpu::SyncThreadsAnd(finite) != 0;
  for (int64_t piece = pieces - 1; piece >= 0; --piece) {
    if (piece != pieces - 1) {
      gpu::SyncThreads();  // every read of the later piece done
      load(piece);
    }
    const int64_t base = a0 + piece * cap;
    const int units = (rows_of(piece) + 15) / 16 * kCsWords;
    for (int u = tid; u < units; u += kCsThreads) {
      const int w = u % kCsWords, blk = u / kCsWords;
      const int64_t col = k0 + 2 * w;
      if (col >= p.k) continue;  // K is even: col + 1 < K too
      uint4 ya, yb;
      EncodePair16<kType, F>(xs + blk * 16 * kCsRowBytes + w * 4, kCsRowBytes, col_quant[2 * w],
                             col_quant[2 * w + 1], hw, hw, ya, yb);
      const int64_t m = base + 16 * blk;
      StoreCodes16(p.output + col * p.output_stride + m, m, start, end, ya, vec_out16);
      StoreCodes16(p.output + (col + 1) * p.output_stride + m, m, start, end, yb, vec_out16);
    }
  }
}

}  // namespace quant
}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_QUANTIZE_COLWISE_CUH_
