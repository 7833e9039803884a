// One test per QuantizeOp validation rule: the exact status code and the field the message names.
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/registry.h"
#include "tests/kernels/quantize_reference.h"

namespace kd {
namespace {

using ::testing::HasSubstr;
using testing_ref::HostTensor;

// A valid op of each granularity on X (256, 384) bf16 -> e4m3fn, that a test then breaks once.
class QuantizeValidationTest : public ::testing::Test {
 protected:
  static constexpr int64_t kM = 256, kK = 384;

  QuantizeArgs Valid(QuantGranularity g) {
    QuantizeArgs a;
    a.input = Keep(DType::kBF16, {kM, kK});
    a.output = Keep(DType::kE4M3FN, {kM, kK});
    a.granularity = g;
    switch (g) {
      case QuantGranularity::k128x1:
        a.scales = Keep(DType::kF32, {2, kK});
        break;
      case QuantGranularity::k128x128:
        a.scales = Keep(DType::kF32, {2, 3});
        break;
      case QuantGranularity::kPerRow:
        a.scales = Keep(DType::kF32, {kM, 1});
        break;
      case QuantGranularity::kPerTensor:
        a.scales = Keep(DType::kF32, {1});
        break;
      case QuantGranularity::kMx1x32:
        a.scales = Keep(DType::kE8M0, {kM, kK / 32});
        break;
      case QuantGranularity::kJaggedColwise:
        a.transpose_output = true;
        a.output = Keep(DType::kE4M3FN, {kK, kM});
        a.group_ends = Keep(DType::kI64, {3});
        a.scales = Keep(DType::kF32, {3, kK});
        break;
      case QuantGranularity::kJaggedRowwise:
        a.group_ends = Keep(DType::kI32, {3});
        a.scales = Keep(DType::kF32, {kM, kK / 128});
        break;
      default:
        a.scales = Keep(DType::kF32, {kM, kK / 128});
        break;
    }
    return a;
  }
  QuantizeArgs ValidDual() {
    QuantizeArgs a = Valid(QuantGranularity::k1x128);
    a.output_t = Keep(DType::kE4M3FN, {kK, kM});
    a.scales_t = Keep(DType::kF32, {kK, kM / 128});
    return a;
  }
  Tensor Keep(DType dtype, std::vector<int64_t> shape) {
    held_.push_back(std::make_unique<HostTensor>(dtype, shape));
    return held_.back()->t;
  }
  void ExpectValid(const QuantizeArgs& a) { EXPECT_TRUE(Validate(a).ok()) << Validate(a).status(); }
  void ExpectInvalid(const QuantizeArgs& a, const std::string& substring) {
    const absl::Status s = Validate(a).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(substring));
  }

  std::vector<std::unique_ptr<HostTensor>> held_;
};

TEST_F(QuantizeValidationTest, EveryBaseOpIsValid) {
  for (int g = 1; g <= 8; ++g) ExpectValid(Valid(static_cast<QuantGranularity>(g)));
  ExpectValid(ValidDual());
}

TEST_F(QuantizeValidationTest, MissingInputIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k1x128);
  a.input = Tensor();
  ExpectInvalid(a, "input is required");
}

TEST_F(QuantizeValidationTest, InputOfRankThreeIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k1x128);
  a.input = Keep(DType::kBF16, {2, kM, kK});
  ExpectInvalid(a, "input.shape");
}

TEST_F(QuantizeValidationTest, Fp8InputIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k1x128);
  a.input = Keep(DType::kE4M3FN, {kM, kK});
  ExpectInvalid(a, "input.dtype=e4m3fn");
}

TEST_F(QuantizeValidationTest, NonFp8OutputIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k1x128);
  a.output = Keep(DType::kBF16, {kM, kK});
  ExpectInvalid(a, "output.dtype=bf16");
}

TEST_F(QuantizeValidationTest, UnspecifiedOrUnknownGranularityIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k1x128);
  a.granularity = QuantGranularity::kInvalid;
  ExpectInvalid(a, "granularity=0");
  a.granularity = static_cast<QuantGranularity>(42);
  ExpectInvalid(a, "granularity=42");
}

TEST_F(QuantizeValidationTest, UnknownScaleFormatIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k1x128);
  a.scale_format = static_cast<ScaleFormat>(9);
  ExpectInvalid(a, "scale_format=9");
}

TEST_F(QuantizeValidationTest, UnknownScaleLayoutIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k1x128);
  a.scale_layout = static_cast<ScaleLayout>(9);
  ExpectInvalid(a, "scale_layout=9");
}

TEST_F(QuantizeValidationTest, UnknownMxRoundingIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::kMx1x32);
  a.mx_rounding = static_cast<MxRounding>(9);
  ExpectInvalid(a, "mx_rounding=9");
}

TEST_F(QuantizeValidationTest, NonPositiveOrNonFiniteEpsIsInvalid) {
  for (float eps : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), HUGE_VALF}) {
    QuantizeArgs a = Valid(QuantGranularity::k1x128);
    a.eps = eps;
    ExpectInvalid(a, "must be finite and > 0");
  }
}

TEST_F(QuantizeValidationTest, EpsSoSmallThatTheScaleOverflowsIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k1x128);
  a.eps = 1e-37f;
  ExpectInvalid(a, "overflows fp32");
  a.output = Keep(DType::kE4M3FNUZ, {kM, kK});
  a.eps = 1e-36f;  // 240/1e-36 is finite, 448/1e-36 is not
  ExpectValid(a);
}

TEST_F(QuantizeValidationTest, JaggedRowwiseWithTransposeIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::kJaggedRowwise);
  a.transpose_output = true;
  ExpectInvalid(a, "transpose_output must be false for jagged_rowwise");
}

TEST_F(QuantizeValidationTest, JaggedColwiseWithoutTransposeIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::kJaggedColwise);
  a.transpose_output = false;
  ExpectInvalid(a, "transpose_output must be true for jagged_colwise");
}

TEST_F(QuantizeValidationTest, KBlockMajorScalesOutside1x128AreInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k128x128);
  a.scale_layout = ScaleLayout::kKBlockMajor;
  ExpectInvalid(a, "scale_layout=k_block_major is only defined for 1x128");
}

TEST_F(QuantizeValidationTest, MxWithPow2ScaleFormatIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::kMx1x32);
  a.scale_format = ScaleFormat::kPow2;
  ExpectInvalid(a, "scale_format=pow2 is not defined for mx1x32");
}

TEST_F(QuantizeValidationTest, MxToE4m3fnuzIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::kMx1x32);
  a.output = Keep(DType::kE4M3FNUZ, {kM, kK});
  ExpectInvalid(a, "output.dtype=e4m3fnuz is not an MX element format");
}

TEST_F(QuantizeValidationTest, JaggedWithoutGroupEndsIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::kJaggedRowwise);
  a.group_ends = Tensor();
  ExpectInvalid(a, "group_ends is required");
}

TEST_F(QuantizeValidationTest, GroupEndsOfFloatIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::kJaggedColwise);
  a.group_ends = Keep(DType::kF32, {3});
  ExpectInvalid(a, "group_ends.dtype=f32");
}

TEST_F(QuantizeValidationTest, GroupEndsOutsideJaggedIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k1x128);
  a.group_ends = Keep(DType::kI64, {2});
  ExpectInvalid(a, "group_ends is only defined for jagged");
}

TEST_F(QuantizeValidationTest, DualPassOutside1x128And128x128IsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k128x1);
  a.output_t = Keep(DType::kE4M3FN, {kK, kM});
  a.scales_t = Keep(DType::kF32, {kK / 128, kM});
  ExpectInvalid(a, "only defined for 1x128 and 128x128, not 128x1");
}

// 128x128 of X and of Xᵀ: scales_t holds one scale per tile of Xᵀ, (K/128, M/128), row-major.
TEST_F(QuantizeValidationTest, DualPass128x128TakesTileScalesOfTheTranspose) {
  QuantizeArgs a = Valid(QuantGranularity::k128x128);
  a.output_t = Keep(DType::kE4M3FN, {kK, kM});
  a.scales_t = Keep(DType::kF32, {kK / 128, kM / 128});
  ExpectValid(a);
  a.scales_t = Keep(DType::kF32, {kK, kM / 128});  // the 1x128 shape
  ExpectInvalid(a, "scales_t.shape (384, 2) must be (3, 2)");
  a.scales_t = Keep(DType::kBF16, {kK / 128, kM / 128});
  ExpectInvalid(a, "scales_t.dtype=bf16 must be one of f32");
  a.scales_t = Keep(DType::kF32, {kK / 128, kM / 128});
  a.scale_layout = ScaleLayout::kKBlockMajor;
  ExpectInvalid(a, "scale_layout=k_block_major is only defined for 1x128");
  a.scale_layout = ScaleLayout::kRowMajor;
  a.input = Keep(DType::kBF16, {200, kK});
  a.output = Keep(DType::kE4M3FN, {200, kK});
  a.scales = Keep(DType::kF32, {2, kK / 128});
  a.output_t = Keep(DType::kE4M3FN, {kK, 200});
  ExpectInvalid(a, "input.shape[0]=200 is not a multiple of block 128 (M, for output_t)");
}

TEST_F(QuantizeValidationTest, DualPassWithTransposeIsInvalid) {
  QuantizeArgs a = ValidDual();
  a.transpose_output = true;
  ExpectInvalid(a, "transpose_output must be false with output_t");
}

TEST_F(QuantizeValidationTest, DualPassNeedsBothOutputs) {
  QuantizeArgs a = ValidDual();
  a.scales_t = Tensor();
  ExpectInvalid(a, "scales_t is required when output_t is set");
  a = ValidDual();
  a.output_t = Tensor();
  ExpectInvalid(a, "output_t is required when scales_t is set");
}

TEST_F(QuantizeValidationTest, OutputOfTheWrongShapeIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k1x128);
  a.output = Keep(DType::kE4M3FN, {kK, kM});
  ExpectInvalid(a, "output.shape (384, 256) must be (256, 384)");
  a = Valid(QuantGranularity::k1x128);
  a.transpose_output = true;  // now the output must be Xᵀ
  a.scales = Keep(DType::kF32, {kK, kM / 128});
  ExpectInvalid(a, "output.shape (256, 384) must be (384, 256)");
}

TEST_F(QuantizeValidationTest, KNotAMultipleOf128For1x128IsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k1x128);
  a.input = Keep(DType::kBF16, {kM, 200});
  a.output = Keep(DType::kE4M3FN, {kM, 200});
  ExpectInvalid(a, "input.shape[1]=200 is not a multiple of block 128 (K)");
}

TEST_F(QuantizeValidationTest, MNotAMultipleOf128ForTransposed1x128IsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k1x128);
  a.input = Keep(DType::kBF16, {200, kK});
  a.output = Keep(DType::kE4M3FN, {kK, 200});
  a.transpose_output = true;
  ExpectInvalid(a, "input.shape[0]=200 is not a multiple of block 128 (M, the columns of Xᵀ)");
}

TEST_F(QuantizeValidationTest, ScalesOfTheWrongShapeOrDtypeAreInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k1x128);
  a.scales = Keep(DType::kF32, {kK / 128, kM});  // the K-block-major shape, layout row-major
  ExpectInvalid(a, "scales.shape (3, 256) must be (256, 3)");
  a.scale_layout = ScaleLayout::kKBlockMajor;
  ExpectValid(a);
  a.scales = Keep(DType::kBF16, {kK / 128, kM});
  ExpectInvalid(a, "scales.dtype=bf16");
  a.scales = Tensor();
  ExpectInvalid(a, "scales is required");
}

TEST_F(QuantizeValidationTest, ScaleShapesFollowTheGranularity) {
  QuantizeArgs a = Valid(QuantGranularity::k128x1);
  a.scales = Keep(DType::kF32, {kM / 128, kK / 128});
  ExpectInvalid(a, "scales.shape (2, 3) must be (2, 384)");
  a = Valid(QuantGranularity::k128x128);
  a.scales = Keep(DType::kF32, {2, kK});
  ExpectInvalid(a, "scales.shape (2, 384) must be (2, 3)");
  a = Valid(QuantGranularity::kPerRow);
  a.scales = Keep(DType::kF32, {kM});
  ExpectInvalid(a, "scales.shape (256) has rank 1; must be 2");
  a = Valid(QuantGranularity::kPerTensor);
  a.scales = Keep(DType::kF32, {2});
  ExpectInvalid(a, "scales.shape (2) must be (1)");
  a = Valid(QuantGranularity::kJaggedColwise);
  a.scales = Keep(DType::kF32, {3, kM});
  ExpectInvalid(a, "scales.shape (3, 256) must be (3, 384)");
}

TEST_F(QuantizeValidationTest, PartialRowBlocksAreAllowedFor128x1And128x128) {
  for (QuantGranularity g : {QuantGranularity::k128x1, QuantGranularity::k128x128}) {
    QuantizeArgs a = Valid(g);
    a.input = Keep(DType::kBF16, {300, kK});
    a.output = Keep(DType::kE4M3FN, {300, kK});
    a.scales = Keep(DType::kF32, {3, g == QuantGranularity::k128x1 ? kK : kK / 128});
    ExpectValid(a);
  }
}

TEST_F(QuantizeValidationTest, KNotAMultipleOf128For128x128IsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k128x128);
  a.input = Keep(DType::kBF16, {kM, 200});
  a.output = Keep(DType::kE4M3FN, {kM, 200});
  ExpectInvalid(a, "input.shape[1]=200 is not a multiple of block 128");
}

TEST_F(QuantizeValidationTest, KNotAMultipleOf32ForMxIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::kMx1x32);
  a.input = Keep(DType::kBF16, {kM, 100});
  a.output = Keep(DType::kE4M3FN, {kM, 100});
  ExpectInvalid(a, "input.shape[1]=100 is not a multiple of block 32");
}

TEST_F(QuantizeValidationTest, MxScalesMustBeE8m0OrU8) {
  QuantizeArgs a = Valid(QuantGranularity::kMx1x32);
  a.scales = Keep(DType::kF32, {kM, kK / 32});
  ExpectInvalid(a, "scales.dtype=f32 must be one of e8m0, u8");
  a.scales = Keep(DType::kU8, {kM, kK / 32});
  ExpectValid(a);
}

TEST_F(QuantizeValidationTest, DualPassWithMNotAMultipleOf128IsInvalid) {
  QuantizeArgs a = ValidDual();
  a.input = Keep(DType::kBF16, {200, kK});
  a.output = Keep(DType::kE4M3FN, {200, kK});
  a.scales = Keep(DType::kF32, {200, kK / 128});
  ExpectInvalid(a, "input.shape[0]=200 is not a multiple of block 128 (M, for output_t)");
}

TEST_F(QuantizeValidationTest, DualPassOutputTMustMatchOutputDtypeAndShape) {
  QuantizeArgs a = ValidDual();
  a.output_t = Keep(DType::kE5M2, {kK, kM});
  ExpectInvalid(a, "output_t.dtype=e5m2 must be one of e4m3fn");
  a.output_t = Keep(DType::kE4M3FN, {kM, kK});
  ExpectInvalid(a, "output_t.shape (256, 384) must be (384, 256)");
}

TEST_F(QuantizeValidationTest, DualPassScalesTFollowTheLayout) {
  QuantizeArgs a = ValidDual();
  a.scale_layout = ScaleLayout::kKBlockMajor;
  a.scales = Keep(DType::kF32, {kK / 128, kM});
  ExpectInvalid(a, "scales_t.shape (384, 2) must be (2, 384)");
  a.scales_t = Keep(DType::kF32, {kM / 128, kK});
  ExpectValid(a);
}

TEST_F(QuantizeValidationTest, OutputOverlappingTheInputIsInvalid) {
  QuantizeArgs a = Valid(QuantGranularity::k1x128);
  a.output.data = a.input.data;
  ExpectInvalid(a, "output overlaps input");
}

// Group ends are data: the CPU backend copies and checks them when the op runs.
class QuantizeGroupEndsTest : public QuantizeValidationTest,
                              public ::testing::WithParamInterface<std::vector<int64_t>> {};

TEST_P(QuantizeGroupEndsTest, BadGroupEndsFailTheRunWithInvalidArgument) {
  std::unique_ptr<Backend> cpu = CreateCpuBackend(2);
  std::unique_ptr<Stream> stream = cpu->CreateStream(0).value();
  for (QuantGranularity g : {QuantGranularity::kJaggedRowwise, QuantGranularity::kJaggedColwise}) {
    QuantizeArgs a = Valid(g);
    for (int i = 0; i < 3; ++i) {
      if (a.group_ends.dtype == DType::kI64)
        a.group_ends.as<int64_t>()[i] = GetParam()[i];
      else
        a.group_ends.as<int32_t>()[i] = static_cast<int32_t>(GetParam()[i]);
    }
    absl::StatusOr<ValidatedOp> op = Validate(a);
    ASSERT_TRUE(op.ok()) << op.status();
    const absl::Status s = cpu->Run(*op, *stream, {});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("group_ends["));
  }
}

INSTANTIATE_TEST_SUITE_P(Violations, QuantizeGroupEndsTest,
                         ::testing::Values(std::vector<int64_t>{100, 50, 256},   // decreasing
                                           std::vector<int64_t>{-1, 50, 256},    // negative
                                           std::vector<int64_t>{100, 200, 255},  // last != M
                                           std::vector<int64_t>{100, 200, 257}));

TEST_F(QuantizeValidationTest, GoodGroupEndsRun) {
  std::unique_ptr<Backend> cpu = CreateCpuBackend(2);
  std::unique_ptr<Stream> stream = cpu->CreateStream(0).value();
  QuantizeArgs a = Valid(QuantGranularity::kJaggedColwise);
  const int64_t ends[3] = {0, 100, kM};
  for (int i = 0; i < 3; ++i) a.group_ends.as<int64_t>()[i] = ends[i];
  absl::StatusOr<ValidatedOp> op = Validate(a);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_TRUE(cpu->Run(*op, *stream, {}).ok());
  EXPECT_TRUE(cpu->Supports(*op).ok());
}

}  // namespace
}  // namespace kd
