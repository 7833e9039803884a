// The portable tile GEMM's raw launcher: which tile shapes this build instantiated and how to
// enqueue one. No validation here (tile_gemm.h validates and returns a Status); errors are the
// runtime's. Compiled by nvcc for NVIDIA and by hipcc / clang for AMD.
#ifndef KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_LAUNCH_H_
#define KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_LAUNCH_H_

#include "kernels/gpu/tile_gemm/tile_gemm_params.h"
#include "kernels/gpu/tile_gemm/vendor_namespace.h"
#include "kernels/gpu/vendor.h"

namespace kd {
namespace tile_gemm {
KD_TILE_GEMM_VENDOR_NS_BEGIN

// Whether this build has kernels for `shape`, and their shared-memory bytes and threads.
bool TileShapeBuilt(const TileShape& shape);
int TileShapeSmemBytes(const TileShape& shape);
int TileShapeThreads(const TileShape& shape);

// Enqueues the GEMM of `p` (checked by the caller: tile_gemm_args.h) on `stream`.
// cudaErrorInvalidValue for a shape this build does not have; otherwise the runtime's launch
// error.
cudaError_t LaunchTileGemmKernel(const Params& p, const TileShape& shape, cudaStream_t stream);

// The PTX and binary architecture versions (e.g. 89 and 90: compute_89 PTX compiled for the
// device at load time) of the kernel LaunchTileGemmKernel runs for `shape` with e4m3 operands and
// a reduction-contiguous B. NVIDIA only; cudaErrorInvalidValue elsewhere or for an unbuilt shape.
cudaError_t TileGemmKernelVersions(const TileShape& shape, int* ptx_version, int* binary_version);

KD_TILE_GEMM_VENDOR_NS_END
}  // namespace tile_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_LAUNCH_H_
