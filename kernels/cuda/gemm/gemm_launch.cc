#include "kernels/cuda/gemm/gemm_launch.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <variant>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/gemm/cublaslt.h"
#include "kernels/cuda/gemm/cublaslt_gemm.h"
#include "kernels/cuda/gemm/gemm_fp8.h"
#include "kernels/cuda/gemm/gemm_fp8_heuristic.h"

namespace kd {
namespace {

std::atomic<uint64_t> fallbacks{0};

void CountFallback(const GemmKernelConfig& config, const absl::Status& why) {
  const uint64_t n = fallbacks.fetch_add(1) + 1;
  if ((n & (n - 1)) == 0) {
    const std::string line =
        absl::StrCat("kerneld: cuda gemm config \"", GemmKernelConfigToString(config),
                     "\" ignored, ", "the default runs (", n, " so far): ", why.message());
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

// kerneld's kernel's default for `args` (for NN, that of the NT problem it runs as).
GemmConfig KernelDefault(const GemmArgs& args, int sm_count) {
  return DefaultGemmConfig(
      args.variant == GemmVariant::kNN ? NnAsNtArgs(args, nullptr, nullptr) : args, sm_count);
}

bool TakesCublasLt(const GemmArgs& args, const GemmKernelConfig& config) {
  return std::holds_alternative<CublasLtGemmConfig>(config) && CublasLtGemmSupports(args).ok();
}

GemmKernelConfig Resolved(const GemmArgs& args, const GemmKernelConfig& config, int sm_count) {
  return std::holds_alternative<std::monostate>(config) ? DefaultGemmKernelConfig(args, sm_count)
                                                        : config;
}

}  // namespace

void LoadGemmLibraries() { (void)cuda_gemm::LoadCublasLt(); }

absl::Status WarmGemmLibraries() {
  LoadGemmLibraries();
  absl::Status status = WarmGemmFp8();
  status.Update(cuda_gemm::OpenCublasLtHandle());
  return status;
}

GemmKernelConfig DefaultGemmKernelConfig(const GemmArgs& args, int sm_count) {
  if (args.variant == GemmVariant::kTN && kTnDefaultsToCublasLt) {
    LoadGemmLibraries();
    if (TnDefaultsToCublasLt(args.a.shape[0], args.b.shape[0]) && CublasLtGemmSupports(args).ok()) {
      return CublasLtGemmConfig{};
    }
  }
  return KernelDefault(args, sm_count);
}

uint64_t GemmScratchBytes(const GemmArgs& args, const GemmKernelConfig& config, int sm_count) {
  const uint64_t kernel = GemmFp8ScratchBytes(args);
  if (!TakesCublasLt(args, Resolved(args, config, sm_count))) return kernel;
  return std::max(kernel, CublasLtGemmScratchBytes(args));
}

std::string GemmKernelConfigToString(const GemmKernelConfig& config) {
  if (const auto* c = std::get_if<GemmConfig>(&config)) return GemmConfigToString(*c);
  if (const auto* c = std::get_if<CublasLtGemmConfig>(&config)) {
    return CublasLtGemmConfigToString(*c);
  }
  return std::holds_alternative<std::monostate>(config) ? "default" : "other";
}

absl::Status LaunchGemmConfig(const GemmArgs& args, const GemmKernelConfig& config,
                              cudaStream_t stream, void* scratch) {
  if (const auto* c = std::get_if<GemmConfig>(&config)) {
    return LaunchGemmFp8(args, *c, stream, scratch);
  }
  if (const auto* c = std::get_if<CublasLtGemmConfig>(&config)) {
    return LaunchCublasLtGemm(args, *c, stream, scratch);
  }
  return absl::InvalidArgumentError(absl::StrCat("config \"", GemmKernelConfigToString(config),
                                                 "\" is not an sm_90 gemm config"));
}

absl::Status LaunchGemmWithFallback(const GemmArgs& args, const GemmKernelConfig& config,
                                    int sm_count, cudaStream_t stream, void* scratch) {
  const GemmConfig fallback = KernelDefault(args, sm_count);
  const GemmKernelConfig resolved = Resolved(args, config, sm_count);
  if (const auto* lt = std::get_if<CublasLtGemmConfig>(&resolved)) {
    if (!CublasLtGemmSupports(args).ok()) return LaunchGemmFp8(args, fallback, stream, scratch);
    const absl::Status launched = LaunchCublasLtGemm(args, *lt, stream, scratch);
    if (launched.ok()) return launched;
    // No algorithm for this problem: the family does not take it, as above.
    if (launched.code() != absl::StatusCode::kUnimplemented) CountFallback(resolved, launched);
    return LaunchGemmFp8(args, fallback, stream, scratch);
  }
  const GemmConfig* kernel = std::get_if<GemmConfig>(&resolved);
  if (kernel == nullptr) return LaunchGemmFp8(args, fallback, stream, scratch);
  if (const absl::Status built = CheckGemmConfig(*kernel); !built.ok()) {
    CountFallback(resolved, built);
    return LaunchGemmFp8(args, fallback, stream, scratch);
  }
  const absl::Status launched = LaunchGemmFp8(args, *kernel, stream, scratch);
  // Only a launch failure is the config's fault; a bad operand fails the default the same way.
  if (launched.code() != absl::StatusCode::kInternal || *kernel == fallback) return launched;
  CountFallback(resolved, launched);
  return LaunchGemmFp8(args, fallback, stream, scratch);
}

uint64_t GemmConfigFallbacks() { return fallbacks.load(); }

}  // namespace kd
