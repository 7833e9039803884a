// Byte-matrix transpose for the NN (dgrad) GEMM on sm_90a: FP8 wgmma reads only operands that are
// contiguous along the reduction, so NN's W (R,N), N-major, is copied to Wᵀ (N,R) first, with its
// 128x128 scale grid transposed alongside. Portable (kernels/gpu, both builds); the NVIDIA GEMM
// (kernels/cuda/gemm/gemm_fp8.cc) calls it.
#ifndef KERNELD_KERNELS_GPU_TRANSPOSE_FP8_H_
#define KERNELD_KERNELS_GPU_TRANSPOSE_FP8_H_

#include <cstdint>

#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {

struct TransposeFp8Params {
  // Source (rows, cols) of 1-byte elements, row i at src + i * src_stride. rows must be a
  // multiple of 128; src and src_stride multiples of 16 bytes; cols any value >= 1.
  const uint8_t* src = nullptr;
  int64_t src_stride = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  // Destination (cols, rows), contiguous (row stride `rows` bytes), 16-byte aligned; must not
  // overlap src.
  uint8_t* dst = nullptr;
  // Optional (both or neither): the 128x128 block scales of src, (rows/128, ceil(cols/128)) with
  // row stride src_scales_stride floats, written to dst_scales as (ceil(cols/128), rows/128)
  // contiguous.
  const float* src_scales = nullptr;
  int64_t src_scales_stride = 0;
  float* dst_scales = nullptr;
};

// Enqueues the transpose on `stream`: one CTA per 128x128 tile, 16-byte coalesced loads and
// stores through a swizzled shared-memory tile. Bytes are copied exactly (no FP8 decoding).
// Returns cudaErrorInvalidValue for params that break the rules above (nothing is enqueued),
// else the launch error.
cudaError_t LaunchTransposeFp8(const TransposeFp8Params& params, cudaStream_t stream);

}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_TRANSPOSE_FP8_H_
