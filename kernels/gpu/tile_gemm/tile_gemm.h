// The portable blockwise-scaled FP8 tile GEMM: the GEMM for GPUs without wgmma (NVIDIA sm_89 and
// later through mma.sync; AMD gfx94x and gfx950 through MFMA), every variant of GemmOp with the
// CPU backend's contract (proto/kerneld/v1/kerneld.proto): per-128-block scales applied to fp32
// partial sums outside the matrix cores, bf16 or f32 output, accumulate, M and N of any size,
// group ends read and clamped on the device as the CUDA backend documents. One tile loop
// (tile_gemm_kernel.cuh) over a matrix-core fragment with one implementation per vendor
// (mma_fragment.cuh). Formats, devices and layout rules: tile_gemm_args.h; configs and the
// heuristic: tile_gemm_config.h.
#ifndef KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_H_
#define KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kerneld/kernels/gemm_config.h"
#include "kerneld/kernels/ops.h"
#include "kernels/gpu/tile_gemm/tile_gemm_params.h"
#include "kernels/gpu/tile_gemm/vendor_namespace.h"
#include "kernels/gpu/vendor.h"

namespace kd {
namespace tile_gemm {
KD_TILE_GEMM_VENDOR_NS_BEGIN

// The current device as the tile GEMM sees it: its architecture name ("sm_90", "gfx942"; see
// tile_gemm_config.h) and its SM (CU) count. INTERNAL for a runtime error.
struct TileDevice {
  std::string arch;
  int units = 0;
};
absl::StatusOr<TileDevice> CurrentTileDevice();

// Enqueues the GEMM `p` describes on `stream` with tile `shape`, on the current device. No host
// synchronisation; the kernel's own faults surface at the stream's next synchronisation.
// UNIMPLEMENTED when this build has no kernel for `shape` or the device has no FP8 matrix
// instructions, INVALID_ARGUMENT for a reduction that is not a multiple of 128, INTERNAL for a
// launch error.
absl::Status LaunchTileGemm(const Params& p, const TileShape& shape, cudaStream_t stream);

// `args` (validated; device pointers of the current device) through TileGemmSupports and
// TileGemmParams (tile_gemm_args.h), then LaunchTileGemm with `shape`, or with the heuristic's
// shape when `shape` is {0, 0, 0}.
absl::Status LaunchTileGemm(const GemmArgs& args, const TileShape& shape, cudaStream_t stream);

// A backend's launch of `args` (validated; device pointers of the current device) with the config
// it carries: a TileGemmConfig the device runs (TileGemmRuns) runs as given; std::monostate or
// another kernel's config runs the heuristic's shape; so does a tile the device does not run (a
// pin made for another architecture), counted and logged to stderr the first time and then at
// every power of two. Statuses as LaunchTileGemm's.
absl::Status LaunchTileGemmConfig(const GemmArgs& args, const GemmKernelConfig& config,
                                  cudaStream_t stream);
// How many launches LaunchTileGemmConfig ran the heuristic's shape instead of a tile it was given,
// since the process started.
uint64_t TileGemmConfigFallbacks();

KD_TILE_GEMM_VENDOR_NS_END
}  // namespace tile_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_H_
