// wgmma wrappers for the FP8 GEMM (sm_90a), one function per N (the operand lists are long, so
// they were written out by a small generator). Each issues one asynchronous warpgroup MMA.
#ifndef KERNELD_KERNELS_CUDA_GEMM_WGMMA_OPS_CUH_
#define KERNELD_KERNELS_CUDA_GEMM_WGMMA_OPS_CUH_

#include <cstdint>

namespace kd {
namespace cuda_gemm {

// D (64 x 64, f32, 32 registers per thread) (+)= A (64 x 32, e4m3, smem) * B (64 x 32, e4m3,
// smem), both K-major. `accumulate` false overwrites D.
__device__ __forceinline__ void WgmmaM64N64K32(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                              bool accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3\n"
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "},\n"
      " %32, %33, p, 1, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),
        "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
        "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
        "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
}

// D (64 x 32, f32, 16 registers per thread) (+)= A (64 x 32, e4m3, smem) * B (32 x 32, e4m3,
// smem), both K-major. `accumulate` false overwrites D.
__device__ __forceinline__ void WgmmaM64N32K32(float (&d)[16], uint64_t desc_a, uint64_t desc_b,
                                              bool accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3\n"
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "},\n"
      " %16, %17, p, 1, 1;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),
        "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
        "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
}

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_WGMMA_OPS_CUH_
