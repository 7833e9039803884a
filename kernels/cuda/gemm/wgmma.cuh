// wgmma issue of the FP8 GEMM (sm_90a): shared-memory descriptors, fence/commit/wait, and one
// K block of four m64nNk32 steps.
#ifndef KERNELD_KERNELS_CUDA_GEMM_WGMMA_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_WGMMA_CUH_

#include <cstdint>

#include "kernels/cuda/gemm/gemm_fp8_kernel.h"
#include "kernels/cuda/gemm/wgmma_ops.cuh"

namespace kd {
namespace cuda_gemm {

// Shared-memory matrix descriptor of a K-major tile written by TMA with 128-byte swizzle:
// rows of 128 bytes, 8-row groups 1024 bytes apart (the stride byte offset).
// The low word holds the address / 16 (14 bits: shared addresses stay below 2^18) and the
// leading byte offset (1: unused for swizzled K-major); the high word the stride byte offset and
// the swizzle mode, the same for every tile.
constexpr uint32_t kDescHi = (1024 >> 4) | (1u << 30);  // stride 1024 bytes, 128-byte swizzle

__device__ __forceinline__ uint32_t SmemDescLo(uint32_t addr) { return (addr >> 4) | (1u << 16); }

__device__ __forceinline__ uint64_t SmemDesc(uint32_t lo) {
  uint64_t desc;
  asm("mov.b64 %0, {%1, %2};" : "=l"(desc) : "r"(lo), "r"(kDescHi));
  return desc;
}

__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Issues one K block (four k32 steps) for this warpgroup's 64 rows (A at shared address
// `a_addr`) and all kBlockN columns (B at `b_addr`) into `part` (overwritten), as one commit
// group.
template <int kBlockN>
__device__ __forceinline__ void IssueBlock(float (&part)[kBlockN / 2], uint32_t a_addr,
                                           uint32_t b_addr) {
  WgmmaFence();
  // Each k32 step is 32 bytes further along the swizzled rows: 2 in the descriptor's address
  // field, which cannot carry out of it.
  const uint32_t lo_a = SmemDescLo(a_addr), lo_b = SmemDescLo(b_addr);
  // NOTE: the first step only writes `part`, so no earlier value of it is live across the
  // loops; with a read-modify-write first step ptxas sees partials flow around the loop and
  // serializes the wgmmas (C7517/C7518).
  if constexpr (kBlockN == 192) {
    WgmmaM64N192K32First(part, SmemDesc(lo_a), SmemDesc(lo_b));
  } else if constexpr (kBlockN == 128) {
    WgmmaM64N128K32First(part, SmemDesc(lo_a), SmemDesc(lo_b));
  } else if constexpr (kBlockN == 64) {
    WgmmaM64N64K32First(part, SmemDesc(lo_a), SmemDesc(lo_b));
  } else {
    WgmmaM64N32K32First(part, SmemDesc(lo_a), SmemDesc(lo_b));
  }
#pragma unroll
  for (int k = 1; k < kBlockK / 32; ++k) {
    if constexpr (kBlockN == 192) {
      WgmmaM64N192K32(part, SmemDesc(lo_a + 2 * k), SmemDesc(lo_b + 2 * k), true);
    } else if constexpr (kBlockN == 128) {
      WgmmaM64N128K32(part, SmemDesc(lo_a + 2 * k), SmemDesc(lo_b + 2 * k), true);
    } else if constexpr (kBlockN == 64) {
      WgmmaM64N64K32(part, SmemDesc(lo_a + 2 * k), SmemDesc(lo_b + 2 * k), true);
    } else {
      WgmmaM64N32K32(part, SmemDesc(lo_a + 2 * k), SmemDesc(lo_b + 2 * k), true);
    }
  }
  WgmmaCommit();
}

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_WGMMA_CUH_
