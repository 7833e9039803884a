#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/gemm_harness_kernels.h"

namespace kd {
namespace cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void FillRandomE4M3Kernel(uint8_t* p, size_t n, uint64_t seed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    uint8_t b = static_cast<uint8_t>(Mix(seed ^ (i * 0x2545f4914f6cdd1dull)) >> 17);
    if ((b & 0x7f) == 0x7f) b ^= 1;  // 0x7f/0xff are NaN in e4m3fn
    p[i] = b;
  }
}

__global__ void FillRandomScalesKernel(float* p, size_t n, uint64_t seed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint32_t r = static_cast<uint32_t>(Mix(seed ^ (i * 0x9e3779b97f4a7c15ull)) >> 40);
    p[i] = 0.25f + 1.75f * (static_cast<float>(r) * (1.0f / 16777216.0f));
  }
}

__device__ __forceinline__ float Load(const void* p, bool f32, size_t i) {
  return f32 ? static_cast<const float*>(p)[i]
             : __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

__global__ void RefStatsKernel(const void* ref, bool f32, size_t n, CompareRecord* record) {
  float local_max = 0.0f;
  unsigned long long nonfinite = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = Load(ref, f32, i);
    if (!isfinite(v))
      ++nonfinite;
    else
      local_max = fmaxf(local_max, fabsf(v));
  }
  if (nonfinite != 0) atomicAdd(&record->nonfinite_ref, nonfinite);
  // Non-negative floats order as their bit patterns.
  atomicMax(&record->ref_absmax_bits, __float_as_uint(local_max));
}

__global__ void CompareOutputsKernel(const void* d, const void* ref, bool f32, size_t n, float rel,
                                     float abs_tol, CompareRecord* record) {
  unsigned long long bad = 0, first = ~0ull;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float x = Load(d, f32, i), r = Load(ref, f32, i);
    if (!isfinite(x) || !(fabsf(x - r) <= rel * fabsf(r) + abs_tol)) {
      ++bad;
      if (i < first) first = i;
    }
  }
  if (bad != 0) {
    atomicAdd(&record->mismatches, bad);
    atomicMin(&record->first_mismatch, first);
  }
}

int Blocks(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 4096 ? (b == 0 ? 1 : b) : 4096);
}

}  // namespace

cudaError_t LaunchFillRandomE4M3(uint8_t* p, size_t n, uint64_t seed, cudaStream_t stream) {
  FillRandomE4M3Kernel<<<Blocks(n), kThreads, 0, stream>>>(p, n, seed);
  return cudaGetLastError();
}

cudaError_t LaunchFillRandomScales(float* p, size_t n, uint64_t seed, cudaStream_t stream) {
  FillRandomScalesKernel<<<Blocks(n), kThreads, 0, stream>>>(p, n, seed);
  return cudaGetLastError();
}

cudaError_t LaunchRefStats(const void* ref, bool f32, size_t n, CompareRecord* record,
                           cudaStream_t stream) {
  RefStatsKernel<<<Blocks(n), kThreads, 0, stream>>>(ref, f32, n, record);
  return cudaGetLastError();
}

cudaError_t LaunchCompareOutputs(const void* d, const void* ref, bool f32, size_t n, float rel,
                                 float abs_tol, CompareRecord* record, cudaStream_t stream) {
  CompareOutputsKernel<<<Blocks(n), kThreads, 0, stream>>>(d, ref, f32, n, rel, abs_tol, record);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace kd
