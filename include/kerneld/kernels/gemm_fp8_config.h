// The config of the sm_90a blockwise FP8 GEMM (kernels/cuda/gemm/) and its one string format.
//
// Host-only and CUDA-free (library kerneld_gemm_config, kernels/cuda/gemm/gemm_fp8_config.cc):
// the sm_90 autotune space (autotune_space.h) enumerates, checks and resolves configs with it, so
// the tune cache stores exactly what the kernel builds, in the kernel's own format; the launcher
// receives the typed GemmConfig (gemm_config.h). The heuristic default is
// kernels/cuda/gemm/gemm_fp8_heuristic.h.
#ifndef KERNELD_KERNELS_GEMM_FP8_CONFIG_H_
#define KERNELD_KERNELS_GEMM_FP8_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kd {

// GemmConfig::raster_group's range: the kernel divides by every band height up to it through a
// table of that size (kernels/cuda/gemm/gemm_fp8_kernel.h, kMaxRasterGroup).
constexpr int kMaxGemmRasterGroup = 64;

// The tunable choices of the kernel. Built: 128x128 tiles with 4..6 stages (5..6 in clusters of
// 2), 128x192 and 192x128 with 4 stages (cluster 1 or 2), 128x64 tiles with 6 or 8 stages (8 in
// clusters of 2), 64x64 tiles with 8 stages and 64x32 with 16 (no cluster); each consumer
// warpgroup owns 64 rows.
struct GemmConfig {
  int block_m = 128;     // tile rows: 64, 128 or 192 (192: block_n 128 only)
  int block_n = 128;     // tile columns: 32 (block_m 64 only), 64, 128 or 192
  int stages = 6;        // shared-memory pipeline depth
  int cluster = 1;       // CTAs per cluster, 1 or 2: a pair of M-adjacent tiles loads its shared
                         // B tile once (TMA multicast). NT, TN, NN and M-grouped (two tiles
                         // of one group); K-grouped runs 1.
  int raster_group = 8;  // M tiles per band of the persistent tile order, 1..kMaxGemmRasterGroup
  int num_ctas = 0;      // persistent CTAs; 0 = as many as fit at once (one per SM)

  bool operator==(const GemmConfig& o) const {
    return block_m == o.block_m && block_n == o.block_n && stages == o.stages &&
           cluster == o.cluster && raster_group == o.raster_group && num_ctas == o.num_ctas;
  }
  bool operator!=(const GemmConfig& o) const { return !(*this == o); }
};

// "bm128.bn128.s6.c1.r8.p0": stable, what the autotune cache stores.
std::string GemmConfigToString(const GemmConfig& config);
// The inverse of GemmConfigToString; accepts exactly its output for configs CheckGemmConfig
// accepts (so string equality is config equality). INVALID_ARGUMENT for a malformed string or
// values this kernel does not build (the message names the field).
absl::StatusOr<GemmConfig> ParseGemmConfig(absl::string_view text);
// OK when the kernel builds `config`, else INVALID_ARGUMENT naming the field.
absl::Status CheckGemmConfig(const GemmConfig& config);

// Every (block_m, block_n, stages, cluster) combination CheckGemmConfig accepts, with the given
// raster group and num_ctas 0, 128-row and 128-column tiles first: the sm_90 autotune space is
// built from it.
std::vector<GemmConfig> BuiltGemmTiles(int raster_group);

// The same GEMM run by cuBLASLt's block-scaled FP8 matmul instead of kerneld's kernel (NVIDIA
// only; the library is loaded at run time: kernels/cuda/gemm/cublaslt_gemm.h says what it runs).
// `algo` ranks the algorithms cuBLASLt's own heuristic returns for the problem, 0 its first
// choice. String form "lt<algo>".
constexpr int kCublasLtGemmAlgos = 4;  // algo: 0..kCublasLtGemmAlgos-1
struct CublasLtGemmConfig {
  int algo = 0;

  bool operator==(const CublasLtGemmConfig& o) const { return algo == o.algo; }
  bool operator!=(const CublasLtGemmConfig& o) const { return !(*this == o); }
};

// "lt0": stable, what the autotune cache stores.
std::string CublasLtGemmConfigToString(const CublasLtGemmConfig& config);
// The inverse of CublasLtGemmConfigToString, canonical form only; INVALID_ARGUMENT otherwise
// (the message names the field).
absl::StatusOr<CublasLtGemmConfig> ParseCublasLtGemmConfig(absl::string_view text);

}  // namespace kd

#endif  // KERNELD_KERNELS_GEMM_FP8_CONFIG_H_
