// The GEMM kernel's clock marks (Tracer). Only a measuring build (CMake option KD_GEMM_TRACE)
// records them, with trace_clock.cuh; in every other build a Tracer is empty and its marks
// compile to nothing.
#ifndef KERNELD_KERNELS_CUDA_GEMM_TRACE_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_TRACE_CUH_

#ifdef KD_GEMM_TRACE
#include "kernels/cuda/gemm/trace_clock.cuh"
#else
#include "kernels/cuda/gemm/gemm_fp8_kernel.h"

namespace kd {
namespace cuda_gemm {

struct Tracer {
  __device__ __forceinline__ Tracer(const KernelParams&, int, bool) {}
  __device__ __forceinline__ void Mark(int) {}
  __device__ __forceinline__ void Next() {}
};

}  // namespace cuda_gemm
}  // namespace kd
#endif

#endif  // KERNELD_KERNELS_CUDA_GEMM_TRACE_CUH_
