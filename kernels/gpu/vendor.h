// The one place where NVIDIA and AMD differ for kerneld's portable GPU code. Sources are written
// once in CUDA's spelling (cudaStream_t, cudaGetLastError, __syncthreads); this header includes
// the vendor's runtime and, on AMD, maps the CUDA names used by the portable code to HIP's.
// Vendor-specific pieces (matrix-core fragments, asynchronous copies) test KD_GPU_NVIDIA or
// KD_GPU_AMD next to the code that needs them, never by copying a kernel.
//
//   KD_GPU_NVIDIA / KD_GPU_AMD   exactly one is 1 in a GPU translation unit; both are 0 under
//                                KD_GPU_EMULATION, the host emulation the tile GEMM's tests run
//                                the portable kernels under (tests/gpu/tile_gemm), which then
//                                provides the launch coordinates and the barrier
//   ThreadIndex(), BlockIndexX(), BlockIndexY()  the launch coordinates (1-D blocks)
//   SyncThreads()                the CTA barrier with shared-memory ordering (__syncthreads)
//
// The coordinates and the barrier are functions: on AMD they are clang builtins, so a code
// object needs none of the ROCm device libraries (HIP 5.2's threadIdx and __syncthreads call
// into them; Debian's rocm-device-libs 5.2 stops at gfx940 and the gfx942 build links none).
#ifndef KERNELD_KERNELS_GPU_VENDOR_H_
#define KERNELD_KERNELS_GPU_VENDOR_H_

#if defined(KD_GPU_EMULATION)
#define KD_GPU_AMD 0
#define KD_GPU_NVIDIA 0
#elif defined(__HIP_PLATFORM_AMD__) || defined(__HIP__)
#define KD_GPU_AMD 1
#define KD_GPU_NVIDIA 0
#else
#define KD_GPU_AMD 0
#define KD_GPU_NVIDIA 1
#endif

#if defined(KD_GPU_EMULATION)
#define __host__
#define __device__
#define __global__
#define __shared__
#define __forceinline__ inline
#define __launch_bounds__(...)
#elif KD_GPU_AMD
#include <hip/hip_runtime.h>

#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorInvalidValue hipErrorInvalidValue
#define cudaStream_t hipStream_t
#define cudaGetLastError hipGetLastError
#define cudaGetErrorString hipGetErrorString
#define cudaFuncSetAttribute hipFuncSetAttribute
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define cudaFuncAttributes hipFuncAttributes
#define cudaFuncGetAttributes hipFuncGetAttributes
#else
#include <cuda_runtime.h>
#endif

// Device functions, for translation units a GPU compiler compiles (a host-only .cc sees the runtime
// API alone).
#if defined(__CUDACC__) || defined(__HIP__) || defined(KD_GPU_EMULATION)
namespace kd {
namespace gpu {

#if defined(KD_GPU_EMULATION)
int ThreadIndex();
int BlockIndexX();
int BlockIndexY();
void SyncThreads();
#elif KD_GPU_AMD
__device__ __forceinline__ int ThreadIndex() {
  return static_cast<int>(__builtin_amdgcn_workitem_id_x());
}
__device__ __forceinline__ int BlockIndexX() {
  return static_cast<int>(__builtin_amdgcn_workgroup_id_x());
}
__device__ __forceinline__ int BlockIndexY() {
  return static_cast<int>(__builtin_amdgcn_workgroup_id_y());
}
__device__ __forceinline__ void SyncThreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
#else
__device__ __forceinline__ int ThreadIndex() { return static_cast<int>(threadIdx.x); }
__device__ __forceinline__ int BlockIndexX() { return static_cast<int>(blockIdx.x); }
__device__ __forceinline__ int BlockIndexY() { return static_cast<int>(blockIdx.y); }
__device__ __forceinline__ void SyncThreads() { __syncthreads(); }
#endif

}  // namespace gpu
}  // namespace kd
#endif

#endif  // KERNELD_KERNELS_GPU_VENDOR_H_
