// mbarrier, named-barrier and cluster wrappers of the FP8 GEMM (sm_90a). Every wait spins inside
// one asm block and every conditional issue is predicated, not branched: ptxas serializes wgmmas
// in flight across a branch it cannot prove warp-uniform (C7518).
#ifndef KERNELD_KERNELS_CUDA_GEMM_PTX_BARRIER_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_PTX_BARRIER_CUH_

#include <cstdint>

#include "kernels/cuda/gemm/ptx_utils.cuh"

namespace kd {
namespace cuda_gemm {

// An mbarrier in shared memory that completes a phase after `count` arrivals.
__device__ __forceinline__ void BarrierInit(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SmemAddr(bar)), "r"(count));
}

// Spins until the barrier's phase with this parity has completed. The loop stays inside one
// asm block: as a C++ loop on a per-thread flag, ptxas takes the wait for a divergent path and
// serializes wgmmas still in flight across it (C7518).
__device__ __forceinline__ void BarrierWait(uint32_t addr, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(addr),
      "r"(parity)
      : "memory");
}

__device__ __forceinline__ void BarrierWait(uint64_t* bar, uint32_t parity) {
  BarrierWait(SmemAddr(bar), parity);
}

__device__ __forceinline__ void BarrierArrive(uint32_t addr) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(addr) : "memory");
}

__device__ __forceinline__ void BarrierArriveExpectTx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SmemAddr(bar)),
               "r"(bytes)
               : "memory");
}

// Arrives on the barrier at shared address `addr`'s offset in CTA `cta` of this cluster.
__device__ __forceinline__ void BarrierArriveCluster(uint32_t addr, uint32_t cta) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(addr),
      "r"(cta)
      : "memory");
}

__device__ __forceinline__ uint32_t ClusterRank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}

__device__ __forceinline__ void ClusterSync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
}

__device__ __forceinline__ void NamedBarrierSync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_PTX_BARRIER_CUH_
