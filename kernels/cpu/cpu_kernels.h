// Entry points of the CPU reference kernels: one RunCpu overload per op, which CpuBackend::Run
// picks by the op's type (an op without one does not compile there). Each takes a validated op
// (kd::Validate passed) whose tensors are host memory, and a pool to spread rows over. They
// return a Status only for what validation cannot see ahead: data-dependent rules such as group
// offsets read from memory.
#ifndef KERNELD_KERNELS_CPU_CPU_KERNELS_H_
#define KERNELD_KERNELS_CPU_CPU_KERNELS_H_

#include "absl/status/status.h"
#include "kerneld/kernels/ops.h"
#include "kernels/cpu/thread_pool.h"

namespace kd {

absl::Status RunCpu(const QuantizeArgs& args, ThreadPool& pool);
// Runs GemmCpu with args.config when it is a CpuGemmConfig, else the default.
absl::Status RunCpu(const GemmArgs& args, ThreadPool& pool);
absl::Status RunCpu(const PadArgs& args, ThreadPool& pool);
absl::Status RunCpu(const UnpadArgs& args, ThreadPool& pool);
absl::Status RunCpu(const RowAmaxArgs& args, ThreadPool& pool);

// `config`: its tunable parameters (CpuGemmConfig, gemm_config.h; autotune space "gemm"/"nt"/cpu);
// the defaults are its untuned behaviour. The result does not depend on them.
absl::Status GemmCpu(const GemmArgs& args, ThreadPool& pool, const CpuGemmConfig& config = {});

// Reads a group-ends tensor (i32 or i64, host memory) into int64 values.
std::vector<int64_t> ReadGroupEnds(const Tensor& ends);

}  // namespace kd

#endif  // KERNELD_KERNELS_CPU_CPU_KERNELS_H_
