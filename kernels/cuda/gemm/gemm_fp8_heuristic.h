// Which config of the sm_90a FP8 GEMM runs a problem without tuning: the heuristic beside the
// kernel it configures. Host-only and CUDA-free (library kerneld_gemm_config, no nvcc), so that the
// sm_90 autotune space (kernels/autotune/space.cc) uses it in every build, CPU-only ones too, and
// the CUDA backend runs the same default when a GEMM comes without a config.
#ifndef KERNELD_KERNELS_CUDA_GEMM_GEMM_FP8_HEURISTIC_H_
#define KERNELD_KERNELS_CUDA_GEMM_GEMM_FP8_HEURISTIC_H_

#include <cstdint>

#include "kerneld/kernels/gemm_fp8_config.h"

namespace kd {

// The heuristic default for a problem of `rows` rows of A (a's shape[0]; all groups' rows for
// M-grouped), `cols` output columns, reduction `k` and `groups` separate outputs (K-grouped; else
// 1) on a device of `sm_count` SMs; `nt`: the variant is NT (or NN, which runs as NT);
// `m_groups`: for M-grouped NT its number of groups (b's shape[0]), else 0. The rules, in order:
//   - at most 64 rows: 64x32 tiles where their tiles fit the SMs in one wave, else 64x64;
//   - 128-column tiles that would leave most SMs idle: 128x64;
//   - else 128x128 or 128x192, whichever waves of persistent CTAs are estimated to take less
//     time; 128x192 in clusters of 2 for NT, and for M-grouped NT with at least
//     kClusterGroupRows rows per group on average and 8 waves of clusters or more; and for NT
//     with K <= kShortK the 192x128 tile in clusters of 2 instead of 128x192.
GemmConfig HeuristicGemmConfig(int64_t rows, int64_t cols, int64_t k, int64_t groups, int sm_count,
                               bool nt, int64_t m_groups);

// ---- The cuBLASLt family (CublasLtGemmConfig; kernels/cuda/gemm/cublaslt_gemm.h runs it).

// Whether TN runs through cuBLASLt by default (CublasLtGemmConfig{0}) where the family takes the
// problem, instead of HeuristicGemmConfig. NOTE: cuBLASLt's first algorithm runs TN 1.08-1.14x
// faster than the kernel's default at the Llama-3 Linear shapes on an H100 (per-row B scales
// serialise the kernel's promotion; docs/decisions/0014-tn-through-cublaslt.md); the autotuner
// picks per shape either way.
constexpr bool kTnDefaultsToCublasLt = true;

// Whether this process has loaded cuBLASLt with block-scaled FP8 (12.9 or later): set by the
// loader (kernels/cuda/gemm/cublaslt.h) once it has, read by the sm_90 autotune space, which
// holds the family's configs only then. False in builds without the CUDA GEMM. Thread-safe.
bool CublasLtGemmLoaded();
void SetCublasLtGemmLoaded(bool loaded);

// Whether the family takes a TN problem of `rows` rows of A and `cols` output columns: both
// multiples of 16 (cuBLASLt reads each K block's scales of all rows as one vector, 16-byte
// aligned; the operands' strides and addresses are checked when it runs).
bool CublasLtGemmTakesShape(int64_t rows, int64_t cols);

// The default for TN: CublasLtGemmConfig{0} where kTnDefaultsToCublasLt, the library is loaded
// and the family takes the shape; else HeuristicGemmConfig.
bool TnDefaultsToCublasLt(int64_t rows, int64_t cols);

}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_GEMM_FP8_HEURISTIC_H_
