// Entry points of the CPU reference kernels. Each takes a validated op (kd::Validate passed) whose
// tensors are host memory, and a pool to spread rows over. They return a Status only for what
// validation cannot see ahead: data-dependent rules such as group offsets read from memory.
#ifndef KERNELD_KERNELS_CPU_CPU_KERNELS_H_
#define KERNELD_KERNELS_CPU_CPU_KERNELS_H_

#include "absl/status/status.h"
#include "kerneld/kernels/ops.h"
#include "kernels/cpu/thread_pool.h"

namespace kd {

// OK when the CPU quantizer implements this granularity/option mix, else UNIMPLEMENTED.
absl::Status CpuSupportsQuantize(const QuantizeArgs& args);
absl::Status QuantizeCpu(const QuantizeArgs& args, ThreadPool& pool);

absl::Status CpuSupportsGemm(const GemmArgs& args);
// `config`: its tunable parameters (CpuGemmConfig, gemm_config.h; autotune space "gemm"/"nt"/cpu);
// the defaults are its untuned behaviour. The result does not depend on them.
absl::Status GemmCpu(const GemmArgs& args, ThreadPool& pool, const CpuGemmConfig& config = {});

absl::Status PadCpu(const PadArgs& args, ThreadPool& pool);
absl::Status UnpadCpu(const UnpadArgs& args, ThreadPool& pool);

// Reads a group-ends tensor (i32 or i64, host memory) into int64 values.
std::vector<int64_t> ReadGroupEnds(const Tensor& ends);

}  // namespace kd

#endif  // KERNELD_KERNELS_CPU_CPU_KERNELS_H_
