// Copies a K-block-major 1x128 scale tensor into the row-major layout the GEMM's cp.async scale
// copies read. Portable (kernels/gpu, both builds); the NVIDIA GEMM (kernels/cuda/gemm) calls it
// for the launches that do not load K-block-major scales natively.
#ifndef KERNELD_KERNELS_GPU_TRANSPOSE_SCALES_H_
#define KERNELD_KERNELS_GPU_TRANSPOSE_SCALES_H_

#include <cstdint>

#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {

// dst[r * blocks + kb] = src[kb * ld + r] for r < rows, kb < blocks: src holds `blocks` rows of
// `rows` f32 scales each, `ld` floats apart (ld >= rows); dst is (rows, blocks) contiguous and
// must not overlap src. Enqueued on `stream`; returns cudaErrorInvalidValue for arguments that
// break these rules (nothing is enqueued), else the launch error.
cudaError_t LaunchTransposeScales(const float* src, int64_t ld, int64_t rows, int64_t blocks,
                                  float* dst, cudaStream_t stream);

}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_TRANSPOSE_SCALES_H_
