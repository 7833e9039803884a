// Which GEMM kernel a GPU backend runs on a device, by its architecture: the one decision, as a
// pure function (no vendor runtime), that the backend's Supports and Run both ask.
//
//   sm_90 (sm_90a), when the build has it   the wgmma kernel (kernels/cuda/gemm, and cuBLASLt for
//                                           a CublasLtGemmConfig), its default; the tile GEMM for
//                                           a TileGemmConfig (a pin) and for the operand formats
//                                           the wgmma kernel does not take (e5m2; e4m3fnuz, which
//                                           the tile GEMM then refuses as FAILED_PRECONDITION)
//   NVIDIA sm_89 and later, AMD gfx94x and  the portable tile GEMM (kernels/gpu/tile_gemm): FP8
//   gfx950; sm_90 without the wgmma kernel  mma.sync or MFMA; any other kernel's config runs the
//                                           tile heuristic's shape
//   anything else (sm_80, sm_86, gfx90a)    UNIMPLEMENTED: no FP8 matrix instructions
//
// What each kernel then takes (variants, formats, layouts) is its own Supports: CudaSupportsGemmFp8
// (kernels/cuda/gemm/gemm_fp8.h) and tile_gemm::TileGemmSupports (tile_gemm_args.h), which
// answers FAILED_PRECONDITION for an operand format the device's matrix cores do not read.
#ifndef KERNELD_KERNELS_GPU_GEMM_DISPATCH_H_
#define KERNELD_KERNELS_GPU_GEMM_DISPATCH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/gemm_config.h"
#include "kerneld/kernels/ops.h"

namespace kd {

enum class GemmKernel : uint8_t {
  kWgmma = 0,  // the sm_90a wgmma/TMA kernel
  kTile = 1,   // the portable tile GEMM
};

// The kernel that runs `args` (its config and operand formats) on a device of architecture `arch`
// (as the backend reports it: "sm_90", "sm_89", "gfx942") named `device_name` (for the message),
// where `wgmma_built` says whether this build has the sm_90a kernel. UNIMPLEMENTED naming the
// device and its architecture when it has no FP8 matrix instructions either kernel uses.
absl::StatusOr<GemmKernel> ChooseGemmKernel(const GemmArgs& args, absl::string_view arch,
                                            absl::string_view device_name, bool wgmma_built);

}  // namespace kd

#endif  // KERNELD_KERNELS_GPU_GEMM_DISPATCH_H_
