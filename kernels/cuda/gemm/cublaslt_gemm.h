// The GEMM's cuBLASLt family (NVIDIA only): GEMM_TN run by cuBLASLt's block-scaled FP8 matmul
// with VEC128 (1x128) scales on both operands (cublaslt.h), an alternative to kerneld's sm_90a
// kernel that the heuristic (kTnDefaultsToCublasLt) and the autotuner choose between per shape
// (CublasLtGemmConfig; docs/decisions/0014-tn-through-cublaslt.md).
//
// Contract: GEMM_TN's (proto/kerneld/v1/kerneld.proto): a (M,R) and b (N,R) e4m3fn, their 1x128
// scales in either layout, d (M,N) bf16 or f32 with any row stride, accumulate (d += a·bᵀ) for f32
// d. What the family takes besides, else UNIMPLEMENTED and the caller runs kerneld's kernel:
// cuBLASLt 12.9 or later loaded; M and N multiples of 16 (CublasLtGemmTakesShape); a, b and d
// starting 16-byte aligned with row strides of multiples of 16 bytes; M and N at most 2097120; an
// algorithm from cuBLASLt's heuristic for the problem (found when the launch builds its plan).
// K-grouped TN is not offered: its group ends live on the device, and one call per group would
// need them on the host.
//
// Scales: cuBLASLt reads each operand's scales K-block-major with ld = its rows (M or N), from a
// 16-byte aligned address: kerneld's SCALE_LAYOUT_K_BLOCK_MAJOR, contiguous. Scales in any other
// layout are first copied so into the launch's scratch (one small kernel each, stream-ordered).
#ifndef KERNELD_KERNELS_CUDA_GEMM_CUBLASLT_GEMM_H_
#define KERNELD_KERNELS_CUDA_GEMM_CUBLASLT_GEMM_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kerneld/kernels/gemm_fp8_config.h"
#include "kerneld/kernels/ops.h"

namespace kd {

// OK when the family runs `args` (validated) as far as the operands and the loaded library tell
// (the heuristic's answer comes at launch), else UNIMPLEMENTED saying why.
absl::Status CublasLtGemmSupports(const GemmArgs& args);

// Device scratch LaunchCublasLtGemm needs for `args`, in bytes: cuBLASLt's workspace
// (kCublasLtWorkspaceBytes) and room for a K-block-major copy of each scale tensor, each
// 256-byte aligned; the layout depends on the shapes alone.
uint64_t CublasLtGemmScratchBytes(const GemmArgs& args);

// Enqueues `args` (validated; device pointers of the current device) on `stream` through cuBLASLt
// with algorithm `config.algo` of its heuristic's ranking. `scratch`: CublasLtGemmScratchBytes
// bytes, 256-byte aligned, unused by anything else until this work has run (stream order
// suffices); null: taken with cudaMallocAsync on `stream` and freed the same way. UNIMPLEMENTED
// where CublasLtGemmSupports says so or cuBLASLt has no algorithm for the problem;
// INVALID_ARGUMENT for an algo past those the heuristic returned; RESOURCE_EXHAUSTED when
// scratch cannot be had (only asked for when `scratch` is null); INTERNAL for a cuBLASLt or CUDA
// error.
absl::Status LaunchCublasLtGemm(const GemmArgs& args, const CublasLtGemmConfig& config,
                                cudaStream_t stream, void* scratch = nullptr);

}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_CUBLASLT_GEMM_H_
