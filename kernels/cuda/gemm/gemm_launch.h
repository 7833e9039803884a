// Which code runs a validated GemmArgs on an sm_90 device, with which config: kerneld's sm_90a
// kernel (GemmConfig; gemm_fp8.h) or, for TN, cuBLASLt (CublasLtGemmConfig; cublaslt_gemm.h).
// The CUDA backend, the tuning harness, the GEMM benchmark and the tests launch through here.
#ifndef KERNELD_KERNELS_CUDA_GEMM_GEMM_LAUNCH_H_
#define KERNELD_KERNELS_CUDA_GEMM_GEMM_LAUNCH_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "kerneld/kernels/gemm_config.h"
#include "kerneld/kernels/ops.h"

namespace kd {

// Loads what the GEMM's families need at run time (cuBLASLt), so that the sm_90 autotune space
// offers them from the start. Never fails: a family whose library is missing is not offered.
void LoadGemmLibraries();

// Does on the current device, once, the work that the first GEMM launch there would otherwise do
// (WarmGemmFp8 for every kernel instantiation, and the cuBLASLt handle where cuBLASLt loaded;
// LoadGemmLibraries first). A few driver calls per instantiation and one cublasLtCreate: no
// allocation, no launch. Per problem, cuBLASLt's plan is still built by its first launch. The
// first error (INTERNAL), the rest done regardless.
absl::Status WarmGemmLibraries();

// The config a GEMM runs with when it comes without one: CublasLtGemmConfig{0} for TN where
// TnDefaultsToCublasLt (gemm_fp8_heuristic.h) and the family takes the op; else
// DefaultGemmConfig (for NN, that of the NT problem it runs as).
GemmKernelConfig DefaultGemmKernelConfig(const GemmArgs& args, int sm_count);

// Device scratch a launch of `args` with `config` may need, in bytes: kerneld's kernel's
// (GemmFp8ScratchBytes), and where the config is cuBLASLt's and the family takes the op, enough
// for cuBLASLt too (either may run: see LaunchGemmWithFallback).
uint64_t GemmScratchBytes(const GemmArgs& args, const GemmKernelConfig& config, int sm_count);

// "bm128.bn128.s6.c1.r8.p0", "lt0"; "default" for std::monostate, "other" for another kind.
std::string GemmKernelConfigToString(const GemmKernelConfig& config);

// Runs `args` with exactly `config`, no fallback (what a tuner measures): a GemmConfig through
// LaunchGemmFp8 (for NN, the config of the NT problem it runs as), a CublasLtGemmConfig through
// LaunchCublasLtGemm, with their statuses; INVALID_ARGUMENT for any other kind of config.
absl::Status LaunchGemmConfig(const GemmArgs& args, const GemmKernelConfig& config,
                              cudaStream_t stream, void* scratch = nullptr);

// The CUDA backend's launch. std::monostate runs DefaultGemmKernelConfig; a GemmConfig or
// CublasLtGemmConfig runs as given where it can. Where it cannot, kerneld's kernel runs its
// default config (DefaultGemmConfig) instead: silently for a cuBLASLt config the family does not
// take (library absent, operands, no algorithm: the family is not in the space for this op);
// counted and logged to stderr (the first time, then at every power of two) for a kernel config
// it does not build or whose launch fails with INTERNAL, and for a cuBLASLt launch that fails
// otherwise. Any other kind of config runs the default too. A failure of the default is returned.
// `scratch`: GemmScratchBytes(args, config) bytes, as for LaunchGemmFp8.
absl::Status LaunchGemmWithFallback(const GemmArgs& args, const GemmKernelConfig& config,
                                    int sm_count, cudaStream_t stream, void* scratch);

// How many times LaunchGemmWithFallback ran the default instead of a config it was given, by
// fault (not counting the silent cases above), since the process started.
uint64_t GemmConfigFallbacks();

}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_GEMM_LAUNCH_H_
