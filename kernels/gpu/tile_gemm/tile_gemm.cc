#include "kernels/gpu/tile_gemm/tile_gemm.h"

#include <atomic>
#include <cstdio>
#include <variant>

#include "absl/strings/str_cat.h"
#include "kernels/gpu/tile_gemm/tile_gemm_args.h"
#include "kernels/gpu/tile_gemm/tile_gemm_config.h"
#include "kernels/gpu/tile_gemm/tile_gemm_launch.h"
#include "kernels/gpu/tile_gemm/vendor_namespace.h"

namespace kd {
namespace tile_gemm {
KD_TILE_GEMM_VENDOR_NS_BEGIN
namespace {

absl::Status RuntimeError(absl::string_view what, cudaError_t err) {
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}

std::atomic<uint64_t> config_fallbacks{0};

void CountConfigFallback(const TileGemmConfig& config, absl::string_view arch) {
  const uint64_t n = config_fallbacks.fetch_add(1) + 1;
  if ((n & (n - 1)) == 0) {
    const std::string line =
        absl::StrCat("kerneld: tile gemm config \"", TileGemmConfigToString(config),
                     "\" does not run on ", arch, ", the heuristic's tile runs (", n, " so far)");
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

}  // namespace

absl::StatusOr<TileDevice> CurrentTileDevice() {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return RuntimeError("cudaGetDevice", err);
  TileDevice d;
#if KD_GPU_AMD
  hipDeviceProp_t prop;
  err = hipGetDeviceProperties(&prop, device);
  if (err != cudaSuccess) return RuntimeError("hipGetDeviceProperties", err);
  d.arch = prop.gcnArchName;
  d.arch = d.arch.substr(0, d.arch.find(':'));  // "gfx942:sramecc+:xnack-"
  d.units = prop.multiProcessorCount;
#else
  // Attributes, not cudaGetDeviceProperties: this runs on every launch.
  int major = 0, minor = 0;
  err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  }
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&d.units, cudaDevAttrMultiProcessorCount, device);
  }
  if (err != cudaSuccess) return RuntimeError("cudaDeviceGetAttribute", err);
  d.arch = absl::StrCat("sm_", major * 10 + minor);
#endif
  return d;
}

absl::Status LaunchTileGemm(const Params& p, const TileShape& shape, cudaStream_t stream) {
  if (!TileShapeBuilt(shape)) {
    return absl::UnimplementedError(absl::StrCat("tile gemm config ", TileShapeToString(shape),
                                                 " is not built for this vendor"));
  }
  if (p.k % 128 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the reduction ", p.k, " is not a multiple of block 128"));
  }
  const absl::StatusOr<TileDevice> device = CurrentTileDevice();
  if (!device.ok()) return device.status();
  if (FamilyOf(device->arch) == ArchFamily::kNone) {
    return absl::UnimplementedError(
        absl::StrCat("the tile gemm needs FP8 matrix instructions, which device ", device->arch,
                     " does not have"));
  }
  const cudaError_t err = LaunchTileGemmKernel(p, shape, stream);
  if (err != cudaSuccess) return RuntimeError("tile gemm launch", err);
  return absl::OkStatus();
}

absl::Status LaunchTileGemm(const GemmArgs& args, const TileShape& shape, cudaStream_t stream) {
  const absl::StatusOr<TileDevice> device = CurrentTileDevice();
  if (!device.ok()) return device.status();
  const absl::Status supported = TileGemmSupports(args, device->arch);
  if (!supported.ok()) return supported;
  const absl::StatusOr<Params> p = TileGemmParams(args);
  if (!p.ok()) return p.status();
  TileShape chosen = shape;
  if (chosen == TileShape{}) {
    const bool k_grouped = p->mode == Mode::kKGrouped;
    chosen =
        HeuristicTileShape(device->arch, p->m, p->n, k_grouped ? p->num_groups : 1, device->units);
  }
  return LaunchTileGemm(*p, chosen, stream);
}

absl::Status LaunchTileGemmConfig(const GemmArgs& args, const GemmKernelConfig& config,
                                  cudaStream_t stream) {
  const TileGemmConfig* tile = std::get_if<TileGemmConfig>(&config);
  if (tile == nullptr) return LaunchTileGemm(args, TileShape{}, stream);
  const absl::StatusOr<TileDevice> device = CurrentTileDevice();
  if (!device.ok()) return device.status();
  if (!TileGemmRuns(device->arch, *tile)) {
    CountConfigFallback(*tile, device->arch);
    return LaunchTileGemm(args, TileShape{}, stream);
  }
  return LaunchTileGemm(args, ToTileShape(*tile), stream);
}

uint64_t TileGemmConfigFallbacks() { return config_fallbacks.load(); }

KD_TILE_GEMM_VENDOR_NS_END
}  // namespace tile_gemm
}  // namespace kd
