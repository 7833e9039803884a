// The ring of shared-memory stages between the producer and the consumers: a stage's "full"
// barrier completes when its loads have landed, its "empty" barrier when every consumer warp (of
// every CTA of the cluster, which all write into it) has released it.
#ifndef KERNELD_KERNELS_CUDA_GEMM_PIPELINE_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_PIPELINE_CUH_

#include <cstdint>

#include "kernels/cuda/gemm/ptx_barrier.cuh"
#include "kernels/cuda/gemm/ptx_utils.cuh"

namespace kd {
namespace cuda_gemm {

// Arrivals on a full barrier: the TMA thread's expect_tx arrive, plus, when the scales are
// copied with cp.async, one per lane of producer warps 1..3.
constexpr int kFullArrivals = 1 + 3 * 32;
constexpr int kFullArrivalsTma = 1;

// The next stage of the ring and, on wrapping, the barrier phase to wait for.
template <int kStages>
__device__ __forceinline__ void Advance(int& stage, uint32_t& phase) {
  if (++stage == kStages) {
    stage = 0;
    phase ^= 1;
  }
}

// Frees the stage of `empty_bar` for the producer(s) once this warp is done with it (its wgmmas
// completed and its lanes read the scales): one arrival per consumer warp, in every CTA of the
// cluster.
template <int kCluster>
__device__ __forceinline__ void ReleaseStage(uint32_t empty_bar, uint32_t rank) {
  __syncwarp();
  if (ElectOne()) {
    BarrierArrive(empty_bar);
    if constexpr (kCluster > 1) {
      // Both CTAs' producers write this stage (their B halves): free it in each.
#pragma unroll
      for (int c = 1; c < kCluster; ++c) BarrierArriveCluster(empty_bar, (rank + c) % kCluster);
    }
  }
}

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_PIPELINE_CUH_
