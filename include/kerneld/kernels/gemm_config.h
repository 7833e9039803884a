// The config a GEMM runs with, typed: one kernel's tunable choices, or none (the backend's own
// heuristic default). The autotune cache and spaces keep configs as strings (on disk and on the
// admin wire); a string is resolved into this type once, when its cache entry is loaded, stored or
// selected (ConfigSpace::resolve), and a GemmArgs carries the result to the backend, which never
// parses. A backend given another kernel's config runs its default. Results never depend on it.
#ifndef KERNELD_KERNELS_GEMM_CONFIG_H_
#define KERNELD_KERNELS_GEMM_CONFIG_H_

#include <cstdint>
#include <variant>

#include "kerneld/kernels/gemm_fp8_config.h"

namespace kd {

// The CPU reference GEMM (kernels/cpu/gemm.cc): columns of D computed per tile, so that a tile of
// B stays in cache. String form "tn<tile_n>" (autotune_space.h).
struct CpuGemmConfig {
  int64_t tile_n = 64;  // >= 1; the autotune space holds 16, 32, 64, 128, 256

  bool operator==(const CpuGemmConfig& o) const { return tile_n == o.tile_n; }
  bool operator!=(const CpuGemmConfig& o) const { return !(*this == o); }
};

// The portable tile GEMM (kernels/gpu/tile_gemm/): the GEMM of NVIDIA devices with FP8 mma.sync
// but no wgmma kernel (sm_89 and later, but sm_90) and of AMD devices with FP8 MFMA (gfx94x,
// gfx950); on sm_90 it runs only when given this config (a pinned tune-cache entry). Its tile:
// block_m x block_n outputs per CTA (workgroup), `stages` 128-deep K blocks in flight. String form
// "tm128.tn128.ts3" (TileGemmConfigToString, kernels/gpu/tile_gemm/tile_gemm_config.h).
struct TileGemmConfig {
  int block_m = 128;  // 64 or 128
  int block_n = 128;  // 64 or 128
  int stages = 2;     // 2 or 3

  bool operator==(const TileGemmConfig& o) const {
    return block_m == o.block_m && block_n == o.block_n && stages == o.stages;
  }
  bool operator!=(const TileGemmConfig& o) const { return !(*this == o); }
};

// std::monostate: the backend's heuristic default. GemmConfig: the sm_90a FP8 GEMM;
// CublasLtGemmConfig: the same problem through cuBLASLt (both gemm_fp8_config.h). TileGemmConfig:
// the portable tile GEMM.
using GemmKernelConfig =
    std::variant<std::monostate, CpuGemmConfig, GemmConfig, TileGemmConfig, CublasLtGemmConfig>;

}  // namespace kd

#endif  // KERNELD_KERNELS_GEMM_CONFIG_H_
