// The CPU backend's tuning harness for its GEMM (op "gemm", variant "nt"), the harness
// CpuBackend::CreateTuneHarness makes.
//
// For one key it holds pseudo-random FP8 operands and fp32 scales of the key's shape, as several
// input sets that together exceed the last-level cache, and rotates to the next set before every
// timed run. CheckOutput compares the output bit for bit with the reference config's output on
// the same input set (the CPU GEMM's result does not depend on its config).
#ifndef KERNELD_KERNELS_CPU_GEMM_HARNESS_H_
#define KERNELD_KERNELS_CPU_GEMM_HARNESS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kerneld/kernels/tensor.h"
#include "kerneld/kernels/tune_harness.h"

namespace kd {

struct CpuGemmHarnessOptions {
  int threads = 0;    // 0: one per core
  uint64_t seed = 1;  // inputs are pseudo-random FP8 from this seed
  // Input sets are rotated so that together they span at least this many bytes (more than the
  // last-level cache), capped at kMaxCpuInputSets sets.
  uint64_t rotate_bytes = uint64_t{64} << 20;
  // The config whose output is the reference ("tn<W>"); "": the kernel's default.
  std::string reference_config;
  // Called after every Run with the config and the output it wrote: a test injects a faulty
  // kernel through it. Empty in production.
  std::function<void(absl::string_view config, const Tensor& d)> after_run;
};
constexpr int kMaxCpuInputSets = 16;

// INVALID_ARGUMENT when the key is not a CPU "gemm"/"nt" key with e4m3fn/e4m3fnuz/e5m2 inputs,
// bf16 or f32 output, K a multiple of 128, when the shape is too large to tune on the host (more
// than 2^31 elements in a tensor), or when reference_config does not parse.
absl::StatusOr<std::unique_ptr<TuneHarness>> CreateCpuGemmHarness(
    const TuneKey& key, const CpuGemmHarnessOptions& options);

}  // namespace kd

#endif  // KERNELD_KERNELS_CPU_GEMM_HARNESS_H_
