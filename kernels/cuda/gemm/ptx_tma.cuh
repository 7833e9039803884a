// TMA (bulk-tensor) loads and stores of the FP8 GEMM (sm_90a).
#ifndef KERNELD_KERNELS_CUDA_GEMM_PTX_TMA_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_PTX_TMA_CUH_

#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/gemm/ptx_utils.cuh"

namespace kd {
namespace cuda_gemm {

__device__ __forceinline__ void TmaLoad2d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0,
                                          int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(SmemAddr(bar))
      : "memory");
}

__device__ __forceinline__ void TmaLoad3d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0,
                                          int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(SmemAddr(bar))
      : "memory");
}

// The B half this CTA loads lands in every CTA of the cluster (`mask`), completing on the
// barrier at the same shared-memory offset in each.
__device__ __forceinline__ void TmaLoad2dMulticast(void* dst, const CUtensorMap* map, uint64_t* bar,
                                                   int c0, int c1, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(SmemAddr(bar)), "h"(mask)
      : "memory");
}

__device__ __forceinline__ void TmaLoad3dMulticast(void* dst, const CUtensorMap* map, uint64_t* bar,
                                                   int c0, int c1, int c2, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(SmemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(SmemAddr(bar)), "h"(mask)
      : "memory");
}

// Bulk-tensor store of one box of `map` from shared address `src` to global coordinates (c0,
// c1), as its own bulk group, issued by the threads where `pred` holds. Predicated, not
// branched: the epilogue runs with the next block's wgmmas in flight, and ptxas serializes
// wgmmas across a branch it cannot prove warp-uniform (C7518). Out-of-bounds cells are not
// written.
__device__ __forceinline__ void TmaStore2d(const CUtensorMap* map, uint32_t src, int c0, int c1,
                                           bool pred) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.u32 p, %4, 0;\n"
      "@p cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
      "@p cp.async.bulk.commit_group;\n"
      "}\n" ::"l"(reinterpret_cast<uint64_t>(map)),
      "r"(c0), "r"(c1), "r"(src), "r"(static_cast<uint32_t>(pred))
      : "memory");
}

// Waits (where `pred` holds) until at most kPending of this thread's bulk groups are still
// reading their shared-memory source.
template <int kPending>
__device__ __forceinline__ void BulkWaitRead(bool pred) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.u32 p, %1, 0;\n"
      "@p cp.async.bulk.wait_group.read %0;\n"
      "}\n" ::"n"(kPending),
      "r"(static_cast<uint32_t>(pred))
      : "memory");
}

// Waits (where `pred` holds) until every bulk group of this thread has completed.
__device__ __forceinline__ void BulkWaitAll(bool pred) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.u32 p, %0, 0;\n"
      "@p cp.async.bulk.wait_group 0;\n"
      "}\n" ::"r"(static_cast<uint32_t>(pred))
      : "memory");
}

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_PTX_TMA_CUH_
