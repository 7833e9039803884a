// The AMD build's GEMM (gpu_gemm.h). ChooseGemmKernel (gemm_dispatch.h) names the portable tile
// GEMM for gfx94x and gfx950, whose AMD code objects are built and disassembled
// (tile_gemm_amd_isa_test) but not yet linked into this backend: such a GEMM, having passed the
// device-capability rule (e4m3fnuz operands on gfx940-gfx942), is UNIMPLEMENTED, and nothing is
// tuned.
#include "absl/strings/str_cat.h"
#include "kerneld/kernels/status_macros.h"
#include "kernels/gpu/gemm_dispatch.h"
#include "kernels/gpu/gpu_gemm.h"

namespace kd {
inline namespace KD_GPU_NS {

absl::Status GpuGemmSupports(const GemmArgs& g, const DeviceProperties& device) {
  KD_ASSIGN_OR_RETURN(const GemmKernel kernel,
                      ChooseGemmKernel(g, device.arch, device.name, /*wgmma_built=*/false));
  return absl::UnimplementedError(
      absl::StrCat("the hip backend does not link the ", kernel == GemmKernel::kTile ? "tile " : "",
                   "gemm kernel for ", device.arch, " (", device.name, ") yet"));
}

absl::Status LaunchGpuGemm(const GemmArgs& g, const DeviceProperties& device, cudaStream_t,
                           GemmScratchFn) {
  return GpuGemmSupports(g, device);
}

void PrepareGpuGemm() {}

bool GpuGemmCanTune() { return false; }

absl::StatusOr<std::unique_ptr<TuneHarness>> CreateGpuGemmTuneHarness(const TuneKey&,
                                                                      absl::string_view, int) {
  return absl::UnimplementedError("the hip backend tunes no kernel");
}

}  // namespace KD_GPU_NS
}  // namespace kd
