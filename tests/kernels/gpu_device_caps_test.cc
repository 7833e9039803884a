// The FP8 matrix-core rule of kernels/gpu/device_caps.h: which GEMM operand formats each GPU
// architecture's matrix cores take, and the status a GEMM gets otherwise. Host-only: the GPU
// backends consult the same table on the device they run on.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/gpu/device_caps.h"

namespace kd {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(GpuDeviceCapsTest, FindsArchitecturesWithOrWithoutTargetFeatures) {
  ASSERT_NE(FindGpuArch("gfx942"), nullptr);
  EXPECT_EQ(FindGpuArch("gfx942:sramecc+:xnack-"), FindGpuArch("gfx942"));
  EXPECT_EQ(FindGpuArch("gfx942")->wave_size, 64);
  EXPECT_EQ(FindGpuArch("gfx90a")->wave_size, 64);
  EXPECT_EQ(FindGpuArch("sm_90")->wave_size, 32);
  EXPECT_EQ(FindGpuArch("gfx1100"), nullptr);
  EXPECT_EQ(FindGpuArch(""), nullptr);
}

TEST(GpuDeviceCapsTest, EachArchitectureTakesItsOwnFp8Encoding) {
  const struct {
    const char* arch;
    Fp8MatrixFormats fp8;
  } rows[] = {{"sm_80", Fp8MatrixFormats::kNone},  {"sm_89", Fp8MatrixFormats::kOcp},
              {"sm_90", Fp8MatrixFormats::kOcp},   {"sm_100", Fp8MatrixFormats::kOcp},
              {"gfx90a", Fp8MatrixFormats::kNone}, {"gfx940", Fp8MatrixFormats::kFnuz},
              {"gfx942", Fp8MatrixFormats::kFnuz}, {"gfx950", Fp8MatrixFormats::kOcp}};
  for (const auto& row : rows) {
    SCOPED_TRACE(row.arch);
    ASSERT_NE(FindGpuArch(row.arch), nullptr);
    EXPECT_EQ(FindGpuArch(row.arch)->fp8, row.fp8);
  }
}

TEST(GpuDeviceCapsTest, MatchingOperandsPass) {
  EXPECT_TRUE(CheckFp8MatrixOperands("gfx942", "hip:0", DType::kE4M3FNUZ, DType::kE4M3FNUZ).ok());
  EXPECT_TRUE(CheckFp8MatrixOperands("sm_90", "cuda:0", DType::kE4M3FN, DType::kE4M3FN).ok());
  EXPECT_TRUE(CheckFp8MatrixOperands("sm_90", "cuda:0", DType::kE5M2, DType::kE4M3FN).ok());
  EXPECT_TRUE(CheckFp8MatrixOperands("gfx950", "hip:0", DType::kE4M3FN, DType::kE5M2).ok());
  EXPECT_TRUE(
      CheckFp8MatrixOperands("gfx942:sramecc+:xnack-", "hip:1", DType::kE4M3FNUZ, DType::kE4M3FNUZ)
          .ok());
}

TEST(GpuDeviceCapsTest, TheOtherEncodingIsAFailedPreconditionNamingFormatAndDevice) {
  const absl::Status mi300 = CheckFp8MatrixOperands("gfx942", "hip:0 (AMD Instinct MI300X)",
                                                    DType::kE4M3FN, DType::kE4M3FNUZ);
  EXPECT_EQ(mi300.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(mi300.message()), AllOf(HasSubstr("a=e4m3fn"), HasSubstr("gfx942"),
                                                  HasSubstr("MI300X"), HasSubstr("e4m3fnuz")));

  const absl::Status h100 =
      CheckFp8MatrixOperands("sm_90", "cuda:0 (NVIDIA H100)", DType::kE4M3FN, DType::kE4M3FNUZ);
  EXPECT_EQ(h100.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(h100.message()),
              AllOf(HasSubstr("b=e4m3fnuz"), HasSubstr("sm_90"), HasSubstr("H100")));

  // e5m2 is OCP: not what MI300's matrix cores read.
  EXPECT_EQ(CheckFp8MatrixOperands("gfx942", "hip:0", DType::kE4M3FNUZ, DType::kE5M2).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CheckFp8MatrixOperands("gfx950", "hip:0", DType::kE4M3FNUZ, DType::kE4M3FN).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(GpuDeviceCapsTest, NoFp8MatrixInstructionsIsUnimplemented) {
  const absl::Status mi250 =
      CheckFp8MatrixOperands("gfx90a", "hip:0", DType::kE4M3FNUZ, DType::kE4M3FNUZ);
  EXPECT_EQ(mi250.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(mi250.message()),
              AllOf(HasSubstr("gfx90a"), HasSubstr("no FP8 matrix instructions")));
  EXPECT_EQ(CheckFp8MatrixOperands("sm_80", "cuda:0", DType::kE4M3FN, DType::kE4M3FN).code(),
            absl::StatusCode::kUnimplemented);
  const absl::Status unknown =
      CheckFp8MatrixOperands("gfx1100", "hip:0", DType::kE4M3FN, DType::kE4M3FN);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(unknown.message()), HasSubstr("gfx1100"));
}

TEST(GpuDeviceCapsTest, NonFp8OperandsAreLeftToTheKernel) {
  EXPECT_TRUE(CheckFp8MatrixOperands("sm_90", "cuda:0", DType::kBF16, DType::kE4M3FN).ok());
}

}  // namespace
}  // namespace kd
