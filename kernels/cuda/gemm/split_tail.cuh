// The split tail of the FP8 GEMM: a dense problem whose last wave of tiles would leave at least
// half of the CTAs idle runs that wave's tiles as K slices on the idle CTAs; the slices meet
// through a workspace in the caller's scratch, in a fixed order (so results are the same bits on
// every run). Host planning (PlanSplitTail) and the device side (CompleteTile): a non-owner slice
// stores its warpgroup's fp32 accumulator to its slot in the fragment's own register order
// (element i of thread tid at i * 128 + tid: each warp store is 128 contiguous bytes), then counts
// on the flag of (tile, CTA rank, warpgroup). The owner waits until the flag has counted every
// other slice and adds their partials, slice 0 first, to its own accumulator (slice split_k-1's
// blocks), then stores the tile as usual.
#ifndef KERNELD_KERNELS_CUDA_GEMM_SPLIT_TAIL_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_SPLIT_TAIL_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/gemm/epilogue.cuh"
#include "kernels/cuda/gemm/gemm_fp8_kernel.h"
#include "kernels/cuda/gemm/ptx_barrier.cuh"
#include "kernels/cuda/gemm/ptx_utils.cuh"
#include "kernels/cuda/gemm/tile_scheduler.cuh"
#include "kernels/cuda/gemm/trace.cuh"

namespace kd {
namespace cuda_gemm {

// Release-add 1 to `flag` from thread 0 of the warpgroup, once every thread's stores are
// visible (each fences, then the warpgroup meets at the barrier). Predicated, not branched:
// ptxas serializes wgmmas in flight across a branch it cannot prove warp-uniform.
__device__ __forceinline__ void SignalSlice(unsigned* flag, int tid, int bar_id) {
  __threadfence();
  NamedBarrierSync(bar_id, 128);
  asm volatile(
      "{\n"
      ".reg .pred first;\n"
      "setp.eq.u32 first, %1, 0;\n"
      "@first red.release.gpu.global.add.u32 [%0], 1;\n"
      "}\n" ::"l"(flag),
      "r"(tid)
      : "memory");
}

// Every thread spins (acquire loads inside one asm block) until `flag` reaches `count`.
__device__ __forceinline__ void WaitSlices(const unsigned* flag, unsigned count) {
  asm volatile(
      "{\n"
      ".reg .pred wait;\n"
      ".reg .b32 seen;\n"
      "SPIN:\n"
      "ld.acquire.gpu.global.u32 seen, [%0];\n"
      "setp.lt.u32 wait, seen, %1;\n"
      "@wait bra SPIN;\n"
      "}\n" ::"l"(flag),
      "r"(count)
      : "memory");
}

// The end of a work item's K blocks for this warpgroup: stores the tile (whole tile or owner
// slice) and returns, or, for a non-owner slice, hands its partial to the owner.
template <int kBlockM, int kBlockN, int kCluster, int kEpiBuffers>
__device__ __forceinline__ void CompleteTile(const KernelParams& p, const Tile& tile, int consumer,
                                             float (&acc)[kBlockN / 2], EpiState& epi, int tid,
                                             int bar_id, uint32_t rank, Tracer& tr) {
  constexpr int kAcc = kBlockN / 2;
  constexpr int kSlot = kBlockM * kBlockN;  // floats
  const int slices = Uniform(tile.slices);
  if (slices > 1) {
    const int slice = Uniform(tile.slice);
    const int tail = Uniform(tile.tail_tile);
    unsigned* flag = p.split_flags + (tail * kCluster + rank) * (kBlockM / 64) + consumer;
    // Slot of (tail tile, slice < slices - 1, rank): this warpgroup's 64 rows.
    auto slot = [&](int s) {
      return p.split_partials +
             (static_cast<int64_t>(tail * (slices - 1) + s) * kCluster + rank) * kSlot +
             consumer * (64 * kBlockN) + tid;
    };
    if (slice < slices - 1) {
      float* dst = slot(slice);
#pragma unroll
      for (int i = 0; i < kAcc; ++i) __stcg(dst + i * 128, acc[i]);
      SignalSlice(flag, tid, bar_id);
      return;
    }
    WaitSlices(flag, static_cast<unsigned>(slices - 1));
    for (int s = 0; s < slices - 1; ++s) {
      const float* src = slot(s);
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[i] += __ldcg(src + i * 128);
    }
  }
  StoreTile<kBlockN, kEpiBuffers>(p, tile, consumer, acc, epi, tid, bar_id, tr);
}

constexpr int kMaxSlices = 8;
constexpr int kMinSliceBlocks = 4;  // K blocks: below, the partial's round trip outweighs them

// The workspace's flags: one per (tile, CTA rank, warpgroup) of a wave, 256-byte aligned.
inline uint64_t SplitFlagBytes(int sm_count) {
  return (static_cast<uint64_t>(3 * sm_count) * sizeof(unsigned) + 255) / 256 * 256;
}

// Splits the last wave of a dense problem when its tiles would leave at least half of the
// `resident` CTAs idle: `tail` = work items % clusters, each split into s = clusters / tail slices
// (at most kMaxSlices, at least kMinSliceBlocks K blocks each), so the split items fill one wave.
// With fewer work items than clusters, the grid grows to hold them all (`num_ctas`). Sets params'
// split fields (flags cleared on `stream`); leaves them at "no split" when the tail fits no split
// or the workspace (`workspace_bytes`, sized for `sm_count` SMs) is too small.
// NOTE: slices spread over two waves (tail > clusters / 2) lose: twice the partials' round trips
// cost more than the third of a wave they save (docs/decisions/0005-gemm-split-tail.md).
template <int kBlockM, int kBlockN, int kCluster>
cudaError_t PlanSplitTail(KernelParams& p, int resident, int& num_ctas, int sm_count,
                          void* workspace, uint64_t workspace_bytes, cudaStream_t stream) {
  if (workspace == nullptr || p.mode != KernelMode::kDense) return cudaSuccess;
  const int items =
      (p.m + kBlockM * kCluster - 1) / (kBlockM * kCluster) * ((p.n + kBlockN - 1) / kBlockN);
  const int clusters = std::max(1, std::min(num_ctas, resident) / kCluster);
  const int tail = items % clusters;
  if (tail == 0 && items >= clusters) return cudaSuccess;
  const int tail_items = items < clusters ? items : tail;
  const int slices = std::min({clusters / tail_items, kMaxSlices, p.k / kBlockK / kMinSliceBlocks});
  if (slices < 2) return cudaSuccess;
  const uint64_t flag_bytes = SplitFlagBytes(sm_count);
  const uint64_t flags = static_cast<uint64_t>(tail_items) * kCluster * (kBlockM / 64);
  const uint64_t slots = static_cast<uint64_t>(tail_items) * (slices - 1) * kCluster;
  if (flags * sizeof(unsigned) > flag_bytes ||
      flag_bytes + slots * kBlockM * kBlockN * sizeof(float) > workspace_bytes) {
    return cudaSuccess;
  }
  p.split_first = items - tail_items;
  p.split_k = slices;
  p.split_flags = static_cast<unsigned*>(workspace);
  p.split_partials = reinterpret_cast<float*>(static_cast<char*>(workspace) + flag_bytes);
  if (items < clusters) num_ctas = items * slices * kCluster;
  return cudaMemsetAsync(p.split_flags, 0, flags * sizeof(unsigned), stream);
}

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_SPLIT_TAIL_CUH_
