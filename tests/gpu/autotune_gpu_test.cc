// The daemon's config path on the CUDA backend: a tune-cache pin of an sm_90 key to a tile config
// (what `kctl cache pin KEY tm128.tn128.ts3` stores) reaches the backend through
// AutotuneManager::Configure, and the backend runs the portable tile GEMM for that key; unpinned,
// the wgmma kernel's default. Label gpu: skips without an sm_90 device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kerneld/kernels/autotune.h"
#include "kerneld/kernels/fp8.h"
#include "kerneld/kernels/registry.h"
#include "kernels/gpu/tile_gemm/tile_gemm.h"
#include "server/autotune_manager.h"
#include "server/metrics.h"
#include "tests/gpu/gpu_test_util.h"

namespace kd {
namespace {

using testing::MakeTensor;

const DeviceLoc kGpu{BackendKind::kCuda, 0};

std::unique_ptr<Region> Upload(Backend& gpu, const void* host, size_t bytes) {
  auto region = gpu.Allocate(0, bytes);
  EXPECT_TRUE(region.ok()) << region.status();
  EXPECT_EQ(cudaMemcpy((*region)->data(), host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  return std::move(region).value();
}

float Bf16ToFloat(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST(AutotuneOnCuda, APinnedTileConfigRunsTheTileGemmThroughConfigure) {
  std::unique_ptr<Backend> owned = testing::MaybeCudaBackend();
  if (owned == nullptr) GTEST_SKIP() << "no CUDA device on this machine";
  if (owned->Properties(0).arch != "sm_90") GTEST_SKIP() << "no sm_90 device";
  std::vector<std::unique_ptr<Backend>> list;
  list.push_back(std::move(owned));
  std::unique_ptr<BackendRegistry> registry = BackendRegistry::FromBackends(std::move(list));
  Backend& gpu = *registry->Default();
  Metrics metrics("test", "cuda");
  AutotuneManager autotune(registry.get(), &metrics, AutotuneOptions());
  ASSERT_TRUE(autotune.Start().ok());

  constexpr int64_t m = 512, n = 384, k = 1024, kb = k / 128;
  std::mt19937 rng(11);
  std::vector<uint8_t> a(m * k), b(n * k);
  std::normal_distribution<float> gauss(0.0f, 8.0f);
  for (uint8_t& x : a) x = fp8::Encode<fp8::E4M3FN>(gauss(rng));
  for (uint8_t& x : b) x = fp8::Encode<fp8::E4M3FN>(gauss(rng));
  std::vector<float> sa(m * kb, 0.5f), sb(((n + 127) / 128) * kb, 2.0f);
  auto ra = Upload(gpu, a.data(), a.size());
  auto rb = Upload(gpu, b.data(), b.size());
  auto rsa = Upload(gpu, sa.data(), sa.size() * 4);
  auto rsb = Upload(gpu, sb.data(), sb.size() * 4);
  auto rd = gpu.Allocate(0, m * n * 2).value();
  GemmArgs g;
  g.variant = GemmVariant::kNT;
  g.a = MakeTensor(ra->data(), DType::kE4M3FN, {m, k}, k, kGpu);
  g.a_scales = MakeTensor(rsa->data(), DType::kF32, {m, kb}, kb, kGpu);
  g.b = MakeTensor(rb->data(), DType::kE4M3FN, {n, k}, k, kGpu);
  g.b_scales = MakeTensor(rsb->data(), DType::kF32, {(n + 127) / 128, kb}, kb, kGpu);
  g.d = MakeTensor(rd->data(), DType::kBF16, {m, n}, n, kGpu);
  auto stream = gpu.CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status();

  // Configures `g` as the executor does, runs it, and returns D.
  auto run = [&](GemmKernelConfig* chosen) {
    absl::StatusOr<ValidatedOp> op = Validate(Op(g));
    EXPECT_TRUE(op.ok()) << op.status();
    autotune.Configure(&gpu, 0, *op);
    *chosen = *op->mutable_gemm_config();
    EXPECT_TRUE(gpu.Run(*op, **stream, nullptr).ok());
    EXPECT_TRUE(gpu.Synchronize(**stream).ok());
    std::vector<uint16_t> d(m * n);
    EXPECT_EQ(cudaMemcpy(d.data(), rd->data(), d.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    return d;
  };

  GemmKernelConfig chosen;
  const std::vector<uint16_t> wgmma = run(&chosen);
  EXPECT_TRUE(std::holds_alternative<GemmConfig>(chosen));

  const ConfigSpace* space = ConfigSpaceRegistry::Builtin().Find("gemm", "nt", "sm_90");
  ASSERT_NE(space, nullptr);
  absl::StatusOr<TuneKey> key = GemmTuneKeyFromArgs(g, gpu.Properties(0), space->kernel_version);
  ASSERT_TRUE(key.ok()) << key.status();
  ASSERT_TRUE(autotune.Pin(key->ToString(), "tm128.tn128.ts3").ok());
  const std::vector<uint16_t> tile = run(&chosen);
  EXPECT_EQ(chosen, GemmKernelConfig(TileGemmConfig{128, 128, 3}));
  // Same product, another kernel: agree to rounding (2^-6 relative plus 2^-10 of the largest).
  float max_abs = 0;
  for (uint16_t v : wgmma) max_abs = std::max(max_abs, std::fabs(Bf16ToFloat(v)));
  ASSERT_GT(max_abs, 0.0f);
  int bad = 0;
  for (size_t i = 0; i < wgmma.size(); ++i) {
    const float w = Bf16ToFloat(wgmma[i]), t = Bf16ToFloat(tile[i]);
    if (!(std::fabs(w - t) <= std::fabs(w) / 64 + max_abs / 1024)) ++bad;
  }
  EXPECT_EQ(bad, 0);

  // A tile only AMD's space holds: the tile GEMM takes it, and replaces it with its heuristic's
  // (counted): proof that the pin's op ran on the tile GEMM and not on the wgmma kernel.
  ASSERT_TRUE(autotune.Pin(key->ToString(), "tm64.tn64.ts2").ok());
  const uint64_t fallbacks = tile_gemm::TileGemmConfigFallbacks();
  run(&chosen);
  EXPECT_EQ(tile_gemm::TileGemmConfigFallbacks(), fallbacks + 1);
  autotune.Stop();
}

}  // namespace
}  // namespace kd
