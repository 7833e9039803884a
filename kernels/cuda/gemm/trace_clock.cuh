// The clock trace of a measuring build (KD_GEMM_TRACE only; trace.cuh includes it then).
#ifndef KERNELD_KERNELS_CUDA_GEMM_TRACE_CLOCK_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_TRACE_CLOCK_CUH_

#include <cstdint>

#include "kernels/cuda/gemm/gemm_fp8_kernel.h"

namespace kd {
namespace cuda_gemm {

__device__ __forceinline__ uint32_t ClockNow() {
  uint32_t c;
  asm volatile("mov.u32 %0, %%clock;" : "=r"(c)::"memory");
  return c;
}

// One thread's marks: predicated stores (no branch, so no divergent path across wgmmas).
struct Tracer {
  uint32_t* base;
  int on;
  int i = 0;
  __device__ Tracer(const KernelParams& p, int slot, bool thread_ok) {
    on = p.trace != nullptr && thread_ok && blockIdx.x < 2;
    base = p.trace + (on ? (blockIdx.x * 4 + slot) * kTraceIters * kTraceMarks : 0);
  }
  __device__ __forceinline__ void Mark(int j) {
    const uint32_t v = ClockNow();
    const int ok = on && i < kTraceIters;
    uint32_t* ptr = base + (ok ? i * kTraceMarks + j : 0);
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.s32 p, %2, 0;\n"
        "@p st.global.u32 [%0], %1;\n"
        "}\n" ::"l"(ptr),
        "r"(v), "r"(ok)
        : "memory");
  }
  __device__ __forceinline__ void Next() { ++i; }
};

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_TRACE_CLOCK_CUH_
