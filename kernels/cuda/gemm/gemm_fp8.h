// Blockwise-scaled FP8 GEMM on NVIDIA Hopper (sm_90a): TMA-fed wgmma (QGMMA) with warp-
// specialised producer/consumer warpgroups and per-128-K-block scale promotion in fp32.
//
// Variants (semantics: GemmVariant in proto/kerneld/v1/kerneld.proto):
//   NT, TN, M-grouped NT, K-grouped TN: supported, e4m3fn operands.
//   NN: UNIMPLEMENTED here (FP8 wgmma reads only K-major operands; W needs a transposed copy).
// Alignment: the base address and row stride of a and b must be multiples of 16 bytes (TMA);
// The grouped variants take at most 1024 groups. d may have any row stride.
// Group ends are read by the kernel on the device, without a host synchronisation; the kernel
// clamps them (non-decreasing, within [0, rows]) so a bad tensor can never make it access
// memory out of bounds, but it does not report them: a caller that needs INVALID_ARGUMENT for
// bad ends checks them on the host first (the CPU backend does). For K-grouped, ends that are
// not multiples of 128 are rounded down to a block.
#ifndef KERNELD_KERNELS_CUDA_GEMM_GEMM_FP8_H_
#define KERNELD_KERNELS_CUDA_GEMM_GEMM_FP8_H_

#include <cuda_runtime.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/ops.h"

namespace kd {

// The tunable choices of the kernel. Built: 128x128 tiles with 4..6 stages (5..6 in clusters of
// 2) and 128x64 tiles with 6 or 8 stages (8 in clusters of 2); each of the two consumer
// warpgroups owns 64 rows.
struct GemmConfig {
  int block_m = 128;     // tile rows: 128
  int block_n = 128;     // tile columns: 64 or 128
  int stages = 6;        // shared-memory pipeline depth
  int cluster = 1;       // CTAs per cluster, 1 or 2: a pair of M-adjacent tiles loads its shared
                         // B tile once (TMA multicast). NT and TN only; grouped variants run 1.
  int raster_group = 8;  // M tiles per band of the persistent tile order, 1..64
  int num_ctas = 0;      // persistent CTAs; 0 = as many as fit at once (one per SM)

  bool operator==(const GemmConfig& o) const {
    return block_m == o.block_m && block_n == o.block_n && stages == o.stages &&
           cluster == o.cluster && raster_group == o.raster_group && num_ctas == o.num_ctas;
  }
};

// "bm128.bn128.s6.c1.r8.p0": stable, what the autotune cache stores.
std::string GemmConfigToString(const GemmConfig& config);
// The inverse of GemmConfigToString. INVALID_ARGUMENT for a malformed string or values this
// kernel does not build (the message names the field).
absl::StatusOr<GemmConfig> ParseGemmConfig(absl::string_view text);
// OK when LaunchGemmFp8 accepts `config`, else INVALID_ARGUMENT naming the field.
absl::Status CheckGemmConfig(const GemmConfig& config);

// A heuristic default, good without tuning: 128-column tiles unless they would leave most SMs
// idle, in which case 64-column tiles double the tile count.
GemmConfig DefaultGemmConfig(const GemmArgs& args, const cudaDeviceProp& device);

// Enqueues the GEMM on `stream`. `args` must have passed kd::Validate; its tensors are device
// pointers of the current device. Returns INVALID_ARGUMENT for alignment this kernel cannot
// take, UNIMPLEMENTED for variants or dtypes it does not run, INTERNAL for a CUDA error at
// launch (the kernel's own faults surface at the next synchronisation).
absl::Status LaunchGemmFp8(const GemmArgs& args, const GemmConfig& config, cudaStream_t stream);

// How many CTAs of `config` fit on the current device at once (clusters need their CTAs in one
// GPC, so with clusters this can be below the SM count); 0 for a bad config or a CUDA error.
int GemmFp8ResidentCtas(const GemmConfig& config);

// OK when LaunchGemmFp8 runs this op (variant and dtypes), else UNIMPLEMENTED saying why.
absl::Status CudaSupportsGemmFp8(const GemmArgs& args);

}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_GEMM_FP8_H_
