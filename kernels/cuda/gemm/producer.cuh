// The producer warpgroup of the FP8 GEMM: warp 0 issues the TMA loads of every K block's A and B
// tiles (and, in the TMA-scale instantiation, of its scales) into the ring of stages; warps 1..3
// copy the scales with cp.async where TMA does not load them. Every load completes on the stage's
// full barrier; a stage is refilled once the consumers have freed it (its empty barrier).
#ifndef KERNELD_KERNELS_CUDA_GEMM_PRODUCER_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_PRODUCER_CUH_

#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/gemm/gemm_fp8_kernel.h"
#include "kernels/cuda/gemm/ptx_barrier.cuh"
#include "kernels/cuda/gemm/ptx_cp_async.cuh"
#include "kernels/cuda/gemm/ptx_tma.cuh"
#include "kernels/cuda/gemm/ptx_utils.cuh"
#include "kernels/cuda/gemm/scale_promotion.cuh"
#include "kernels/cuda/gemm/smem_layout.cuh"
#include "kernels/cuda/gemm/tile_scheduler.cuh"
#include "kernels/cuda/gemm/trace.cuh"

namespace kd {
namespace cuda_gemm {

// 128-column B scale blocks a tile's columns span: two for the 192-wide tile.
template <int kBlockN>
constexpr int kScaleBlocksB = kBlockN > 128 ? 2 : 1;

// Warp 0 of the producer: per K block of this CTA's work items, waits for a free stage and loads
// the A tile, this CTA's share of the B tile (multicast to the cluster) and, in the TMA-scale
// instantiation (kRowFloats == kScaleBoxCols), a box of four K blocks' scales when the block
// starts one (NextScaleSlot): A's box holds the tile's rows of four K blocks, as (row, block)
// from row-major scales or (block, row) from K-block-major ones (kAKBlockMajor).
// NOTE: the whole warp walks the loop, so that its values are warp-uniform and live in uniform
// registers, and one elected lane issues: walked by one lane, ptxas wrapped each TMA issue in a
// loop over the distinct values of its operands (R2UR, BRA.U.ANY), which lengthens a stage's
// refill.
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kRowFloats,
          bool kAKBlockMajor = false>
__device__ __forceinline__ void ProduceTiles(const KernelParams& p,
                                             const Scheduler<kBlockM, kBlockN, kCluster>& sched,
                                             int first_work, int work_stride, uint8_t* smem,
                                             uint32_t rank, const CUtensorMap* map_a,
                                             const CUtensorMap* map_b, const CUtensorMap* map_sa,
                                             const CUtensorMap* map_sb, int lane) {
  using L = SmemLayout<kBlockM, kBlockN, kStages, kRowFloats>;
  constexpr bool scale_tma = kRowFloats == kScaleBoxCols;
  constexpr int kTileABytes = L::kTileABytes;
  uint8_t* tiles_a = smem + L::kA;
  uint8_t* tiles_b = smem + L::kB;
  float* scales_a = reinterpret_cast<float*>(smem + L::kScaleA);
  float* scales_b = reinterpret_cast<float*>(smem + L::kScaleB);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L::kFull);
  uint64_t* empty = reinterpret_cast<uint64_t*>(smem + L::kEmpty);
  int stage = 0;
  uint32_t phase = 0;
  const bool leader = ElectOne();
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map_a)));
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map_b)));
  if (scale_tma) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map_sa)));
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map_sb)));
  }
  // Bytes a stage's full barrier expects: the A and B tiles and, with a box's first block, the
  // scale boxes (all of a box's bytes count, out-of-bounds ones too).
  constexpr uint32_t kTileBytes = kTileABytes + L::kTileBBytes;
  constexpr uint32_t kBoxBytes = (kBlockM + kScaleBlocksB<kBlockN>)*kScaleBoxCols * 4;
  int scale_slot = kStages - 1;  // NextScaleSlot
  Tracer tr(p, 2, lane == 0);
  for (int t = first_work; t < sched.total; t += work_stride) {
    const Tile tile = sched.Get(t);
    for (int kb = tile.kb_begin; kb < tile.kb_end; ++kb) {
      tr.Mark(0);
      BarrierWait(&empty[stage], phase ^ 1);
      tr.Mark(1);
      tr.Next();
      const bool box =
          scale_tma &&
          NextScaleSlot<kStages>(scale_slot, ScaleColumn<kScaleBoxCols>(kb), kb == tile.kb_begin);
      if (leader) {
        BarrierArriveExpectTx(&full[stage], kTileBytes + (box ? kBoxBytes : 0));
        TmaLoad2d(tiles_a + stage * kTileABytes, map_a, &full[stage], kb * kBlockK, tile.m0);
        if (box) {
          // Each CTA of a cluster loads its own: the box holding column kb (ScaleColumn), rows
          // from the tile's first row (A) or scale block (B); rows past the tensor and columns
          // past K/128 read zero.
          const int col0 = kb - ScaleColumn<kScaleBoxCols>(kb);
          if constexpr (kAKBlockMajor) {
            TmaLoad2d(scales_a + scale_slot * (L::kScaleABytes / 4), map_sa, &full[stage], tile.m0,
                      col0);
          } else {
            TmaLoad2d(scales_a + scale_slot * (L::kScaleABytes / 4), map_sa, &full[stage], col0,
                      tile.m0);
          }
          TmaLoad2d(scales_b + scale_slot * (L::kScaleBBytes / 4), map_sb, &full[stage], col0,
                    tile.n0 / 128);
        }
        constexpr int kPart = kBlockN / kCluster;  // B rows this CTA loads for all
        constexpr uint16_t kMask = static_cast<uint16_t>((1u << kCluster) - 1);
        if (p.mode == KernelMode::kMGrouped) {
          if constexpr (kCluster > 1) {
            TmaLoad3dMulticast(tiles_b + stage * L::kTileBBytes + rank * kPart * kBlockK, map_b,
                               &full[stage], kb * kBlockK, tile.n0 + rank * kPart, tile.group,
                               kMask);
          } else {
            TmaLoad3d(tiles_b + stage * L::kTileBBytes, map_b, &full[stage], kb * kBlockK, tile.n0,
                      tile.group);
          }
        } else if constexpr (kCluster > 1) {
          TmaLoad2dMulticast(tiles_b + stage * L::kTileBBytes + rank * kPart * kBlockK, map_b,
                             &full[stage], kb * kBlockK, tile.n0 + rank * kPart, kMask);
        } else {
          TmaLoad2d(tiles_b + stage * L::kTileBBytes, map_b, &full[stage], kb * kBlockK, tile.n0);
        }
      }
      __syncwarp();
      if (++stage == kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
}

// Warps 1..3 of the producer where TMA does not load the scales: warps 1 and 2 copy the A
// scales (half of the tile's rows each), warp 3 the B scales (per row, or the one or two 128x128
// blocks the tile spans), 4 bytes a lane, completing on the stage's full barrier.
// NOTE: spread over three warps, and so over three of the SM's four schedulers, which the
// consumer warpgroups share (each wgmma waits for all four of a warpgroup's warps).
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kRowFloats>
__device__ __forceinline__ void CopyScales(const KernelParams& p,
                                           const Scheduler<kBlockM, kBlockN, kCluster>& sched,
                                           int first_work, int work_stride, uint8_t* smem, int warp,
                                           int lane) {
  using L = SmemLayout<kBlockM, kBlockN, kStages, kRowFloats>;
  constexpr int scale_row = kRowFloats;  // floats per scale row
  float* scales_a = reinterpret_cast<float*>(smem + L::kScaleA);
  float* scales_b = reinterpret_cast<float*>(smem + L::kScaleB);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L::kFull);
  uint64_t* empty = reinterpret_cast<uint64_t*>(smem + L::kEmpty);
  int stage = 0;
  uint32_t phase = 0;
  const int role = warp - 1;
  Tracer tr(p, 3, role == 2 && lane == 0);
  for (int t = first_work; t < sched.total; t += work_stride) {
    const Tile tile = sched.Get(t);
    for (int kb = tile.kb_begin; kb < tile.kb_end; ++kb) {
      tr.Mark(0);
      BarrierWait(&empty[stage], phase ^ 1);
      tr.Mark(1);
      tr.Next();
      if (role < 2) {
        const int scale_col = scale_row > 1 ? kb % scale_row : 0;  // ScaleColumn
        float* sa =
            scales_a + stage * (L::kScaleABytes / 4) + role * (kBlockM / 2) * scale_row + scale_col;
#pragma unroll
        for (int i = 0; i < kBlockM / 64; ++i) {
          const int row = tile.m0 + role * (kBlockM / 2) + lane + 32 * i;
          const bool valid = row < p.m;
          CpAsync4(sa + (lane + 32 * i) * scale_row, p.a_scales + (valid ? row * p.sa_row + kb : 0),
                   valid);
        }
      } else {
        float* sb = scales_b + stage * (L::kScaleBBytes / 4) + (scale_row > 1 ? kb % scale_row : 0);
        if (p.b_scale_per_row) {
#pragma unroll
          for (int i = 0; i < kBlockN / 32; ++i) {
            const int col = tile.n0 + lane + 32 * i;
            const bool valid = col < p.n;
            CpAsync4(sb + (lane + 32 * i) * scale_row,
                     p.b_scales + (valid ? col * p.sb_row + kb : 0), valid);
          }
        } else if (lane < kScaleBlocksB<kBlockN>) {
          // A wide tile's columns span two 128-column scale blocks; one past N reads zero.
          const int nb = tile.n0 / 128 + lane;
          const bool valid = nb * 128 < p.n;
          CpAsync4(sb + lane * scale_row,
                   p.b_scales + (valid ? tile.group * p.sb_group + nb * p.sb_row + kb : 0), valid);
        }
      }
      CpAsyncArrive(&full[stage]);
      if (++stage == kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
  }
}

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_PRODUCER_CUH_
