// The AMD build's GEMM (gpu_gemm.h): ChooseGemmKernel (gemm_dispatch.h) names the portable tile
// GEMM (kernels/gpu/tile_gemm, MFMA FP8) on gfx94x and gfx950, the only GEMM this build links
// (tile_gemm.cc and tile_gemm_kernels.cu compiled by hipcc into kerneld_hip, in
// kd::tile_gemm::amd); anything else is UNIMPLEMENTED (gfx90a has no FP8 matrix instructions,
// and its objects hold trap stubs that are never launched). The config comes from GemmArgs::config
// as on NVIDIA: a TileGemmConfig the device runs runs as given, anything else the heuristic's
// shape (tile_gemm::LaunchTileGemmConfig), so a config never fails the request. Nothing is tuned
// yet: the AMD spaces exist (kernels/autotune) but no harness measures them.
#include "absl/strings/str_cat.h"
#include "kerneld/kernels/status_macros.h"
#include "kernels/gpu/gemm_dispatch.h"
#include "kernels/gpu/gpu_gemm.h"
#include "kernels/gpu/tile_gemm/tile_gemm.h"
#include "kernels/gpu/tile_gemm/tile_gemm_args.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace {

// The sm_90a wgmma kernel is NVIDIA's alone.
constexpr bool kWgmmaBuilt = false;

}  // namespace

absl::Status GpuGemmSupports(const GemmArgs& g, const DeviceProperties& device) {
  KD_ASSIGN_OR_RETURN(const GemmKernel kernel,
                      ChooseGemmKernel(g, device.arch, device.name, kWgmmaBuilt));
  if (kernel != GemmKernel::kTile) {
    return absl::InternalError(absl::StrCat("the hip backend has no wgmma gemm for ", device.arch));
  }
  return tile_gemm::TileGemmSupports(g, device.arch);
}

absl::Status LaunchGpuGemm(const GemmArgs& g, const DeviceProperties& device, cudaStream_t stream,
                           GemmScratchFn) {
  KD_RETURN_IF_ERROR(GpuGemmSupports(g, device));
  return tile_gemm::LaunchTileGemmConfig(g, g.config, stream);
}

void PrepareGpuGemm() {}

absl::Status WarmGpuGemm(const DeviceProperties&) { return absl::OkStatus(); }

uint64_t GpuGemmStreamScratchBytes(const DeviceProperties&) { return 0; }

bool GpuGemmCanTune() { return false; }

absl::StatusOr<std::unique_ptr<TuneHarness>> CreateGpuGemmTuneHarness(const TuneKey&,
                                                                      absl::string_view, int) {
  return absl::UnimplementedError("the hip backend tunes no kernel");
}

}  // namespace KD_GPU_NS
}  // namespace kd
