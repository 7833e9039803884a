// Dynamic shared memory of the FP8 GEMM CTA: per stage the A and B tiles (TMA, 128-byte swizzle)
// and their scales, the consumers' epilogue buffers, the stage barriers and the group table.
#ifndef KERNELD_KERNELS_CUDA_GEMM_SMEM_LAYOUT_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_SMEM_LAYOUT_CUH_

#include "kernels/cuda/gemm/gemm_fp8_kernel.h"
#include "kernels/cuda/gemm/tile_scheduler.cuh"

namespace kd {
namespace cuda_gemm {

// Dynamic shared memory a CTA may opt in to on sm_90 (227 KB).
constexpr int kMaxSmemBytes = 232448;

// An epilogue buffer: a 64-row slice of a consumer warpgroup's tile, rows of 128 bytes.
constexpr int kEpiRowBytes = 128;
constexpr int kEpiBytes = 64 * kEpiRowBytes;  // one buffer: a 64-row slice of 128-byte rows
static_assert(kOutBoxCols * 2 == kEpiRowBytes && kOutBoxRows == 64,
              "a bulk store writes one bf16 buffer");

// Bytes of dynamic shared memory for a tile, stage count and scale row of `row` floats.
constexpr int SmemBytesWith(int block_m, int block_n, int stages, int row, int epi_buffers) {
  return stages * ((block_m + block_n) * (kBlockK + 4 * row) + 16) +
         (block_m / 64) * epi_buffers * kEpiBytes + static_cast<int>(sizeof(GroupTable)) + 1024;
}

// The L1/shared carve-out step below the largest: a CTA with more shared memory than this leaves
// the SM 28 KB of L1 instead of 60 (sm_90's steps of 132, 164, 196 and 228 KB).
constexpr int kCarveOutStepBytes = 196 * 1024;

// Epilogue buffers per consumer warpgroup: two (a bulk store may still be reading one while the
// other is written) for the tiles with TMA stores where they fit and do not push a layout that was
// under the carve-out step past it; else one. NOTE: the step matters: TN on 128x192 runs 6% slower
// at 205 KB than at 190, the smaller L1 under its cp.async scale copies.
constexpr int EpiBuffers(int block_m, int block_n, int stages, int row) {
  return TileStoresByTma(block_n) &&
                 SmemBytesWith(block_m, block_n, stages, row, 2) <= kMaxSmemBytes &&
                 (SmemBytesWith(block_m, block_n, stages, row, 1) > kCarveOutStepBytes ||
                  SmemBytesWith(block_m, block_n, stages, row, 2) <= kCarveOutStepBytes)
             ? 2
             : 1;
}

constexpr int SmemBytes(int block_m, int block_n, int stages, int row) {
  return SmemBytesWith(block_m, block_n, stages, row, EpiBuffers(block_m, block_n, stages, row));
}

// Whether the tile has an instantiation that loads its scales by TMA (launched for dense
// problems with 128x128 B scales in clusters of 2 only, see LaunchGemmFp8Kernel): 128x192 only.
// NOTE: TMA scale loads make 128x192 in clusters of 2 about 5% faster on an H100, but unclustered
// 128x192, 192x128, 64x64 and M-grouped slower, and TN on 128x192 loses 6% from the larger scale
// rows alone (a smaller L1), hence a separate instantiation; the 128x128 tile with 6 stages and
// 128x64 with 8 have no room for them (docs/decisions/0002-gemm-tma-scale-loads.md).
constexpr bool TmaScales(int block_m, int block_n, int stages) {
  return block_m == 128 && block_n == 192 &&
         SmemBytes(block_m, block_n, stages, kScaleBoxCols) <= kMaxSmemBytes;
}

// Per stage: the A and B tiles, a scale row per tile row of A and per column of B (per-row B
// scales; 128x128 B scales use the first one or two rows). A scale row is kRowFloats floats:
// 4, the 16-byte box of the TMA scale loads, in the TMA-scale instantiation, else 1 (those
// instantiations always copy the scales with cp.async).
template <int kBlockM, int kBlockN, int kStages, int kRowFloats>
struct SmemLayout {
  static_assert(kRowFloats == 1 ||
                    (kRowFloats == kScaleBoxCols && TmaScales(kBlockM, kBlockN, kStages)),
                "scale rows of one float, or of a TMA box where the tile has room for it");
  static constexpr int kScaleRow = kRowFloats;
  static constexpr int kTileABytes = kBlockM * kBlockK;  // e4m3: one byte per element
  static constexpr int kTileBBytes = kBlockN * kBlockK;
  static constexpr int kScaleABytes = kBlockM * 4 * kScaleRow;  // per stage
  static constexpr int kScaleBBytes = kBlockN * 4 * kScaleRow;
  static constexpr int kA = 0;
  static constexpr int kB = kA + kStages * kTileABytes;
  // kEpiBuffers buffers of kEpiBytes per consumer, 1024-byte aligned (a TMA source with
  // 128-byte swizzle).
  static constexpr int kEpiBuffers = EpiBuffers(kBlockM, kBlockN, kStages, kRowFloats);
  // The buffers the epilogue's TMA-store path cycles through; 0: the tile is built without it.
  static constexpr int kStoreBuffers = TileStoresByTma(kBlockN) ? kEpiBuffers : 0;
  static constexpr int kEpi = kB + kStages * kTileBBytes;
  static_assert(kEpi % 1024 == 0, "epilogue buffers");
  // 128-byte aligned, as TMA's destinations must be.
  static constexpr int kScaleA = kEpi + (kBlockM / 64) * kEpiBuffers * kEpiBytes;
  static constexpr int kScaleB = kScaleA + kStages * kScaleABytes;
  static constexpr int kFull = kScaleB + kStages * kScaleBBytes;
  static constexpr int kEmpty = kFull + kStages * 8;
  static constexpr int kGroups = kEmpty + kStages * 8;
  // + 1024 so that the base can be rounded up to the 1024-byte alignment of 128-byte swizzle.
  static constexpr int kBytes = kGroups + static_cast<int>(sizeof(GroupTable)) + 1024;
  static_assert(kBytes == SmemBytes(kBlockM, kBlockN, kStages, kScaleRow), "layout");
  static_assert(kScaleA % 128 == 0 && kScaleB % 128 == 0 && kScaleABytes % 128 == 0 &&
                    kScaleBBytes % 128 == 0,
                "TMA destinations");
};

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_SMEM_LAYOUT_CUH_
