// Copies a K-block-major 1x128 scale tensor into the row-major layout the GEMM's cp.async scale
// copies read. Internal to kernels/cuda/gemm (gemm_fp8.cc calls it for the launches that do not
// load K-block-major scales natively).
#ifndef KERNELD_KERNELS_GPU_TRANSPOSE_SCALES_H_
#define KERNELD_KERNELS_GPU_TRANSPOSE_SCALES_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace kd {
namespace cuda_gemm {

// dst[r * blocks + kb] = src[kb * ld + r] for r < rows, kb < blocks: src holds `blocks` rows of
// `rows` f32 scales each, `ld` floats apart (ld >= rows); dst is (rows, blocks) contiguous and
// must not overlap src. Enqueued on `stream`; returns cudaErrorInvalidValue for arguments that
// break these rules (nothing is enqueued), else the launch error.
cudaError_t LaunchTransposeScales(const float* src, int64_t ld, int64_t rows, int64_t blocks,
                                  float* dst, cudaStream_t stream);

}  // namespace cuda_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_TRANSPOSE_SCALES_H_
