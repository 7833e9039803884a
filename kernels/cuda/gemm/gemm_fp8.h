// Blockwise-scaled FP8 GEMM on NVIDIA Hopper (sm_90a): TMA-fed wgmma (QGMMA) with warp-
// specialised producer/consumer warpgroups and per-128-K-block scale promotion in fp32.
//
// Variants (semantics: GemmVariant in proto/kerneld/v1/kerneld.proto):
//   NT, TN, M-grouped NT, K-grouped TN: supported, e4m3fn operands.
//   NN (dgrad): supported, e4m3fn operands, run as NT on a transposed copy of b (FP8 wgmma reads
//     only operands contiguous along the reduction): b (R,N) is transposed into device scratch
//     (N*R bytes, plus its scale grid) and the NT kernel runs on it, stream-ordered.
// Alignment: the base address and row stride of a and b must be multiples of 16 bytes (TMA; for
// NN, the transpose's 16-byte loads of b, so a contiguous NN b needs N a multiple of 16);
// The grouped variants take at most 1024 groups. d may have any row stride.
// The 1x128 scales (a_scales, and b_scales of TN and K-grouped) may be row-major or K-block-major
// (strides (1, ld): what Quantize writes with SCALE_LAYOUT_K_BLOCK_MAJOR). The TMA-scale tile
// (GemmFp8LoadsScalesByTma) loads K-block-major a_scales as they are; every other path first
// copies K-block-major scales row-major into the launch's scratch (one small transpose per tensor,
// stream-ordered). Row-major scales run exactly as before.
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
#include "kerneld/kernels/gemm_fp8_config.h"
#include "kerneld/kernels/ops.h"

namespace kd {

// GemmConfig, GemmConfigToString, ParseGemmConfig and CheckGemmConfig: gemm_fp8_config.h.

// HeuristicGemmConfig (gemm_fp8_heuristic.h) for `args` (its rows, columns, groups and variant) on
// a device of `sm_count` SMs.
GemmConfig DefaultGemmConfig(const GemmArgs& args, int sm_count);
// The same on `device` (its multiProcessorCount).
GemmConfig DefaultGemmConfig(const GemmArgs& args, const cudaDeviceProp& device);

// Device scratch LaunchGemmFp8 needs for `args` (validated), in bytes: NN needs room for bᵀ
// and its transposed scales; every variant room for a row-major copy of each K-block-major 1x128
// scale tensor; NT, TN and NN the split-tail workspace after them (flags and one 128x192 fp32
// partial per SM of the current device, about 12.4 MB on 132 SMs). Grouped variants with
// row-major scales need none.
uint64_t GemmFp8ScratchBytes(const GemmArgs& args);

// The NT problem an NN `args` runs as: a, a_scales, d and accumulate as given; b = `bt`, the
// (N,R) contiguous transpose of args.b, and b_scales = `bt_scales`, (ceil(N/128), R/128)
// contiguous. With null pointers it describes the shapes only (enough for DefaultGemmConfig).
GemmArgs NnAsNtArgs(const GemmArgs& args, void* bt, float* bt_scales);

// Enqueues the GEMM on `stream`. `args` must have passed kd::Validate; its tensors are device
// pointers of the current device. `scratch`: GemmFp8ScratchBytes(args) bytes of device memory,
// 256-byte aligned, that nothing else uses until this work has run on `stream` (stream order
// suffices); when null and scratch is needed, it is taken with cudaMallocAsync on `stream` and
// freed the same way (no host synchronisation either way, but the allocation costs: an
// 8192x7168x2048 NN takes 441 µs instead of 365 on an H100; long-lived callers pass scratch, as
// the backend does).
// For NN, `config` is the config of the NT problem it runs as (NnAsNtArgs). Split tail (NT, TN, NN;
// only with the caller's scratch, else the kernel runs unsplit): when the last wave of tiles would
// leave at least half of the persistent CTAs idle, its tiles are split along K into slices that
// fill that wave; each tile's owner slice adds the other slices' fp32 partials (through the
// scratch, slice 0 first) to its own. The split is a fixed function of shape, config and the
// device's CTA count, so results are the same bits on every run; against the unsplit kernel only
// the fp32 summation order of those tiles differs (an ulp of fp32 per element at most for each
// extra addition, inside the budget of gemm_cuda_test.cc). The owner spins on the others' flags:
// the kernel needs all its CTAs resident at once (one per SM), as any persistent kernel that is not
// sharing the GPU has. Returns INVALID_ARGUMENT for alignment this kernel cannot take,
// UNIMPLEMENTED for variants or dtypes it does not run, RESOURCE_EXHAUSTED when the scratch cannot
// be had (only asked for when `scratch` is null), INTERNAL for a CUDA error at launch (the kernel's
// own faults surface at the next synchronisation).
absl::Status LaunchGemmFp8(const GemmArgs& args, const GemmConfig& config, cudaStream_t stream,
                           void* scratch = nullptr);

// Whether LaunchGemmFp8 has the kernel's TMA thread load the per-block scales (else producer
// warps copy them with cp.async; the results are the same bits): for NT and NN on the 128x192
// tile in clusters of 2 when both scale tensors start 16-byte aligned with row strides of a
// multiple of 4 floats, e.g. contiguous ones with K/128 a multiple of 4 (for NN, those of the NT
// problem it runs as); K-block-major a_scales qualify with a K-block stride of a multiple of 4
// floats (M a multiple of 4, contiguous), or with K/128 a multiple of 4 (their row-major copy). On
// an H100 that makes 128x192 c2 NT 4-8% faster; unclustered 128x192, M-grouped NT and TN (per-row B
// scales) are slower with it and stay on cp.async.
bool GemmFp8LoadsScalesByTma(const GemmArgs& args, const GemmConfig& config);

// Whether LaunchGemmFp8 has the kernel's epilogue write D with TMA bulk-tensor stores, one
// thread issuing them while its warpgroup goes on with the next tile (else every thread stores 16
// bytes at a time; the results are the same bits): for NT, NN, TN and M-grouped NT writing (not
// accumulating) a bf16 D whose base and row stride are multiples of 16 bytes, on tiles 128 or 192
// wide, when the launch has more tiles than CTAs. On an H100 that makes the large shapes 0-3%
// faster; launches of at most one tile per CTA are 3-5% slower with them (nothing to overlap).
// Reads the device's resident-CTA count (GemmFp8ResidentCtas).
bool GemmFp8StoresByTma(const GemmArgs& args, const GemmConfig& config);

// How many CTAs of `config` fit on the current device at once (clusters need their CTAs in one
// GPC, so with clusters this can be below the SM count); 0 for a bad config or a CUDA error.
int GemmFp8ResidentCtas(const GemmConfig& config);

// OK when LaunchGemmFp8 runs this op (variant and dtypes), else UNIMPLEMENTED saying why.
absl::Status CudaSupportsGemmFp8(const GemmArgs& args);

// The split-tail workspace of the current device in bytes (the part of GemmFp8ScratchBytes that
// every NT, TN and NN launch takes; 0 when the SM count cannot be read).
uint64_t GemmFp8SplitScratchBytes();

// Does on the current device the one-time work of the first launch there, for every
// instantiation the library builds: resolves cuTensorMapEncodeTiled from the driver, reads the
// SM count, opts each kernel in to its shared memory and reads its resident CTAs (all cached).
// Driver calls only: no allocation, no launch. INTERNAL naming the CUDA error on failure.
absl::Status WarmGemmFp8();

}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_GEMM_FP8_H_
