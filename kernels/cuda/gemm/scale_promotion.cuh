// Promotion of the FP8 GEMM: per 128-wide K block, the fp32 partial sum the tensor core wrote is
// multiplied by a_scale(row) * b_scale and added to the tile's fp32 accumulator outside the tensor
// core (whose own FP8 accumulation keeps fewer bits). The scales sit in shared memory: rows of
// kRow floats per tile row of A and per column (per-row B) or 128-column block (128x128 B) of B,
// written by the producer's cp.async copies (kRow 1) or TMA boxes of four K blocks (kRow 4).
#ifndef KERNELD_KERNELS_CUDA_GEMM_SCALE_PROMOTION_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_SCALE_PROMOTION_CUH_

#include <cstdint>

#include "kernels/cuda/gemm/ptx_utils.cuh"

namespace kd {
namespace cuda_gemm {

// The scales of one K block for this thread's two rows, read from the stage before the wait
// for the block's wgmmas so that the promotion does not wait on shared-memory latency. NT: the
// products a_scale(row) * b_scale; per-row B scales: the A scales and the first kColScalesEarly
// column scale pairs (the rest are read during the promotion: holding them all would spill).
// NOTE: without them, the first FMUL after the wait stalls on its column scales.
constexpr int kColScalesEarly = 4;  // per-row B: column scale pairs read before the wait
struct BlockScales {
  float s0, s1;
  float2 col[kColScalesEarly];  // per-row B only
};

// Scale tiles hold one row per tile row (or B scale block) of kRow floats, the first used:
// 4 (the TMA box's 16 bytes) where the shared memory has room, else 1 (SmemLayout::kScaleRow).
// kRowA: floats between the A scales of consecutive tile rows (kRow, or 1 where the A scales come
// K-block-major: a box holds four K blocks' columns of kBlockM scales each).
template <bool kPerRowB, int kRow, int kRowA = kRow>
__device__ __forceinline__ BlockScales LoadScales(uint32_t sa, uint32_t sb) {
  BlockScales sc;
  sc.s0 = LoadSharedF32(sa);
  sc.s1 = LoadSharedF32(sa + 8 * 4 * kRowA);
  if constexpr (!kPerRowB) {
    const float b = LoadSharedF32(sb);
    sc.s0 *= b;
    sc.s1 *= b;
  } else {
#pragma unroll
    for (int j = 0; j < kColScalesEarly; ++j) {
      sc.col[j] = LoadSharedF32x2(sb + 8 * j * 4);
      FenceOperand(sc.col[j].x);
      FenceOperand(sc.col[j].y);
    }
  }
  // Finished here, before the caller's wgmma wait: ptxas otherwise moves the loads' use and the
  // products after the wait, onto the chain from the wait to the next issue.
  FenceOperand(sc.s0);
  FenceOperand(sc.s1);
  return sc;
}

// acc += part * scale once the wgmmas that wrote `part` completed; `sb` is the shared address
// of this thread's first column scale (per-row B scales only).
template <int kBlockN, bool kPerRowB>
__device__ __forceinline__ void Promote(float (&acc)[kBlockN / 2], float (&part)[kBlockN / 2],
                                        const BlockScales& sc, uint32_t sb) {
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) FenceOperand(part[i]);
  if constexpr (kPerRowB) {
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
      const float2 b = j < kColScalesEarly ? sc.col[j] : LoadSharedF32x2(sb + 8 * j * 4);
      acc[4 * j + 0] += part[4 * j + 0] * (sc.s0 * b.x);
      acc[4 * j + 1] += part[4 * j + 1] * (sc.s0 * b.y);
      acc[4 * j + 2] += part[4 * j + 2] * (sc.s1 * b.x);
      acc[4 * j + 3] += part[4 * j + 3] * (sc.s1 * b.y);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
      acc[4 * j + 0] += part[4 * j + 0] * sc.s0;
      acc[4 * j + 1] += part[4 * j + 1] * sc.s0;
      acc[4 * j + 2] += part[4 * j + 2] * sc.s1;
      acc[4 * j + 3] += part[4 * j + 3] * sc.s1;
    }
  }
}

// The column of K block `kb`'s scale in a scale row of kRow floats. TMA boxes must start at a
// 16-byte aligned address, so the box of block kb starts at column kb - kb % 4 and holds the
// scales of blocks kb - kb % 4 .. +3: the block's own is column kb % 4 (the cp.async path
// writes it there too).
template <int kRow>
__host__ __device__ constexpr int ScaleColumn(int kb) {
  return kRow > 1 ? kb % kRow : 0;
}

// ScaleSlots: the TMA-scale instantiation loads a scale box (four K blocks' scales) once, with
// the first of its blocks that a tile walks (column 0, or the tile's first block), into the next
// of kStages scale slots; the producer and the consumers step through the slots here, with the
// same blocks. A slot is reloaded kStages box loads later, with a block b whose stage the block
// b - kStages has freed. The kStages - 1 boxes loaded in between serve at least one block each,
// so b - kStages is no earlier than the last block that read the slot, and the consumers free
// stages in block order, each after reading its block's scales: none still reads the slot.
// Returns whether the block at scale column `column` loads a box.
// NOTE: an A box's rows are 16-byte pieces, 128 L2 requests per box: one box per four blocks
// rather than one per block.
template <int kStages>
__device__ __forceinline__ bool NextScaleSlot(int& slot, int column, bool tile_first) {
  const bool box = column == 0 || tile_first;
  if (box) slot = slot + 1 == kStages ? 0 : slot + 1;
  return box;
}

// 128x128 B scales of one K block for a wide tile, whose columns span at most two scale blocks.
struct WideScales {
  float s00, s01;  // row 0 (this thread's first row) x scale block 0 / 1
  float s10, s11;  // row 1 (8 rows further)
};

// kRow and kRowA as for LoadScales.
template <int kRow, int kRowA = kRow>
__device__ __forceinline__ WideScales LoadWideScales(uint32_t sa, uint32_t sb) {
  const float a0 = LoadSharedF32(sa);
  const float a1 = LoadSharedF32(sa + 8 * 4 * kRowA);
  float2 b;
  if constexpr (kRow == 1) {
    b = LoadSharedF32x2(sb);
  } else {
    b.x = LoadSharedF32(sb);
    b.y = LoadSharedF32(sb + 4 * kRow);
  }
  WideScales sc{a0 * b.x, a0 * b.y, a1 * b.x, a1 * b.y};
  // Meant to be finished before the caller's wgmma wait (see LoadScales). NOTE: the fences are
  // empty asm, which order the PTX but do not bind ptxas's schedule: the four FMULs may still be
  // placed after the WARPGROUP.DEPBAR.
  FenceOperand(sc.s00);
  FenceOperand(sc.s01);
  FenceOperand(sc.s10);
  FenceOperand(sc.s11);
  return sc;
}

// acc += part * scale, with 128x128 B scales, for a wide tile: it starts at a multiple of
// kAlign = gcd(kBlockN, 128) columns and spans at most two scale blocks. Fragment column group j
// (8 columns) is in block 0 below kAlign / 8 and in block 1 from 16 on; in between (192-column
// tiles, which start 0 or 64 columns into a scale block) it is in block 0 exactly when the tile
// starts at a block boundary (`mid_first`): one select per row and block instead of one per
// group.
template <int kBlockN>
__device__ __forceinline__ void PromoteWide(float (&acc)[kBlockN / 2], float (&part)[kBlockN / 2],
                                            const WideScales& sc, bool mid_first) {
  constexpr int kAlign = kBlockN % 128 == 0 ? 128 : 64;
  static_assert(kBlockN % 64 == 0 && 128 - kAlign + kBlockN <= 256,
                "a wide tile spans at most two B scale blocks");
#pragma unroll
  for (int i = 0; i < kBlockN / 2; ++i) FenceOperand(part[i]);
  const float m0 = mid_first ? sc.s00 : sc.s01;
  const float m1 = mid_first ? sc.s10 : sc.s11;
#pragma unroll
  for (int j = 0; j < kBlockN / 8; ++j) {
    float r0, r1;
    if (j < kAlign / 8) {
      r0 = sc.s00;
      r1 = sc.s10;
    } else if (j < 16) {
      r0 = m0;
      r1 = m1;
    } else {
      r0 = sc.s01;
      r1 = sc.s11;
    }
    acc[4 * j + 0] += part[4 * j + 0] * r0;
    acc[4 * j + 1] += part[4 * j + 1] * r0;
    acc[4 * j + 2] += part[4 * j + 2] * r1;
    acc[4 * j + 3] += part[4 * j + 3] * r1;
  }
}

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_SCALE_PROMOTION_CUH_
