// The GPU backends' choice of GEMM kernel per architecture (kernels/gpu/gemm_dispatch.h).
// Host-only: the decision the CUDA backend's Supports and Run ask, checked for every architecture
// without a device.
#include "kernels/gpu/gemm_dispatch.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/gemm_config.h"
#include "kerneld/kernels/ops.h"

namespace kd {
namespace {

constexpr bool kWgmmaBuilt = true;

GemmArgs Args(const GemmKernelConfig& config = {}, DType a = DType::kE4M3FN,
              DType b = DType::kE4M3FN) {
  GemmArgs g;
  g.variant = GemmVariant::kNT;
  g.a.dtype = a;
  g.b.dtype = b;
  g.config = config;
  return g;
}

GemmKernel Choose(absl::string_view arch, const GemmArgs& args = Args(),
                  bool wgmma_built = kWgmmaBuilt) {
  absl::StatusOr<GemmKernel> k = ChooseGemmKernel(args, arch, "dev", wgmma_built);
  EXPECT_TRUE(k.ok()) << arch << ": " << k.status();
  return k.ok() ? *k : GemmKernel::kWgmma;
}

TEST(GemmDispatchTest, HopperRunsTheWgmmaKernelByDefault) {
  EXPECT_EQ(Choose("sm_90"), GemmKernel::kWgmma);
  EXPECT_EQ(Choose("sm_90a"), GemmKernel::kWgmma);
  // A tuned wgmma or cuBLASLt config, or a CPU one that is no kernel's here, keeps it.
  EXPECT_EQ(Choose("sm_90", Args(GemmConfig{})), GemmKernel::kWgmma);
  EXPECT_EQ(Choose("sm_90", Args(CublasLtGemmConfig{})), GemmKernel::kWgmma);
  EXPECT_EQ(Choose("sm_90", Args(CpuGemmConfig{})), GemmKernel::kWgmma);
}

TEST(GemmDispatchTest, HopperRunsTheTileGemmForItsConfigAndTheFormatsWgmmaLacks) {
  EXPECT_EQ(Choose("sm_90", Args(TileGemmConfig{128, 128, 3})), GemmKernel::kTile);
  EXPECT_EQ(Choose("sm_90a", Args(TileGemmConfig{64, 128, 3})), GemmKernel::kTile);
  // The wgmma kernel reads e4m3fn x e4m3fn only; e5m2 goes to the tile GEMM, which reads it, and
  // so does e4m3fnuz, which the tile GEMM then refuses with FAILED_PRECONDITION.
  EXPECT_EQ(Choose("sm_90", Args({}, DType::kE4M3FN, DType::kE5M2)), GemmKernel::kTile);
  EXPECT_EQ(Choose("sm_90", Args(GemmConfig{}, DType::kE5M2, DType::kE5M2)), GemmKernel::kTile);
  EXPECT_EQ(Choose("sm_90", Args({}, DType::kE4M3FNUZ, DType::kE4M3FNUZ)), GemmKernel::kTile);
  // A build without the sm_90a kernel runs the tile GEMM whatever the config.
  EXPECT_EQ(Choose("sm_90", Args(), false), GemmKernel::kTile);
  EXPECT_EQ(Choose("sm_90", Args(GemmConfig{}), false), GemmKernel::kTile);
}

TEST(GemmDispatchTest, OtherFp8DevicesRunTheTileGemm) {
  for (const char* arch : {"sm_89", "sm_100", "sm_120", "gfx940", "gfx941", "gfx942", "gfx950"}) {
    EXPECT_EQ(Choose(arch), GemmKernel::kTile) << arch;
    // The wgmma kernel's config is not theirs: the tile heuristic's shape runs.
    EXPECT_EQ(Choose(arch, Args(GemmConfig{})), GemmKernel::kTile) << arch;
    EXPECT_EQ(Choose(arch, Args(TileGemmConfig{})), GemmKernel::kTile) << arch;
    EXPECT_EQ(Choose(arch, Args({}, DType::kE4M3FNUZ, DType::kE4M3FNUZ)), GemmKernel::kTile)
        << arch;
  }
}

TEST(GemmDispatchTest, DevicesWithoutFp8MatrixInstructionsAreUnimplemented) {
  for (const char* arch : {"sm_80", "sm_86", "sm_87", "gfx90a", "gfx908", "", "x86_64"}) {
    for (const GemmKernelConfig& config :
         {GemmKernelConfig{}, GemmKernelConfig{TileGemmConfig{}}, GemmKernelConfig{GemmConfig{}}}) {
      const absl::StatusOr<GemmKernel> k =
          ChooseGemmKernel(Args(config), arch, "AMD Instinct MI250X", kWgmmaBuilt);
      ASSERT_EQ(k.status().code(), absl::StatusCode::kUnimplemented) << arch;
      EXPECT_NE(k.status().message().find("AMD Instinct MI250X"), absl::string_view::npos);
      EXPECT_NE(k.status().message().find("FP8 matrix instructions"), absl::string_view::npos);
      if (*arch != '\0') {
        EXPECT_NE(k.status().message().find(arch), absl::string_view::npos) << k.status();
      }
    }
  }
}

}  // namespace
}  // namespace kd
