// The row_amax kernel: one CTA per row (grid-striding over rows), each thread taking every
// kThreads-th element, the magnitudes compared as IEEE bit patterns (exact, order-free, a NaN
// above every number) and reduced over the 32-lane groups, then across them in shared memory.
#include <cstdint>

#include "kerneld/kernels/fp8.h"
#include "kernels/gpu/device_attributes.h"
#include "kernels/gpu/gpu_kernels.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint32_t MagnitudeBits(const RowAmaxParams& p, int64_t i) {
  float v;
  if (p.input_dtype == 0) {
    v = static_cast<const float*>(p.input)[i];
  } else if (p.input_dtype == 1) {
    v = fp8::BF16ToFloat(static_cast<const uint16_t*>(p.input)[i]);
  } else {
    v = gpu::HalfBitsToFloat(static_cast<const uint16_t*>(p.input)[i]);
  }
  return fp8::FloatBits(v) & 0x7fffffffu;
}

__global__ void KD_LAUNCH_BOUNDS(kThreads) RowAmaxKernel(RowAmaxParams p) {
  __shared__ uint32_t group_max[kThreads / gpu::kLaneGroup];
  const int tid = gpu::ThreadIdxX();
  for (int64_t r = gpu::BlockIdxX(); r < p.rows; r += gpu::GridDimX()) {
    uint32_t best = 0;
    for (int64_t c = tid; c < p.cols; c += kThreads) {
      const uint32_t bits = MagnitudeBits(p, r * p.input_row_stride + c);
      best = bits > best ? bits : best;
    }
#pragma unroll
    for (int offset = gpu::kLaneGroup / 2; offset > 0; offset /= 2) {
      const uint32_t other = gpu::ShflXor(best, offset);
      best = other > best ? other : best;
    }
    if (tid % gpu::kLaneGroup == 0) group_max[tid / gpu::kLaneGroup] = best;
    gpu::SyncThreads();
    if (tid == 0) {
      for (int g = 1; g < kThreads / gpu::kLaneGroup; ++g) {
        best = group_max[g] > best ? group_max[g] : best;
      }
      p.output[r * p.output_stride] = fp8::BitsToFloat(best);
    }
    gpu::SyncThreads();
  }
}

}  // namespace

cudaError_t LaunchRowAmax(const RowAmaxParams& p, cudaStream_t stream) {
  if (p.rows < 1) return cudaSuccess;
  int sms = 0;
  const cudaError_t err = CurrentSmCount(&sms);
  if (err != cudaSuccess) return err;
  const int64_t blocks = p.rows < static_cast<int64_t>(sms) * 16 ? p.rows : sms * 16;
  RowAmaxKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd
