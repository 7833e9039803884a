// gpu_autotune_bench: tunes GEMM shapes on the CUDA backend's device with the daemon's harness
// and tuner settings (TuneOptions defaults), twice per shape (the second run starts from the
// first's choice as the incumbent, as a retune in the daemon does), and prints one JSON object:
// per shape the default and tuned medians (device time, rotated inputs), every candidate's
// median and noise, the fastest candidate whatever the margin, and the time to create the harness
// and to tune. Usage: gpu_autotune_bench SHAPE...  (kctl's syntax: nt:4096x7168x2048,
// m_grouped_nt:32768x4096x7168:g8, tn:16640x5120x8192).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kerneld/kernels/autotune.h"
#include "kerneld/kernels/cuda_backend.h"
#include "kerneld/kernels/registry.h"
#include "kernels/cuda/gemm_harness.h"

namespace kd {
namespace {

struct Shape {
  GemmVariant variant = GemmVariant::kInvalid;
  int64_t m = 0, n = 0, k = 0, groups = 1;
};

bool ParseShape(absl::string_view text, Shape& s) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() < 2) return false;
  for (GemmVariant v :
       {GemmVariant::kNT, GemmVariant::kTN, GemmVariant::kMGroupedNT, GemmVariant::kKGroupedTN}) {
    if (GemmVariantName(v) == parts[0]) s.variant = v;
  }
  const std::vector<absl::string_view> dims = absl::StrSplit(parts[1], 'x');
  if (s.variant == GemmVariant::kInvalid || dims.size() != 3 || !absl::SimpleAtoi(dims[0], &s.m) ||
      !absl::SimpleAtoi(dims[1], &s.n) || !absl::SimpleAtoi(dims[2], &s.k)) {
    return false;
  }
  if (parts.size() == 3) {
    absl::string_view g = parts[2];
    return absl::ConsumePrefix(&g, "g") && absl::SimpleAtoi(g, &s.groups);
  }
  return parts.size() == 2;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int Main(int argc, char** argv) {
  std::unique_ptr<Backend> cuda = CreateCudaBackend(0);
  if (cuda == nullptr) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  const DeviceProperties props = cuda->Properties(0);
  const ConfigSpaceRegistry& spaces = ConfigSpaceRegistry::Builtin();
  std::printf("{\"device\": \"%s\", \"driver\": \"%s\", \"runtime\": \"%s\", \"shapes\": [",
              props.name.c_str(), props.driver_version.c_str(), props.runtime_version.c_str());
  for (int i = 1; i < argc; ++i) {
    Shape s;
    if (!ParseShape(argv[i], s)) {
      std::fprintf(stderr, "bad shape %s\n", argv[i]);
      return 2;
    }
    const ConfigSpace* space = spaces.Find("gemm", GemmVariantName(s.variant), props.arch);
    const TuneKey key = MakeGemmTuneKey(s.variant, DType::kE4M3FN, DType::kBF16, s.m, s.n, s.k,
                                        s.groups, props, space ? space->kernel_version : 0);
    const double flop = 2.0 * s.m * s.n * s.k;
    std::printf("%s\n {\"shape\": \"%s\", \"key\": \"%s\"", i > 1 ? "," : "", argv[i],
                key.ToString().c_str());
    std::string incumbent;
    for (int round = 0; round < 2; ++round) {
      const auto t0 = std::chrono::steady_clock::now();
      CudaGemmHarnessOptions options;
      if (absl::StatusOr<std::string> reference = spaces.Default(key); reference.ok()) {
        options.reference_config = *reference;
      }
      auto harness = CreateCudaGemmHarness(key, options);
      const double setup = Seconds(t0);
      if (!harness.ok()) {
        std::printf(", \"error\": \"%s\"}", std::string(harness.status().message()).c_str());
        break;
      }
      WallTimer timer;
      absl::StatusOr<TuneResult> r = Tune(key, spaces, **harness, timer, TuneOptions(), incumbent);
      const double total = Seconds(t0);
      if (!r.ok()) {
        std::printf(", \"error\": \"%s\"}", std::string(r.status().message()).c_str());
        break;
      }
      const CandidateResult* fastest = nullptr;
      for (const CandidateResult& c : r->candidates) {
        if (c.status.ok() && (fastest == nullptr || c.measured.median < fastest->measured.median)) {
          fastest = &c;
        }
      }
      std::printf(
          ",\n  \"round%d\": {\"setup_s\": %.3f, \"tune_s\": %.3f, \"cold_total_s\": %.3f, "
          "\"default\": \"%s\", \"default_us\": %.2f, \"default_tflops\": %.1f, "
          "\"tuned\": \"%s\", \"tuned_us\": %.2f, \"tuned_tflops\": %.1f, "
          "\"speedup\": %.4f, \"fastest\": \"%s\", \"fastest_us\": %.2f, "
          "\"candidates\": [",
          round, setup, r->elapsed_seconds, total, r->default_config.c_str(),
          r->default_measured.median * 1e6, flop / r->default_measured.median * 1e-12,
          r->config.c_str(), r->measured.median * 1e6, flop / r->measured.median * 1e-12,
          r->default_measured.median / r->measured.median, fastest ? fastest->config.c_str() : "",
          fastest ? fastest->measured.median * 1e6 : 0);
      for (size_t c = 0; c < r->candidates.size(); ++c) {
        const CandidateResult& cr = r->candidates[c];
        std::printf("%s[\"%s\", %.2f, %.2f, \"%s\"]", c ? ", " : "", cr.config.c_str(),
                    cr.measured.median * 1e6, cr.measured.noise * 1e6,
                    cr.status.ok() ? "ok" : std::string(cr.status.message()).c_str());
      }
      std::printf("]}");
      incumbent = r->config;
      if (round == 1) std::printf("}");
    }
    std::fflush(stdout);
  }
  std::printf("\n]}\n");
  return 0;
}

}  // namespace
}  // namespace kd

int main(int argc, char** argv) { return kd::Main(argc, argv); }
