// The FP8 GEMM through the CUDA backend (with the config the daemon gives it, and the fallback
// for a bad one) against the CPU backend, and the GPU tuning harness under the real tuner.
// Label gpu: the device tests skip where no sm_90 device exists (the tile GEMM's sm_89 space: no
// sm_89 or sm_90 device); the key checks run anywhere.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include "kerneld/kernels/autotune.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/fp8.h"
#include "kerneld/kernels/gemm_fp8_config.h"
#include "kerneld/kernels/registry.h"
#include "kernels/cuda/gemm/gemm_fp8_heuristic.h"
#include "kernels/cuda/gemm_harness.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/run_op.h"

namespace kd {
namespace {

#define KD_REQUIRE_SM90(backend) \
  KD_REQUIRE_CUDA(backend);      \
  if (backend->Properties(0).arch != "sm_90") GTEST_SKIP() << "no sm_90 device"

std::vector<uint8_t> RandomE4M3(std::mt19937& rng, size_t n) {
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) {
    do {
      b = static_cast<uint8_t>(rng());
    } while (!std::isfinite(fp8::Decode<fp8::E4M3FN>(b)));
  }
  return out;
}

std::vector<float> RandomScales(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> u(0.25f, 2.0f);
  std::vector<float> out(n);
  for (float& v : out) v = u(rng);
  return out;
}

float Bf16ToFloat(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Device copies of host vectors, freed at the end of the test.
class DeviceArena {
 public:
  ~DeviceArena() {
    for (void* p : ptrs_) cudaFree(p);
  }
  void* Copy(const void* host, size_t bytes) {
    void* p = Alloc(bytes);
    EXPECT_EQ(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return p;
  }
  void* Alloc(size_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    ptrs_.push_back(p);
    return p;
  }

 private:
  std::vector<void*> ptrs_;
};

TEST(CudaGemmBackendTest, RunsWithTheGivenConfigAndFallsBackOnABadOneMatchingTheCpu) {
  KD_REQUIRE_SM90(cuda);
  auto cpu = CreateCpuBackend(2);
  const int64_t m = 320, n = 384, k = 512;
  std::mt19937 rng(7);
  std::vector<uint8_t> a = RandomE4M3(rng, m * k), b = RandomE4M3(rng, n * k);
  std::vector<float> sa = RandomScales(rng, m * (k / 128));
  std::vector<float> sb = RandomScales(rng, ((n + 127) / 128) * (k / 128));
  const DeviceLoc host{BackendKind::kCpu, 0}, dev{BackendKind::kCuda, 0};

  std::vector<uint16_t> want(m * n);
  GemmArgs g;
  g.variant = GemmVariant::kNT;
  g.a = testing::MakeTensor(a.data(), DType::kE4M3FN, {m, k}, k, host);
  g.a_scales = testing::MakeTensor(sa.data(), DType::kF32, {m, k / 128}, k / 128, host);
  g.b = testing::MakeTensor(b.data(), DType::kE4M3FN, {n, k}, k, host);
  g.b_scales =
      testing::MakeTensor(sb.data(), DType::kF32, {(n + 127) / 128, k / 128}, k / 128, host);
  g.d = testing::MakeTensor(want.data(), DType::kBF16, {m, n}, n, host);
  auto cpu_stream = cpu->CreateStream(0);
  ASSERT_TRUE(cpu_stream.ok());
  ASSERT_TRUE(RunOp(*cpu, Op(g), **cpu_stream, nullptr).ok());
  float want_max = 0;
  for (uint16_t v : want) want_max = std::max(want_max, std::fabs(Bf16ToFloat(v)));
  ASSERT_GT(want_max, 0);

  DeviceArena arena;
  GemmArgs dg = g;
  dg.a = testing::MakeTensor(arena.Copy(a.data(), a.size()), DType::kE4M3FN, {m, k}, k, dev);
  dg.a_scales = testing::MakeTensor(arena.Copy(sa.data(), sa.size() * 4), DType::kF32, {m, k / 128},
                                    k / 128, dev);
  dg.b = testing::MakeTensor(arena.Copy(b.data(), b.size()), DType::kE4M3FN, {n, k}, k, dev);
  dg.b_scales = testing::MakeTensor(arena.Copy(sb.data(), sb.size() * 4), DType::kF32,
                                    {(n + 127) / 128, k / 128}, k / 128, dev);
  void* d = arena.Alloc(m * n * 2);
  dg.d = testing::MakeTensor(d, DType::kBF16, {m, n}, n, dev);
  ASSERT_TRUE(SupportsOp(*cuda, Op(dg)).ok()) << SupportsOp(*cuda, Op(dg));
  auto stream = cuda->CreateStream(0);
  ASSERT_TRUE(stream.ok());

  // None (the default); tuned configs of both tile widths and a cluster, as the daemon's cache
  // resolves them; then configs the kernel does not build and another backend's config, which
  // must fall back to the default, not fail the request. (A string that does not parse never
  // reaches a backend: the cache refuses it, autotune_cache_test.)
  std::vector<GemmKernelConfig> configs = {GemmKernelConfig()};
  for (const char* text :
       {"bm128.bn64.s8.c1.r4.p0", "bm128.bn128.s5.c2.r16.p0", "bm128.bn128.s4.c1.r1.p7"}) {
    absl::StatusOr<GemmConfig> parsed = ParseGemmConfig(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    configs.push_back(*parsed);
  }
  GemmConfig unbuilt;
  unbuilt.block_n = 96;
  configs.push_back(unbuilt);
  unbuilt = GemmConfig();
  unbuilt.raster_group = 0;
  configs.push_back(unbuilt);
  configs.push_back(CpuGemmConfig());
  configs.push_back(CublasLtGemmConfig());  // cuBLASLt runs TN only: the kernel's default runs
  for (size_t i = 0; i < configs.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(cudaMemset(d, 0xff, m * n * 2), cudaSuccess);  // NaN poison
    dg.config = configs[i];
    std::atomic<int> timed{0};
    const absl::Status s =
        RunOp(*cuda, Op(dg), **stream, [&](double seconds) { timed += seconds > 0 ? 1 : 0; });
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE(cuda->Synchronize(**stream).ok());
    for (int i = 0; i < 200 && timed.load() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(timed.load(), 1);
    std::vector<uint16_t> got(m * n);
    ASSERT_EQ(cudaMemcpy(got.data(), d, got.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const float x = Bf16ToFloat(got[i]), r = Bf16ToFloat(want[i]);
      if (!(std::fabs(x - r) <= std::fabs(r) / 64 + want_max / 1024)) ++bad;
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST(CudaGemmBackendTest, PropertiesCarryDriverAndRuntimeVersions) {
  KD_REQUIRE_CUDA(cuda);
  const DeviceProperties p = cuda->Properties(0);
  EXPECT_NE(p.driver_version.find('.'), std::string::npos) << p.driver_version;
  EXPECT_NE(p.runtime_version.find('.'), std::string::npos) << p.runtime_version;
}

TuneKey Sm90Key(const DeviceProperties& p, GemmVariant v, int64_t m, int64_t n, int64_t k,
                int64_t groups = 1) {
  const ConfigSpace* space =
      ConfigSpaceRegistry::Builtin().Find("gemm", GemmVariantName(v), "sm_90");
  return MakeGemmTuneKey(v, DType::kE4M3FN, DType::kBF16, m, n, k, groups, p,
                         space == nullptr ? 0 : space->kernel_version);
}

// The config the tuner measures first and the harness checks every candidate against.
std::string Reference(const TuneKey& key) { return *ConfigSpaceRegistry::Builtin().Default(key); }

TuneOptions Quick() {
  TuneOptions o;
  o.warmup = 1;
  o.repeats = 5;
  return o;
}

TEST(CudaGemmHarnessTest, TunesADenseKeyCheckingEveryCandidate) {
  KD_REQUIRE_SM90(cuda);
  const TuneKey key = Sm90Key(cuda->Properties(0), GemmVariant::kNT, 1024, 2048, 1024);
  ASSERT_TRUE(cuda->CanTune());
  auto harness = cuda->CreateTuneHarness(key, Reference(key), 0);
  ASSERT_TRUE(harness.ok()) << harness.status();
  WallTimer timer;
  absl::StatusOr<TuneResult> r =
      Tune(key, ConfigSpaceRegistry::Builtin(), **harness, timer, Quick());
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<std::string> candidates = *ConfigSpaceRegistry::Builtin().Candidates(key);
  EXPECT_EQ(r->candidates.size(), candidates.size());
  for (const CandidateResult& c : r->candidates) EXPECT_TRUE(c.status.ok()) << c.config << c.status;
  EXPECT_TRUE(ParseGemmConfig(r->config).ok()) << r->config;
  // Device time of a 4 GFLOP GEMM: well under a millisecond, far over a microsecond.
  EXPECT_GT(r->measured.median, 1e-6);
  EXPECT_LT(r->measured.median, 1e-3);
}

TEST(CudaGemmHarnessTest, ACandidateWithAWrongResultIsRejectedAndCannotWin) {
  KD_REQUIRE_SM90(cuda);
  const TuneKey key = Sm90Key(cuda->Properties(0), GemmVariant::kNT, 1024, 2048, 1024);
  const std::string broken = "bm128.bn64.s8.c1.r8.p0";
  CudaGemmHarnessOptions options;
  options.reference_config = Reference(key);
  options.after_run = [&](absl::string_view config, void* d, size_t bytes) {
    // One element in the middle: a wrong tile, not a wholesale failure.
    if (config == broken) cudaMemset(static_cast<char*>(d) + bytes / 2, 0x40, 2);
  };
  auto harness = CreateCudaGemmHarness(key, options);
  ASSERT_TRUE(harness.ok()) << harness.status();
  WallTimer timer;
  absl::StatusOr<TuneResult> r =
      Tune(key, ConfigSpaceRegistry::Builtin(), **harness, timer, Quick());
  ASSERT_TRUE(r.ok()) << r.status();
  bool seen = false;
  for (const CandidateResult& c : r->candidates) {
    if (c.config != broken) continue;
    seen = true;
    EXPECT_EQ(c.status.code(), absl::StatusCode::kInternal) << c.status;
  }
  EXPECT_TRUE(seen);
  EXPECT_NE(r->config, broken);
}

TEST(CudaGemmHarnessTest, TunesGroupedKeys) {
  KD_REQUIRE_SM90(cuda);
  TuneOptions o = Quick();
  o.max_candidates = 3;
  for (const TuneKey& key :
       {Sm90Key(cuda->Properties(0), GemmVariant::kMGroupedNT, 2048, 1024, 512, 4),
        Sm90Key(cuda->Properties(0), GemmVariant::kKGroupedTN, 256, 512, 2048, 4)}) {
    SCOPED_TRACE(key.ToString());
    auto harness = cuda->CreateTuneHarness(key, Reference(key), 0);
    ASSERT_TRUE(harness.ok()) << harness.status();
    WallTimer timer;
    absl::StatusOr<TuneResult> r = Tune(key, ConfigSpaceRegistry::Builtin(), **harness, timer, o);
    ASSERT_TRUE(r.ok()) << r.status();
    for (const CandidateResult& c : r->candidates)
      EXPECT_TRUE(c.status.ok()) << c.config << c.status;
  }
}

// TN's cuBLASLt candidates under the harness: each algorithm cuBLASLt ranks runs, with no
// fallback, and its output passes the check against the sm_90a kernel's.
TEST(CudaGemmHarnessTest, CublasLtCandidatesOfATnKeyMatchTheKernel) {
  KD_REQUIRE_SM90(cuda);  // the backend loads cuBLASLt where it can
  if (!CublasLtGemmLoaded()) GTEST_SKIP() << "cuBLASLt could not be loaded";
  const TuneKey key = Sm90Key(cuda->Properties(0), GemmVariant::kTN, 1024, 2048, 1024);
  const std::vector<std::string> candidates = *ConfigSpaceRegistry::Builtin().Candidates(key);
  CudaGemmHarnessOptions options;
  options.reference_config = Sm90KernelHeuristic(key);
  auto harness = CreateCudaGemmHarness(key, options);
  ASSERT_TRUE(harness.ok()) << harness.status();
  int ran = 0;
  for (int algo = 0; algo < kCublasLtGemmAlgos; ++algo) {
    const std::string config = CublasLtGemmConfigToString({algo});
    SCOPED_TRACE(config);
    EXPECT_NE(std::find(candidates.begin(), candidates.end(), config), candidates.end());
    const absl::Status run = (*harness)->Run(config);
    if (algo > 0 && run.code() == absl::StatusCode::kInvalidArgument) continue;  // fewer ranked
    ASSERT_TRUE(run.ok()) << run;
    const absl::Status checked = (*harness)->CheckOutput();
    EXPECT_TRUE(checked.ok()) << checked;
    ASSERT_TRUE((*harness)->DeviceSeconds().has_value());
    ++ran;
  }
  EXPECT_GE(ran, 1);
}

// The tile GEMM's space of an sm_89 key (an L40S), tuned on this device: sm_89's tiles are a
// subset of what an sm_90 device runs, so an H100 measures every candidate of every variant, NN
// included, each checked against the space's default.
TEST(CudaGemmHarnessTest, TunesTheTileGemmSpaceOfAnSm89Key) {
  KD_REQUIRE_CUDA(cuda);
  const std::string arch = cuda->Properties(0).arch;
  if (arch != "sm_89" && arch != "sm_90") GTEST_SKIP() << "needs an sm_89 or sm_90 device";
  DeviceProperties l40s;
  l40s.name = "NVIDIA L40S";
  l40s.arch = "sm_89";
  const ConfigSpaceRegistry& spaces = ConfigSpaceRegistry::Builtin();
  struct Case {
    GemmVariant variant;
    int64_t m, n, k, groups;
  };
  for (const Case& c :
       {Case{GemmVariant::kNT, 1024, 2048, 1024, 1}, Case{GemmVariant::kNN, 1024, 2048, 1024, 1},
        Case{GemmVariant::kTN, 1024, 2048, 1024, 1},
        Case{GemmVariant::kMGroupedNT, 2048, 1024, 512, 4},
        Case{GemmVariant::kKGroupedTN, 256, 512, 2048, 4}}) {
    const ConfigSpace* space = spaces.Find("gemm", GemmVariantName(c.variant), "sm_89");
    ASSERT_NE(space, nullptr);
    const TuneKey key = MakeGemmTuneKey(c.variant, DType::kE4M3FN, DType::kBF16, c.m, c.n, c.k,
                                        c.groups, l40s, space->kernel_version);
    SCOPED_TRACE(key.ToString());
    auto harness = cuda->CreateTuneHarness(key, Reference(key), 0);
    ASSERT_TRUE(harness.ok()) << harness.status();
    WallTimer timer;
    absl::StatusOr<TuneResult> r = Tune(key, spaces, **harness, timer, Quick());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->candidates.size(), spaces.Candidates(key)->size());
    for (const CandidateResult& cand : r->candidates) {
      EXPECT_TRUE(cand.status.ok()) << cand.config << cand.status;
    }
    EXPECT_TRUE(std::holds_alternative<TileGemmConfig>(*spaces.Resolve(key, r->config)))
        << r->config;
  }
}

// Runs without a device: the key is refused before anything touches the GPU.
TEST(CudaGemmHarnessTest, KeysTheKernelCannotRunAreInvalid) {
  DeviceProperties p;
  p.name = "NVIDIA H100 80GB HBM3";
  p.arch = "sm_90";
  TuneKey key = Sm90Key(p, GemmVariant::kNT, 256, 256, 256);
  TuneKey bad = key;
  bad.variant = "nn";
  EXPECT_EQ(CreateCudaGemmHarness(bad, {}).status().code(), absl::StatusCode::kInvalidArgument);
  bad = key;
  bad.dtypes = "e5m2.e5m2>bf16";
  EXPECT_EQ(CreateCudaGemmHarness(bad, {}).status().code(), absl::StatusCode::kInvalidArgument);
  bad = key;
  bad.k = 200;
  EXPECT_EQ(CreateCudaGemmHarness(bad, {}).status().code(), absl::StatusCode::kInvalidArgument);
  bad = key;
  bad.arch = "x86_64";
  EXPECT_EQ(CreateCudaGemmHarness(bad, {}).status().code(), absl::StatusCode::kInvalidArgument);
  // No FP8 matrix instructions: nothing to tune.
  bad = key;
  bad.arch = "sm_80";
  EXPECT_EQ(CreateCudaGemmHarness(bad, {}).status().code(), absl::StatusCode::kInvalidArgument);
  // An sm_89 key tunes the tile GEMM, whose configs the sm_90 kernel's reference is not.
  bad = key;
  bad.arch = "sm_89";
  CudaGemmHarnessOptions wgmma_reference;
  wgmma_reference.reference_config = "bm128.bn128.s6.c1.r8.p0";
  EXPECT_EQ(CreateCudaGemmHarness(bad, wgmma_reference).status().code(),
            absl::StatusCode::kInvalidArgument);
  CudaGemmHarnessOptions no_reference;
  EXPECT_EQ(CreateCudaGemmHarness(key, no_reference).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kd
