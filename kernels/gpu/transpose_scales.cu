// 32x32 tiles through shared memory: a CTA reads 32 K blocks' runs of 32 consecutive rows (128
// contiguous bytes each) and writes 32 rows' runs of 32 consecutive blocks; the tile's padded
// row keeps both phases free of bank conflicts.
#include "kernels/gpu/transpose_scales.h"
#include "kernels/gpu/vendor.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace cuda {
namespace {

constexpr int kTile = 32;        // rows and blocks per CTA
constexpr int kRowsPerPass = 8;  // tile rows a pass of the CTA's threads covers

__global__ void KD_LAUNCH_BOUNDS(kTile* kRowsPerPass)
    TransposeScalesKernel(const float* src, int64_t ld, int64_t rows, int64_t blocks, float* dst) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t r0 = static_cast<int64_t>(gpu::BlockIdxX()) * kTile;
  const int64_t b0 = static_cast<int64_t>(gpu::BlockIdxY()) * kTile;
  for (int i = gpu::ThreadIdxY(); i < kTile; i += kRowsPerPass) {
    const int64_t b = b0 + i, r = r0 + gpu::ThreadIdxX();
    if (b < blocks && r < rows) tile[i][gpu::ThreadIdxX()] = src[b * ld + r];
  }
  gpu::SyncThreads();
  for (int i = gpu::ThreadIdxY(); i < kTile; i += kRowsPerPass) {
    const int64_t r = r0 + i, b = b0 + gpu::ThreadIdxX();
    if (r < rows && b < blocks) dst[r * blocks + b] = tile[gpu::ThreadIdxX()][i];
  }
}

}  // namespace

cudaError_t LaunchTransposeScales(const float* src, int64_t ld, int64_t rows, int64_t blocks,
                                  float* dst, cudaStream_t stream) {
  if (src == nullptr || dst == nullptr || rows <= 0 || blocks <= 0 || ld < rows) {
    return cudaErrorInvalidValue;
  }
  const int64_t grid_x = (rows + kTile - 1) / kTile, grid_y = (blocks + kTile - 1) / kTile;
  if (grid_x > INT32_MAX || grid_y > 65535) return cudaErrorInvalidValue;
  TransposeScalesKernel<<<dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y)),
                          dim3(kTile, kRowsPerPass), 0, stream>>>(src, ld, rows, blocks, dst);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace KD_GPU_NS
}  // namespace kd
