#include "kernels/gpu/gemm_dispatch.h"

#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/gpu/tile_gemm/tile_gemm_config.h"

namespace kd {

absl::StatusOr<GemmKernel> ChooseGemmKernel(const GemmArgs& args, absl::string_view arch,
                                            absl::string_view device_name, bool wgmma_built) {
  const bool hopper = arch == "sm_90" || arch == "sm_90a";
  // NOTE: the wgmma kernel is built for e4m3fn x e4m3fn alone (CudaSupportsGemmFp8).
  const bool wgmma_formats = args.a.dtype == DType::kE4M3FN && args.b.dtype == DType::kE4M3FN;
  if (hopper && wgmma_built && wgmma_formats &&
      !std::holds_alternative<TileGemmConfig>(args.config)) {
    return GemmKernel::kWgmma;
  }
  if (tile_gemm::FamilyOf(arch) != tile_gemm::ArchFamily::kNone) return GemmKernel::kTile;
  return absl::UnimplementedError(absl::StrCat(
      "the fp8 gemm needs FP8 matrix instructions (NVIDIA sm_89 or later, AMD gfx940-gfx942 or "
      "gfx950); device ",
      device_name, " is ", arch.empty() ? "of unknown architecture" : arch,
      ", which has none (quantize, pad and unpad run there)"));
}

}  // namespace kd
