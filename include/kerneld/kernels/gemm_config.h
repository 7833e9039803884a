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

// The HIP GEMM (gfx90a, gfx94x). String form "bm128.bn128.bk128.nw4.st2" (autotune_space.h).
struct HipGemmConfig {
  int bm = 128;  // tile of D per workgroup: 64, 128 or 256 (bm*bn <= 256*128)
  int bn = 128;
  int bk = 128;  // K tile: 64 or 128 (divides the 128 scale block)
  int nw = 4;    // wavefronts (64 lanes) per workgroup: 4 or 8
  int st = 2;    // LDS pipeline stages: 1 or 2

  bool operator==(const HipGemmConfig& o) const {
    return bm == o.bm && bn == o.bn && bk == o.bk && nw == o.nw && st == o.st;
  }
  bool operator!=(const HipGemmConfig& o) const { return !(*this == o); }
};

// std::monostate: the backend's heuristic default. GemmConfig: the sm_90a FP8 GEMM;
// CublasLtGemmConfig: the same problem through cuBLASLt (both gemm_fp8_config.h).
using GemmKernelConfig =
    std::variant<std::monostate, CpuGemmConfig, GemmConfig, HipGemmConfig, CublasLtGemmConfig>;

}  // namespace kd

#endif  // KERNELD_KERNELS_GEMM_CONFIG_H_
