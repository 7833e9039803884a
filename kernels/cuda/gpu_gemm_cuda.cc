// The NVIDIA build's GEMM (kernels/gpu/gpu_gemm.h). Which kernel runs is ChooseGemmKernel's
// (kernels/gpu/gemm_dispatch.h): the wgmma kernel on sm_90, the portable tile GEMM on the other
// devices with FP8 matrix instructions (and on sm_90 for a TileGemmConfig or formats other than
// e4m3fn). The wgmma kernel's config comes from GemmArgs::config (the daemon's tune cache); which
// code runs and what happens to a config that cannot run is LaunchGemmWithFallback's
// (gemm/gemm_launch.h): such a config never fails the request. NN runs as NT on a transposed copy
// of b, and cuBLASLt takes its workspace, in the stream's scratch.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "kerneld/kernels/status_macros.h"
#include "kernels/cuda/gemm/cublaslt.h"
#include "kernels/cuda/gemm/gemm_fp8.h"
#include "kernels/cuda/gemm/gemm_launch.h"
#include "kernels/cuda/gemm_harness.h"
#include "kernels/gpu/device_attributes.h"
#include "kernels/gpu/gemm_dispatch.h"
#include "kernels/gpu/gpu_check.h"
#include "kernels/gpu/gpu_gemm.h"
#include "kernels/gpu/tile_gemm/tile_gemm.h"
#include "kernels/gpu/tile_gemm/tile_gemm_args.h"

namespace kd {
inline namespace KD_GPU_NS {
namespace {

// This build always links the sm_90a kernel (kerneld_cuda_gemm).
constexpr bool kWgmmaBuilt = true;

// Whether the wgmma kernel runs this device's e4m3fn GEMMs (its default ones): what its warm-up
// and stream scratch are for.
bool RunsWgmma(const DeviceProperties& device) {
  GemmArgs probe;
  probe.a.dtype = DType::kE4M3FN;
  probe.b.dtype = DType::kE4M3FN;
  const absl::StatusOr<GemmKernel> kernel =
      ChooseGemmKernel(probe, device.arch, device.name, kWgmmaBuilt);
  return kernel.ok() && *kernel == GemmKernel::kWgmma;
}

}  // namespace

absl::Status GpuGemmSupports(const GemmArgs& g, const DeviceProperties& device) {
  KD_ASSIGN_OR_RETURN(const GemmKernel kernel,
                      ChooseGemmKernel(g, device.arch, device.name, kWgmmaBuilt));
  if (kernel == GemmKernel::kTile) return tile_gemm::TileGemmSupports(g, device.arch);
  return CudaSupportsGemmFp8(g);
}

absl::Status LaunchGpuGemm(const GemmArgs& g, const DeviceProperties& device, cudaStream_t stream,
                           GemmScratchFn scratch_fn) {
  KD_ASSIGN_OR_RETURN(const GemmKernel kernel,
                      ChooseGemmKernel(g, device.arch, device.name, kWgmmaBuilt));
  if (kernel == GemmKernel::kTile) return tile_gemm::LaunchTileGemmConfig(g, g.config, stream);
  int sms = 0;
  KD_GPU_RETURN_IF_ERROR(cuda::CurrentSmCount(&sms));
  void* scratch = nullptr;
  if (const uint64_t bytes = GemmScratchBytes(g, g.config, sms); bytes > 0) {
    KD_ASSIGN_OR_RETURN(scratch, scratch_fn(bytes));
  }
  return LaunchGemmWithFallback(g, g.config, sms, stream, scratch);
}

// cuBLASLt (the TN family) is opened now, not on the first TN request, and the start-up log
// says which one, or why none.
void PrepareGpuGemm() {
  LoadGemmLibraries();
  const absl::StatusOr<const cuda_gemm::CublasLtApi*> lt = cuda_gemm::LoadCublasLt();
  if (lt.ok()) {
    std::fprintf(stderr, "kerneld: cuBLASLt %zu from %s\n", (*lt)->version, (*lt)->path.c_str());
  } else {
    std::fprintf(stderr, "kerneld: %s; TN GEMMs run kerneld's own kernel\n",
                 std::string(lt.status().message()).c_str());
  }
}

absl::Status WarmGpuGemm(const DeviceProperties& device) {
  return RunsWgmma(device) ? WarmGemmLibraries() : absl::OkStatus();
}

uint64_t GpuGemmStreamScratchBytes(const DeviceProperties& device) {
  return RunsWgmma(device) ? GemmFp8SplitScratchBytes() : 0;
}

bool GpuGemmCanTune() { return true; }

absl::StatusOr<std::unique_ptr<TuneHarness>> CreateGpuGemmTuneHarness(
    const TuneKey& key, absl::string_view reference_config, int device) {
  CudaGemmHarnessOptions options;
  options.device = device;
  options.reference_config = std::string(reference_config);
  return CreateCudaGemmHarness(key, options);
}

}  // namespace KD_GPU_NS
}  // namespace kd
