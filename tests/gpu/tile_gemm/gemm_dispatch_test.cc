// The GPU backends' choice of GEMM kernel per architecture (kernels/gpu/gemm_dispatch.h).
// Host-only: the decision the CUDA backend's Supports and Run ask, checked for every architecture
// without a device.
#include "kernels/gpu/gemm_dispatch.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/gemm_config.h"

namespace kd {
namespace {

constexpr bool kWgmmaBuilt = true;

GemmKernel Choose(absl::string_view arch, const GemmKernelConfig& config = {},
                  bool wgmma_built = kWgmmaBuilt) {
  absl::StatusOr<GemmKernel> k = ChooseGemmKernel(arch, "dev", config, wgmma_built);
  EXPECT_TRUE(k.ok()) << arch << ": " << k.status();
  return k.ok() ? *k : GemmKernel::kWgmma;
}

TEST(GemmDispatchTest, HopperRunsTheWgmmaKernelByDefault) {
  EXPECT_EQ(Choose("sm_90"), GemmKernel::kWgmma);
  EXPECT_EQ(Choose("sm_90a"), GemmKernel::kWgmma);
  // A tuned wgmma config, or a CPU one that is no kernel's here, keeps the wgmma kernel.
  EXPECT_EQ(Choose("sm_90", GemmConfig{}), GemmKernel::kWgmma);
  EXPECT_EQ(Choose("sm_90", CpuGemmConfig{}), GemmKernel::kWgmma);
}

TEST(GemmDispatchTest, HopperRunsTheTileGemmOnlyWhenItsConfigIsGiven) {
  EXPECT_EQ(Choose("sm_90", TileGemmConfig{128, 128, 3}), GemmKernel::kTile);
  EXPECT_EQ(Choose("sm_90a", TileGemmConfig{64, 128, 3}), GemmKernel::kTile);
  // A build without the sm_90a kernel runs the tile GEMM whatever the config.
  EXPECT_EQ(Choose("sm_90", {}, false), GemmKernel::kTile);
  EXPECT_EQ(Choose("sm_90", GemmConfig{}, false), GemmKernel::kTile);
}

TEST(GemmDispatchTest, OtherFp8DevicesRunTheTileGemm) {
  for (const char* arch : {"sm_89", "sm_100", "sm_120", "gfx940", "gfx941", "gfx942", "gfx950"}) {
    EXPECT_EQ(Choose(arch), GemmKernel::kTile) << arch;
    // The wgmma kernel's config is not theirs: the tile heuristic's shape runs.
    EXPECT_EQ(Choose(arch, GemmConfig{}), GemmKernel::kTile) << arch;
    EXPECT_EQ(Choose(arch, TileGemmConfig{}), GemmKernel::kTile) << arch;
  }
}

TEST(GemmDispatchTest, DevicesWithoutFp8MatrixInstructionsAreUnimplemented) {
  for (const char* arch : {"sm_80", "sm_86", "sm_87", "gfx90a", "gfx908", "", "x86_64"}) {
    for (const GemmKernelConfig& config :
         {GemmKernelConfig{}, GemmKernelConfig{TileGemmConfig{}}, GemmKernelConfig{GemmConfig{}}}) {
      const absl::StatusOr<GemmKernel> k =
          ChooseGemmKernel(arch, "AMD Instinct MI250X", config, kWgmmaBuilt);
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
