// The consumer loop of the wide tile (128x192) and the three-warpgroup tile (192x128): one partial
// sum per warpgroup, each K block issued, waited for and promoted in turn, the warpgroups running
// free of one another.
//
// A 64 x 192 fp32 partial is 96 registers per thread: two of them and the accumulator would not
// fit beside addressing, so a wide tile keeps one partial per warpgroup. The warpgroup issues a
// block's four wgmmas, waits for all of them (wait_group 0), promotes, frees the stage and issues
// the next block into the same partial; while it promotes, the tensor core runs the other
// warpgroups' blocks. Per 128-K block the 128 x 192 tile reads 16 KB of A and 2 x 24 KB of B from
// shared memory and loads 40 KB (A + B) from L2, for 1.5x the FLOPs of a 128 x 128 tile's 48 KB
// read and 32 KB loaded.
// A 192 x 128 tile has three consumer warpgroups of 64 x 128 (one 64-register partial each, 512
// threads): each warpgroup's per-block chain (wait, 64 promotion FFMAs, release, next block's
// bookkeeping and issue) has the other two's blocks, 512 tensor-core cycles, to hide under, where
// the 128 x 192 tile's has one block of 384. Same area per tile (24576 outputs), 40 KB loaded per
// K block (24 KB A + 16 KB B).
#ifndef KERNELD_KERNELS_CUDA_GEMM_CONSUMER_ONE_PARTIAL_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_CONSUMER_ONE_PARTIAL_CUH_

#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/gemm/epilogue.cuh"
#include "kernels/cuda/gemm/gemm_fp8_kernel.h"
#include "kernels/cuda/gemm/pipeline.cuh"
#include "kernels/cuda/gemm/ptx_barrier.cuh"
#include "kernels/cuda/gemm/ptx_utils.cuh"
#include "kernels/cuda/gemm/scale_promotion.cuh"
#include "kernels/cuda/gemm/smem_layout.cuh"
#include "kernels/cuda/gemm/split_tail.cuh"
#include "kernels/cuda/gemm/tile_scheduler.cuh"
#include "kernels/cuda/gemm/trace.cuh"
#include "kernels/cuda/gemm/wgmma.cuh"

namespace kd {
namespace cuda_gemm {

// A one-partial loop's per-thread frame (ConsumerLoopOnePartial): this warpgroup's consumer index,
// its thread's shared-memory addresses of the A tile and of its rows' and columns' scales, and its
// epilogue buffer. kAKBlockMajor: the A scales arrive in K-block-major boxes (ScaleLoad).
template <int kBlockM, int kBlockN, int kStages, int kRowFloats, bool kPerRowB,
          bool kAKBlockMajor = false>
struct OnePartialFrame {
  using L = SmemLayout<kBlockM, kBlockN, kStages, kRowFloats>;
  // Per-row B scales (TN, K-grouped) are always copied with cp.async, in rows of one float.
  static constexpr int kRow = kPerRowB ? 1 : L::kScaleRow;
  // Floats between the A scales of consecutive tile rows.
  static constexpr int kRowA = kAKBlockMajor ? 1 : kRow;
  int consumer, tid;
  uint32_t base, a_base, sa_base, sb_base;
  EpiState epi;
  __device__ __forceinline__ OnePartialFrame(uint8_t* smem, const CUtensorMap* map_d) {
    consumer = Uniform(threadIdx.x / 128) - 1;
    tid = threadIdx.x % 128;
    // NOTE: the lane and B scale address are pinned in registers (Opaque) for the 128-row tile
    // only: the 192-row tile's consumers (152 registers) spill ~190 bytes with all three pinned.
    constexpr bool kPin = kBlockM / 64 == 2;
    auto pin = [](uint32_t v) { return kPin ? Opaque(v) : v; };
    const int lane = static_cast<int>(pin(tid % 32));
    base = SmemAddr(smem);
    a_base = base + L::kA + consumer * 64 * kBlockK;
    sa_base = Opaque(base + L::kScaleA + 4 * kRowA * (consumer * 64 + (tid / 32) * 16 + lane / 4));
    sb_base = pin(base + L::kScaleB + (kPerRowB ? 4 * 2 * (lane % 4) : 0));
    epi.buf = base + L::kEpi + consumer * L::kEpiBuffers * kEpiBytes;
    epi.map_d = map_d;
  }
};

// The one-partial tiles' loop, without turns and without issuing ahead: per K block the
// warpgroup issues the four k32 steps, reads the block's scales and checks the next block's stage
// while they run, waits for them, frees the stage and promotes; the tile's epilogue follows its
// last block. The warpgroups run free, so the tensor core takes their blocks in whatever order
// they come (the order of DeepGEMM's SM90 kernel).
// NOTE: checking the next stage before the wait leaves only the promotion and the next issue
// after it (+3-4% for TN and M-grouped on an H100).
// NOTE: ptxas sets the yield hint on about every other promotion FFMA here; those warp switches
// during the promotion are what let the other warpgroups issue
// (docs/decisions/0008-gemm-yield-hints.md, scheduling hints).
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kRowFloats, bool kPerRowB,
          bool kAKBlockMajor = false>
__device__ __forceinline__ void ConsumerLoopOnePartial(
    const KernelParams& p, const Scheduler<kBlockM, kBlockN, kCluster>& sched, int first_work,
    int work_stride, uint8_t* smem, uint32_t rank, const CUtensorMap* map_d) {
  using L = SmemLayout<kBlockM, kBlockN, kStages, kRowFloats>;
  constexpr int kAcc = kBlockN / 2;
  constexpr int kWide = kBlockN > 128;
  static_assert(kBlockN == 128 || kBlockN == 192, "one-partial tiles: 128 or 192 columns");
  using F = OnePartialFrame<kBlockM, kBlockN, kStages, kRowFloats, kPerRowB, kAKBlockMajor>;
  constexpr int kRow = F::kRow;
  constexpr int kRowA = F::kRowA;
  const F f(smem, map_d);
  const int consumer = f.consumer, tid = f.tid;
  const uint32_t base = f.base, a_base = f.a_base, sa_base = f.sa_base, sb_base = f.sb_base;
  EpiState epi = f.epi;
  const int total = Uniform(sched.total);
  Tracer tr(p, consumer, tid == 0 && consumer < 2);
  int stage = 0;
  uint32_t phase = 0;
  float acc[kAcc];
  float part[kAcc];
  int scale_slot = kStages - 1;  // TMA-scale instantiation: the block's (NextScaleSlot)
  for (int t = first_work; t < total; t += work_stride) {
    const Tile tile = sched.Get(t);
    const int blocks = Uniform(tile.kb_end - tile.kb_begin);
    if (blocks == 0) {
      if (!p.accumulate) StoreZeroTile<kBlockN>(p, tile, consumer, tid);
      continue;
    }
    bool mid_first = true;
    if constexpr (kWide) mid_first = Uniform(tile.n0 % 128) == 0;
    uint32_t col = 0;
    if constexpr (kRow > 1) col = 4 * ScaleColumn<kRow>(Uniform(tile.kb_begin));
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
    // Each block's stage is checked before the wait for the previous block's wgmmas (the first
    // one here), so that after that wait only the promotion and the next issue remain.
    BarrierWait(base + L::kFull + 8 * stage, phase);
    for (int b = 0; b < blocks; ++b) {
      if (b > 0) tr.Next();  // a tile's last block keeps its record for the epilogue's marks
      tr.Mark(0);
      const int cur = stage;
      int slot = cur;            // cp.async scales sit in the block's stage
      if constexpr (kRow > 1) {  // TMA-scale: in scale slots, stepped as the producer does
        NextScaleSlot<kStages>(scale_slot, col / 4, b == 0);
        slot = scale_slot;
      }
      // A K-block-major box holds column kb % 4 as kBlockM consecutive floats.
      uint32_t col_a = col;
      if constexpr (kAKBlockMajor) col_a = col * kBlockM;
      const uint32_t sa = sa_base + slot * L::kScaleABytes + col_a;
      const uint32_t sb = sb_base + slot * L::kScaleBBytes + col;
      IssueBlock<kBlockN>(part, a_base + cur * L::kTileABytes, base + L::kB + cur * L::kTileBBytes);
      tr.Mark(4);
      Advance<kStages>(stage, phase);
      if constexpr (kPerRowB || !kWide) {
        const BlockScales sc = LoadScales<kPerRowB, kRow, kRowA>(sa, sb);
        if (b + 1 < blocks) BarrierWait(base + L::kFull + 8 * stage, phase);
        tr.Mark(3);
        WgmmaWait<0>();
        tr.Mark(1);
        Promote<kBlockN, kPerRowB>(acc, part, sc, sb);
        ReleaseStage<kCluster>(base + L::kEmpty + 8 * cur, rank);
      } else {
        const WideScales sc = LoadWideScales<kRow, kRowA>(sa, sb);
        if (b + 1 < blocks) BarrierWait(base + L::kFull + 8 * stage, phase);
        tr.Mark(3);
        WgmmaWait<0>();
        tr.Mark(1);
        ReleaseStage<kCluster>(base + L::kEmpty + 8 * cur, rank);
        PromoteWide<kBlockN>(acc, part, sc, mid_first);
      }
      tr.Mark(2);
      if constexpr (kRow > 1) col = (col + 4) % (4 * kRow);
    }
    // NOTE: the tile is looked up again rather than kept across its blocks: kept, it costs the
    // 192x128 consumers (128 registers) 16-24 bytes of spills and 128x192 1-2%.
    CompleteTile<kBlockM, kBlockN, kCluster, L::kStoreBuffers>(p, sched.Get(t), consumer, acc, epi,
                                                               tid, 1 + consumer, rank, tr);
    tr.Mark(5);
    tr.Next();
  }
}

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_CONSUMER_ONE_PARTIAL_CUH_
