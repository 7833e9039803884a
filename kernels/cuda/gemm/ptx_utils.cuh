// Small PTX helpers of the FP8 GEMM (sm_90a): shared-memory addresses and loads, warp-uniform
// values, one-lane election, and fences that pin values in registers.
#ifndef KERNELD_KERNELS_CUDA_GEMM_PTX_UTILS_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_PTX_UTILS_CUH_

#include <cstdint>

namespace kd {
namespace cuda_gemm {

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ float LoadSharedF32(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr));
  return v;
}

__device__ __forceinline__ float2 LoadSharedF32x2(uint32_t addr) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(addr));
  return v;
}

// The value of lane 0 of the warp. The consumer's control flow depends only on such values, so
// that ptxas sees it as warp-uniform: wgmmas in flight across a branch it takes for divergent are
// serialized (C7518).
__device__ __forceinline__ int Uniform(int v) { return __shfl_sync(0xffffffffu, v, 0); }

// True in one lane of the (converged) warp: `elect.sync`, which needs no lane index. With the lane
// index, a consumer short of registers (the 192-row tile's, 152) re-reads SR_TID.X for it in every
// K block, on the chain from the wgmma wait to the next issue.
__device__ __forceinline__ bool ElectOne() {
  uint32_t elected;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "elect.sync _|p, 0xffffffff;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(elected));
  return elected != 0;
}

// Keeps the compiler from moving reads of an accumulator register across a wgmma wait.
__device__ __forceinline__ void FenceOperand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// `v`, as a value the compiler cannot see through: it keeps it in a register rather than
// recomputing it. The consumer loops' per-thread addresses derive from threadIdx.x; under register
// pressure ptxas re-reads SR_TID.X (S2R) and redoes the arithmetic in every K block, on the chain
// from the wgmma wait to the next issue (at 8192^3 that S2R's consumer held 6.7% of the PC
// samples).
__device__ __forceinline__ uint32_t Opaque(uint32_t v) {
  asm volatile("" : "+r"(v));
  return v;
}

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_PTX_UTILS_CUH_
