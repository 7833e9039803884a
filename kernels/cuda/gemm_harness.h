// The CUDA backend's tuning harness for its FP8 GEMMs: the sm_90a kernel (kernels/cuda/gemm) and
// cuBLASLt for sm_90 keys, the portable tile GEMM (kernels/gpu/tile_gemm) for keys of the other
// NVIDIA architectures with FP8 mma.sync (sm_89 and later); the harness
// CudaBackend::CreateTuneHarness makes; the counterpart of CreateCpuGemmHarness. Declared without
// CUDA types.
//
// For one key it allocates, on the device, pseudo-random e4m3fn operands and fp32 scales of the
// key's shape (grouped keys: groups of equal size, K-grouped ends on 128-blocks), as several input
// sets that together exceed twice the L2 cache, and rotates to the next set before every timed
// run, so a time never reads cache-hot inputs. Each Run launches one config of the key's space
// (the sm_90a kernel's, or cuBLASLt's for tn; the tile GEMM's tile) on the harness's stream between
// two CUDA events and waits, with no fallback; DeviceSeconds is the time between the events (the
// launch alone). CheckOutput compares the output, element by element, with the output of the
// reference config (the space's default, as the tuner passes it) on the same input set (|d - ref|
// <= 2^-6 |ref| + 2^-10 max|ref|, no NaN or Inf), so a candidate that computes anything else can
// never win; the reference's own output must be finite and not all zero.
#ifndef KERNELD_KERNELS_CUDA_GEMM_HARNESS_H_
#define KERNELD_KERNELS_CUDA_GEMM_HARNESS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/autotune_key.h"
#include "kerneld/kernels/tune_harness.h"

namespace kd {

struct CudaGemmHarnessOptions {
  int device = 0;
  // The config whose output is the reference (GemmConfigToString form). Required.
  std::string reference_config;
  uint64_t seed = 1;
  // Input sets rotate so that together they span at least this many bytes; 0: twice the
  // device's L2 cache. At most kMaxCudaInputSets sets, fewer when device memory is short.
  uint64_t rotate_bytes = 0;
  // Called after every Run with the config and the device output it wrote (`bytes` long), on
  // the caller's thread, after the kernel finished: a test injects a faulty kernel through it.
  // Empty in production.
  std::function<void(absl::string_view config, void* d, size_t bytes)> after_run;
};
constexpr int kMaxCudaInputSets = 8;

// INVALID_ARGUMENT when the key is not a "gemm" key of sm_90 (variant nt, tn, m_grouped_nt or
// k_grouped_tn) or of another NVIDIA architecture from sm_89 on (those and nn) with dtypes
// "e4m3fn.e4m3fn>bf16" or ">f32", or K is not a multiple of 128;
// INVALID_ARGUMENT as well when reference_config is empty or does not parse;
// RESOURCE_EXHAUSTED when one input set and two outputs do not fit in free device memory;
// INTERNAL for a CUDA error.
absl::StatusOr<std::unique_ptr<TuneHarness>> CreateCudaGemmHarness(
    const TuneKey& key, const CudaGemmHarnessOptions& options);

}  // namespace kd

#endif  // KERNELD_KERNELS_CUDA_GEMM_HARNESS_H_
