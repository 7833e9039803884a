// The consumer loop of the tiles up to 128 columns with one or two consumer warpgroups: two
// partial sums per warpgroup, the next K block issued before the previous one is promoted.
#ifndef KERNELD_KERNELS_CUDA_GEMM_CONSUMER_TWO_PARTIALS_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_CONSUMER_TWO_PARTIALS_CUH_

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

// The warpgroup walks the K blocks of all its tiles as one
// sequence. Two partial sums alternate: block g+1's wgmmas are issued into one before the
// warpgroup waits (wait_group 1) for block g's in the other and promotes it, so the tensor core
// has queued work while the warpgroup scales and adds; the next tile's first block is issued
// before the epilogue of the tile it follows. A stage is freed only once the wgmmas that read it
// have completed and its scales were read.
// NOTE: each issue is followed on every path by a wait that retires the older group before
// either partial is read or issued into again, and each partial is issued into at one place
// inside the loop: otherwise ptxas serializes the wgmmas (C7514/C7517/C7518). A loop per tile
// with the next tile's first block issued in its tail needs copies of in-flight partials at the
// back edge (C7514).
template <int kBlockM, int kBlockN, int kStages, int kCluster, int kRowFloats, bool kPerRowB>
__device__ __forceinline__ void ConsumerLoopTwoPartials(
    const KernelParams& p, const Scheduler<kBlockM, kBlockN, kCluster>& sched, int first_work,
    int work_stride, uint8_t* smem, uint32_t rank, const CUtensorMap* map_d) {
  using L = SmemLayout<kBlockM, kBlockN, kStages, kRowFloats>;
  constexpr int kAcc = kBlockN / 2;  // fp32 accumulator registers per thread for m64nN
  const int consumer = Uniform(threadIdx.x / 128) - 1;
  const int tid = threadIdx.x % 128;
  // The per-thread values are pinned in registers (Opaque, see OnePartialFrame): the A scale
  // address always, the lane and B scale address for tiles of 64 columns only (with 128, whose
  // accumulator and two partials take 192 registers, ptxas spills 120-128 bytes).
  constexpr bool kPin = kBlockN <= 64;
  auto pin = [](uint32_t v) { return kPin ? Opaque(v) : v; };
  const int lane = static_cast<int>(pin(tid % 32));
  // Shared addresses: everything below is the base plus constants and the stage.
  const uint32_t base = SmemAddr(smem);
  const uint32_t a_base = base + L::kA + consumer * 64 * kBlockK;
  // Per-row B scales (TN, K-grouped) are always copied with cp.async, in rows of one float.
  constexpr int kRow = kPerRowB ? 1 : L::kScaleRow;
  const uint32_t sa_base =
      Opaque(base + L::kScaleA + 4 * kRow * (consumer * 64 + (tid / 32) * 16 + lane / 4));
  const uint32_t sb_base = pin(base + L::kScaleB + (kPerRowB ? 4 * 2 * (lane % 4) : 0));
  EpiState epi;
  epi.buf = base + L::kEpi + consumer * L::kEpiBuffers * kEpiBytes;
  epi.map_d = map_d;
  const int total = Uniform(sched.total);
  auto blocks_of = [&](int t) {
    const Tile tile = sched.Get(t);
    return Uniform(tile.kb_end - tile.kb_begin);
  };

  // Issue side: the ring position of the next block to issue, and the tile it comes from.
  int stage = 0;
  uint32_t phase = 0;
  int issue_tile = first_work - work_stride;
  int issue_left = 0;  // blocks of issue_tile not yet issued
  // Moves to the next block to issue; false when none is left. Tiles with no K block (an empty
  // group of K-grouped) are written here: zeros, or left as they are when accumulating.
  auto next_issue = [&]() {
    while (issue_left == 0) {
      issue_tile += work_stride;
      if (issue_tile >= total) return false;
      issue_left = blocks_of(issue_tile);
      if (issue_left == 0 && !p.accumulate) {
        StoreZeroTile<kBlockN>(p, sched.Get(issue_tile), consumer, tid);
      }
    }
    --issue_left;
    return true;
  };
  Tracer tr(p, consumer, tid == 0);
  auto issue = [&](float(&part)[kAcc]) {
    BarrierWait(base + L::kFull + 8 * stage, phase);
    tr.Mark(6);
    IssueBlock<kBlockN>(part, a_base + stage * L::kTileABytes,
                        base + L::kB + stage * L::kTileBBytes);
    Advance<kStages>(stage, phase);
  };

  // Finish side: blocks complete in issue order, so their stages follow the ring.
  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
  int done_stage = 0;
  int done_tile = first_work - work_stride;
  int done_left = 0;      // blocks of done_tile not yet promoted
  uint32_t done_col = 0;  // the block's column in the scale rows, in bytes (ScaleColumn)
  // One scheduler lookup per tile (each is three divisions).
  Tile done_info;  // done_tile's Tile, for its epilogue (found once per tile)
  auto next_done_tile = [&]() {
    Tile tile;
    do {
      done_tile += work_stride;
      done_left = 0;
      if (done_tile < total) {
        tile = sched.Get(done_tile);
        done_left = Uniform(tile.kb_end - tile.kb_begin);
      }
    } while (done_tile < total && done_left == 0);
    done_info = tile;
    if constexpr (kRow > 1) {
      if (done_tile < total) done_col = 4 * ScaleColumn<kRow>(Uniform(tile.kb_begin));
    }
  };
  next_done_tile();
  // The oldest block's scales, read before the wait for its wgmmas.
  auto scales = [&]() {
    return LoadScales<kPerRowB, kRow>(sa_base + done_stage * L::kScaleABytes + done_col,
                                      sb_base + done_stage * L::kScaleBBytes + done_col);
  };
  auto finish = [&](float(&part)[kAcc], const BlockScales& sc) {
    Promote<kBlockN, kPerRowB>(acc, part, sc, sb_base + done_stage * L::kScaleBBytes + done_col);
    ReleaseStage<kCluster>(base + L::kEmpty + 8 * done_stage, rank);
    if (++done_stage == kStages) done_stage = 0;
    if constexpr (kRow > 1) done_col = (done_col + 4) % (4 * kRow);
    if (--done_left == 0) {
      CompleteTile<kBlockM, kBlockN, kCluster, L::kStoreBuffers>(p, done_info, consumer, acc, epi,
                                                                 tid, 1 + consumer, rank, tr);
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
      next_done_tile();
    }
  };

  float part0[kAcc];
  float part1[kAcc];
  if (!next_issue()) return;
  issue(part0);
  while (true) {
    // part0 holds the oldest block in flight.
    tr.Mark(0);
    const bool more = next_issue();
    BlockScales sc;
    if (more) {
      issue(part1);
      tr.Mark(3);
      sc = scales();
      WgmmaWait<1>();
    } else {
      sc = scales();
      WgmmaWait<0>();
    }
    tr.Mark(1);
    finish(part0, sc);
    tr.Mark(2);
    tr.Next();
    if (!more) {
      WgmmaWait<0>();  // retires nothing; tells ptxas that no wgmma is in flight past here
      break;
    }
    // part1 holds the oldest block in flight.
    tr.Mark(0);
    const bool more2 = next_issue();
    if (more2) {
      issue(part0);
      tr.Mark(3);
      sc = scales();
      WgmmaWait<1>();
    } else {
      sc = scales();
      WgmmaWait<0>();
    }
    tr.Mark(1);
    finish(part1, sc);
    tr.Mark(2);
    tr.Next();
    if (!more2) {
      WgmmaWait<0>();
      break;
    }
  }
}

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_CONSUMER_TWO_PARTIALS_CUH_
