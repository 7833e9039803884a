// The one place where NVIDIA and AMD differ for kerneld's portable GPU code: the GPU backend
// (kernels/gpu) and its kernels are written once in CUDA's spelling (cudaStream_t, cudaMalloc,
// __syncthreads); this header includes the vendor's runtime and, on AMD, maps the CUDA names the
// portable code uses to HIP's. Vendor-specific pieces (matrix-core fragments, asynchronous copies,
// hardware FP8 conversion) test KD_GPU_NVIDIA or KD_GPU_AMD next to the code that needs them,
// never by copying a kernel. A name the portable code needs and HIP spells differently is added
// here, not at its use.
//
//   KD_GPU_NVIDIA / KD_GPU_AMD   exactly one is 1 in a GPU translation unit; both are 0 under
//                                KD_GPU_EMULATION, the host emulation the tile GEMM's tests run
//                                the portable kernels under (tests/gpu/tile_gemm), which then
//                                provides the launch coordinates and the barrier. A host-only .cc
//                                of the HIP build is compiled with -D__HIP_PLATFORM_AMD__.
//   KD_GPU_NS                    nv or amd: the inline namespace the backend's code lives in,
//                                so that one binary can link both builds of the same source
//   kWaveSize                    lanes of the hardware's SIMT group: 32 (NVIDIA warp), 64 (AMD
//                                CDNA wavefront; RDNA's wave32 is not a target)
//   kBackendName                 "cuda" or "hip", as messages name the backend
//   kLaneGroup                   32: the lane group the kernels reduce and exchange over. Every
//                                shuffle takes its width (at most kLaneGroup) explicitly, so a
//                                group is half an AMD wavefront and a whole NVIDIA warp, and
//                                `tid % kLaneGroup`, `tid / kLaneGroup` index the same lanes on
//                                both
//   ThreadIdxX() ... GridDimY()  threadIdx.x ... gridDim.y (unsigned, as CUDA's)
//   ThreadIndex(), BlockIndexX(), BlockIndexY()  the same as int (the tile GEMM's spelling)
//   SyncThreads(), SyncThreadsAnd(p), ThreadFenceSystem()
//   ShflXor, ShflUp, Shfl        __shfl_*_sync over all lanes of a kLaneGroup-wide (or narrower)
//                                group; every lane of the group must be active
//   UMulHi, HalfBitsToFloat, FAbs, FMax   math the kernels use
//   KD_LAUNCH_BOUNDS(threads[, min_blocks])  a kernel's largest block and (NVIDIA) the CTAs per
//                                SM its register budget must allow. On AMD only the work-group
//                                size is kept: HIP turns the second value into
//                                amdgpu_waves_per_eu, a register cap sized for NVIDIA's SMs.
//                                Parenthesize an argument that holds a comma.
//
// On AMD every device function here is a clang builtin, so a code object needs none of the ROCm
// device libraries (HIP 5.2's threadIdx, __syncthreads, __syncthreads_and, fabsf and __umulhi call
// into them; Debian's rocm-device-libs 5.2 stops at gfx940 and the gfx942 build links none).
#ifndef KERNELD_KERNELS_GPU_VENDOR_H_
#define KERNELD_KERNELS_GPU_VENDOR_H_

#if defined(KD_GPU_EMULATION)
#define KD_GPU_AMD 0
#define KD_GPU_NVIDIA 0
#define KD_GPU_NS emulation
#elif defined(__HIP_PLATFORM_AMD__) || defined(__HIP__)
#define KD_GPU_AMD 1
#define KD_GPU_NVIDIA 0
#define KD_GPU_NS amd
#else
#define KD_GPU_AMD 0
#define KD_GPU_NVIDIA 1
#define KD_GPU_NS nv
#endif

#if defined(KD_GPU_EMULATION)
#define __host__
#define __device__
#define __global__
#define __shared__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define KD_LAUNCH_BOUNDS(...)
#elif KD_GPU_AMD
#define KD_LAUNCH_BOUNDS(threads, ...) __attribute__((amdgpu_flat_work_group_size(1, threads)))
#if defined(__HIP__)
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#else
#include <hip/hip_runtime_api.h>
#endif

#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDeviceProp hipDeviceProp_t
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaError_t hipError_t
#define cudaErrorInvalidConfiguration hipErrorInvalidConfiguration
#define cudaErrorInvalidValue hipErrorInvalidValue
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorNotReady hipErrorNotReady
#define cudaEventCreate hipEventCreate
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDefault hipEventDefault
#define cudaEventDestroy hipEventDestroy
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaEventInterprocess hipEventInterprocess
#define cudaEventQuery hipEventQuery
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEvent_t hipEvent_t
#define cudaFree hipFree
#define cudaFreeAsync hipFreeAsync
#define cudaFreeHost hipHostFree
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define cudaFuncAttributes hipFuncAttributes
#define cudaFuncGetAttributes KdHipFuncGetAttributes
#define cudaFuncSetAttribute KdHipFuncSetAttribute
#define cudaGetDevice hipGetDevice
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaGetErrorName hipGetErrorName
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaHostAlloc hipHostMalloc
#define cudaHostAllocMapped hipHostMallocMapped
#define cudaHostAllocPortable hipHostMallocPortable
#define cudaIpcCloseMemHandle hipIpcCloseMemHandle
#define cudaIpcEventHandle_t hipIpcEventHandle_t
#define cudaIpcGetEventHandle hipIpcGetEventHandle
#define cudaIpcGetMemHandle hipIpcGetMemHandle
#define cudaIpcMemHandle_t hipIpcMemHandle_t
#define cudaIpcMemLazyEnablePeerAccess hipIpcMemLazyEnablePeerAccess
#define cudaIpcOpenEventHandle hipIpcOpenEventHandle
#define cudaIpcOpenMemHandle hipIpcOpenMemHandle
#define cudaMalloc hipMalloc
#define cudaMallocAsync hipMallocAsync
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpyDefault hipMemcpyDefault
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemsetAsync hipMemsetAsync
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaSetDevice hipSetDevice
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaStream_t hipStream_t
#define cudaSuccess hipSuccess

// CUDA's runtime takes a kernel by its own type; HIP's by const void*.
template <typename Kernel>
inline hipError_t KdHipFuncSetAttribute(Kernel* kernel, hipFuncAttribute attr, int value) {
  return hipFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}
template <typename Kernel>
inline hipError_t KdHipFuncGetAttributes(hipFuncAttributes* attrs, Kernel* kernel) {
  return hipFuncGetAttributes(attrs, reinterpret_cast<const void*>(kernel));
}
#else
#define KD_LAUNCH_BOUNDS(...) __launch_bounds__(__VA_ARGS__)
#if defined(__CUDACC__)
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#else
#include <cuda_runtime_api.h>
#endif
#endif

#if !defined(KD_GPU_EMULATION)
namespace kd {
namespace gpu {
#if KD_GPU_AMD
inline constexpr int kWaveSize = 64;
inline constexpr const char* kBackendName = "hip";
#else
inline constexpr int kWaveSize = 32;
inline constexpr const char* kBackendName = "cuda";
#endif
inline constexpr int kLaneGroup = 32;
}  // namespace gpu
}  // namespace kd
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
#if defined(__AMDGCN_WAVEFRONT_SIZE)
static_assert(__AMDGCN_WAVEFRONT_SIZE == kWaveSize, "kerneld's AMD targets are wave64 (CDNA)");
#endif
// The HSA dispatch packet (hsa_kernel_dispatch_packet_t) holds the workgroup and grid sizes.
__device__ __forceinline__ unsigned WorkgroupSize(int dim) {
  const auto* packet = (const unsigned short*)__builtin_amdgcn_dispatch_ptr();  // constant space
  return packet[2 + dim];  // workgroup_size_{x,y,z}: 16-bit fields at byte 4
}
__device__ __forceinline__ unsigned GridSize(int dim) {
  const auto* packet = (const unsigned*)__builtin_amdgcn_dispatch_ptr();  // constant space
  return packet[3 + dim];  // grid_size_{x,y,z}: 32-bit fields at byte 12, in work-items
}
__device__ __forceinline__ unsigned ThreadIdxX() { return __builtin_amdgcn_workitem_id_x(); }
__device__ __forceinline__ unsigned ThreadIdxY() { return __builtin_amdgcn_workitem_id_y(); }
__device__ __forceinline__ unsigned BlockIdxX() { return __builtin_amdgcn_workgroup_id_x(); }
__device__ __forceinline__ unsigned BlockIdxY() { return __builtin_amdgcn_workgroup_id_y(); }
__device__ __forceinline__ unsigned BlockDimX() { return WorkgroupSize(0); }
__device__ __forceinline__ unsigned BlockDimY() { return WorkgroupSize(1); }
__device__ __forceinline__ unsigned GridDimX() { return GridSize(0) / WorkgroupSize(0); }
__device__ __forceinline__ unsigned GridDimY() { return GridSize(1) / WorkgroupSize(1); }
__device__ __forceinline__ void SyncThreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
// __syncthreads_and through shared memory: the barriers around the flag keep a fast thread from
// resetting it (next call) before a slow one read it.
__device__ __forceinline__ int SyncThreadsAnd(int predicate) {
  __shared__ int all;
  SyncThreads();
  if (ThreadIdxX() == 0 && ThreadIdxY() == 0) all = 1;
  SyncThreads();
  if (!predicate) all = 0;
  SyncThreads();
  const int result = all;
  SyncThreads();
  return result;
}
__device__ __forceinline__ void ThreadFenceSystem() {
  __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "");
}
__device__ __forceinline__ unsigned UMulHi(unsigned a, unsigned b) {
  return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}
__device__ __forceinline__ float HalfBitsToFloat(unsigned short h) {
  return static_cast<float>(__builtin_bit_cast(_Float16, h));
}
__device__ __forceinline__ float FAbs(float x) { return __builtin_fabsf(x); }
__device__ __forceinline__ float FMax(float a, float b) { return __builtin_fmaxf(a, b); }
template <typename T>
__device__ __forceinline__ T ShflXor(T v, int lane_mask, int width = kLaneGroup) {
  return __shfl_xor(v, lane_mask, width);
}
template <typename T>
__device__ __forceinline__ T ShflUp(T v, unsigned delta, int width = kLaneGroup) {
  return __shfl_up(v, delta, width);
}
template <typename T>
__device__ __forceinline__ T Shfl(T v, int src_lane, int width = kLaneGroup) {
  return __shfl(v, src_lane, width);
}
#else
__device__ __forceinline__ unsigned ThreadIdxX() { return threadIdx.x; }
__device__ __forceinline__ unsigned ThreadIdxY() { return threadIdx.y; }
__device__ __forceinline__ unsigned BlockIdxX() { return blockIdx.x; }
__device__ __forceinline__ unsigned BlockIdxY() { return blockIdx.y; }
__device__ __forceinline__ unsigned BlockDimX() { return blockDim.x; }
__device__ __forceinline__ unsigned BlockDimY() { return blockDim.y; }
__device__ __forceinline__ unsigned GridDimX() { return gridDim.x; }
__device__ __forceinline__ unsigned GridDimY() { return gridDim.y; }
__device__ __forceinline__ void SyncThreads() { __syncthreads(); }
__device__ __forceinline__ int SyncThreadsAnd(int predicate) {
  return __syncthreads_and(predicate);
}
__device__ __forceinline__ void ThreadFenceSystem() { __threadfence_system(); }
__device__ __forceinline__ unsigned UMulHi(unsigned a, unsigned b) { return __umulhi(a, b); }
__device__ __forceinline__ float HalfBitsToFloat(unsigned short h) {
  return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ float FAbs(float x) { return fabsf(x); }
__device__ __forceinline__ float FMax(float a, float b) { return fmaxf(a, b); }
// Every lane of the warp takes part (the kernels never shuffle under divergence).
template <typename T>
__device__ __forceinline__ T ShflXor(T v, int lane_mask, int width = kLaneGroup) {
  return __shfl_xor_sync(0xFFFFFFFFu, v, lane_mask, width);
}
template <typename T>
__device__ __forceinline__ T ShflUp(T v, unsigned delta, int width = kLaneGroup) {
  return __shfl_up_sync(0xFFFFFFFFu, v, delta, width);
}
template <typename T>
__device__ __forceinline__ T Shfl(T v, int src_lane, int width = kLaneGroup) {
  return __shfl_sync(0xFFFFFFFFu, v, src_lane, width);
}
#endif

#if !defined(KD_GPU_EMULATION)
__device__ __forceinline__ int ThreadIndex() { return static_cast<int>(ThreadIdxX()); }
__device__ __forceinline__ int BlockIndexX() { return static_cast<int>(BlockIdxX()); }
__device__ __forceinline__ int BlockIndexY() { return static_cast<int>(BlockIdxY()); }
#endif

}  // namespace gpu
}  // namespace kd
#endif

#endif  // KERNELD_KERNELS_GPU_VENDOR_H_
