// From a validated GemmArgs to the tile GEMM's kernel Params, and the rules a device and the
// kernel add to kd::Validate's. Host-only, no vendor runtime.
//
// What each architecture feeds to its FP8 matrix instructions (ArchFamily, tile_gemm_config.h):
//   NVIDIA sm_89+   e4m3fn and e5m2, in any mix
//   gfx940-gfx942   e4m3fnuz (kerneld has no e5m2fnuz)
//   gfx950          e4m3fn and e5m2, in any mix
// Another operand format is FAILED_PRECONDITION naming the format and the device; an
// architecture without FP8 matrix instructions (sm_80, gfx90a) is UNIMPLEMENTED.
//
// Layout rules of the kernel, beyond Validate's: a reduction-contiguous operand (a always; b in
// NT, TN and the grouped variants) needs a base address and row stride that are multiples of 16
// bytes (16-byte loads); NN's b, read 4 columns at a time, multiples of 4 bytes. d, the scales
// and the group ends may have any layout Validate accepts. At most kMaxGroups groups.
#ifndef KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_ARGS_H_
#define KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_ARGS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/ops.h"
#include "kernels/gpu/tile_gemm/tile_gemm_params.h"

namespace kd {
namespace tile_gemm {

// OK when a device of `arch` runs `args` (validated) with the tile GEMM: its operand formats
// (FAILED_PRECONDITION otherwise) and FP8 matrix instructions (UNIMPLEMENTED otherwise).
absl::Status TileGemmSupports(const GemmArgs& args, absl::string_view arch);

// The kernel arguments of `args` (validated; its tensors are device pointers). INVALID_ARGUMENT
// naming the field for a layout rule above; the group count over kMaxGroups is UNIMPLEMENTED.
absl::StatusOr<Params> TileGemmParams(const GemmArgs& args);

}  // namespace tile_gemm
}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_TILE_GEMM_TILE_GEMM_ARGS_H_
