// 4-byte cp.async copies that complete on an mbarrier (sm_90a).
#ifndef KERNELD_KERNELS_CUDA_GEMM_PTX_CP_ASYNC_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_PTX_CP_ASYNC_CUH_

#include <cstdint>

#include "kernels/cuda/gemm/ptx_utils.cuh"

namespace kd {
namespace cuda_gemm {

// 4-byte asynchronous copy; `valid` false writes zero without reading `src`.
__device__ __forceinline__ void CpAsync4(float* dst, const float* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(SmemAddr(dst)), "l"(src),
               "r"(valid ? 4 : 0)
               : "memory");
}

// The barrier counts one arrival once this thread's earlier cp.async copies have landed.
__device__ __forceinline__ void CpAsyncArrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(SmemAddr(bar))
               : "memory");
}

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_PTX_CP_ASYNC_CUH_
