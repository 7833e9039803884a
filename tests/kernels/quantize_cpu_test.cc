// Every quantize variant on the CPU backend (through Validate and Backend::Run) against the plain
// reference of tests/kernels/quantize_reference.h, bit for bit, on inputs with edge cases; plus
// the edge cases of the QuantizeOp contract spelled out one by one.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/fp8.h"
#include "kerneld/kernels/registry.h"
#include "tests/kernels/quantize_reference.h"

namespace kd {
namespace {

using testing_ref::Bits;
using testing_ref::HostTensor;
using testing_ref::RefParams;
using testing_ref::RefQuantize;
using testing_ref::RefResult;

struct Case {
  std::string name;
  QuantGranularity g;
  bool transpose;
  int64_t m, k;
  DType in, out;
  bool pow2 = false;
  ScaleLayout layout = ScaleLayout::kRowMajor;
  MxRounding rounding = MxRounding::kFloor;
  std::vector<int64_t> ends = {};
  bool dual = false;
  bool edge_cases = true;
  float eps = 1e-12f;
  DType ends_dtype = DType::kI64;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The scale tensor shape of `c` for Y (rows, cols).
std::vector<int64_t> ScaleShape(const Case& c, int64_t rows, int64_t cols) {
  switch (c.g) {
    case QuantGranularity::k128x1:
      return {CeilDiv(rows, 128), cols};
    case QuantGranularity::k128x128:
      return {CeilDiv(rows, 128), cols / 128};
    case QuantGranularity::kPerRow:
      return {rows, 1};
    case QuantGranularity::kPerTensor:
      return {1};
    case QuantGranularity::kMx1x32:
      return {rows, cols / 32};
    case QuantGranularity::kJaggedColwise:
      return {static_cast<int64_t>(c.ends.size()), c.k};
    default:
      if (c.layout == ScaleLayout::kKBlockMajor) return {cols / 128, rows};
      return {rows, cols / 128};
  }
}

class Runner {
 public:
  Runner() : backend_(CreateCpuBackend(2)) { stream_ = backend_->CreateStream(0).value(); }
  absl::Status Run(const QuantizeArgs& args) {
    absl::StatusOr<ValidatedOp> op = Validate(args);
    if (!op.ok()) return op.status();
    const absl::Status s = backend_->Supports(*op);
    if (!s.ok()) return s;
    return backend_->Run(*op, *stream_, {});
  }

 private:
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Stream> stream_;
};

// Checks `codes`/`scales` of a run against the reference for Y (rows, cols).
void ExpectMatches(const Case& c, const RefResult& ref, HostTensor& out, HostTensor& scales,
                   int64_t rows, int64_t cols, bool kbm, const std::string& what) {
  int64_t code_mismatch = 0;
  for (int64_t i = 0; i < rows * cols; ++i) {
    if (out.as<uint8_t>()[i] != ref.codes[i] && code_mismatch++ < 5) {
      ADD_FAILURE() << what << " code at (" << i / cols << ", " << i % cols << "): got 0x"
                    << std::hex << int{out.as<uint8_t>()[i]} << ", expected 0x"
                    << int{ref.codes[i]};
    }
  }
  EXPECT_EQ(code_mismatch, 0) << what;
  if (c.g == QuantGranularity::kMx1x32) {
    for (size_t i = 0; i < ref.e8m0.size(); ++i) {
      ASSERT_EQ(scales.as<uint8_t>()[i], ref.e8m0[i]) << what << " e8m0 scale " << i;
    }
    return;
  }
  const int64_t blocks_per_row = kbm ? cols / 128 : 0;
  for (size_t i = 0; i < ref.scales.size(); ++i) {
    // Reference scales are in their natural row-major order; K-block-major stores (r, b) at (b, r).
    const size_t at = kbm ? (i % blocks_per_row) * rows + i / blocks_per_row : i;
    ASSERT_EQ(Bits(scales.as<float>()[at]), Bits(ref.scales[i])) << what << " scale " << i;
  }
}

class QuantizeCpuTest : public ::testing::TestWithParam<Case> {};

TEST_P(QuantizeCpuTest, MatchesReferenceBitExactly) {
  const Case& c = GetParam();
  const float fp8_max = Fp8Max(c.out);
  HostTensor input =
      testing_ref::MakeInput(c.in, c.m, c.k, 42 + c.m * 7 + c.k, c.edge_cases, fp8_max);
  std::vector<float> x(c.m * c.k);
  for (int64_t i = 0; i < c.m * c.k; ++i) x[i] = testing_ref::InputValue(input, i);

  const int64_t rows = c.transpose ? c.k : c.m, cols = c.transpose ? c.m : c.k;
  HostTensor output(c.out, {rows, cols});
  const DType scale_dtype = c.g == QuantGranularity::kMx1x32 ? DType::kE8M0 : DType::kF32;
  HostTensor scales(scale_dtype, ScaleShape(c, rows, cols));
  HostTensor ends, output_t, scales_t;

  QuantizeArgs args;
  args.input = input.t;
  args.output = output.t;
  args.scales = scales.t;
  args.granularity = c.g;
  args.transpose_output = c.transpose;
  args.scale_format = c.pow2 ? ScaleFormat::kPow2 : ScaleFormat::kFp32;
  args.scale_layout = c.layout;
  args.mx_rounding = c.rounding;
  args.eps = c.eps;
  if (!c.ends.empty()) {
    ends = HostTensor(c.ends_dtype, {static_cast<int64_t>(c.ends.size())});
    for (size_t g = 0; g < c.ends.size(); ++g) {
      if (c.ends_dtype == DType::kI64)
        ends.as<int64_t>()[g] = c.ends[g];
      else
        ends.as<int32_t>()[g] = static_cast<int32_t>(c.ends[g]);
    }
    args.group_ends = ends.t;
  }
  if (c.dual) {
    output_t = HostTensor(c.out, {c.k, c.m});
    std::vector<int64_t> st_shape = {c.k, c.m / 128};
    if (c.g == QuantGranularity::k128x128) st_shape = {c.k / 128, c.m / 128};
    if (c.layout == ScaleLayout::kKBlockMajor) st_shape = {c.m / 128, c.k};
    scales_t = HostTensor(DType::kF32, st_shape);
    args.output_t = output_t.t;
    args.scales_t = scales_t.t;
  }
  Runner runner;
  ASSERT_TRUE(runner.Run(args).ok()) << runner.Run(args);

  RefParams p;
  p.granularity = c.g == QuantGranularity::kJaggedRowwise ? QuantGranularity::k1x128 : c.g;
  p.transpose = c.transpose;
  p.out = c.out;
  p.pow2 = c.pow2;
  p.eps = c.eps;
  p.rounding = c.rounding;
  if (c.g == QuantGranularity::kJaggedColwise) p.group_ends = c.ends;
  const bool kbm = c.layout == ScaleLayout::kKBlockMajor;
  ExpectMatches(c, RefQuantize(x, c.m, c.k, p), output, scales, rows, cols, kbm, "output");
  if (c.dual) {
    p.transpose = true;
    ExpectMatches(c, RefQuantize(x, c.m, c.k, p), output_t, scales_t, c.k, c.m, kbm, "output_t");
  }
}

using G = QuantGranularity;
constexpr DType kBF16 = DType::kBF16, kF16 = DType::kF16, kF32 = DType::kF32;
constexpr DType kFN = DType::kE4M3FN, kFNUZ = DType::kE4M3FNUZ, kE5 = DType::kE5M2;
constexpr ScaleLayout kKbm = ScaleLayout::kKBlockMajor;

std::vector<Case> Cases() {
  std::vector<Case> v = {
      {"1x128_bf16_e4m3fn", G::k1x128, false, 260, 384, kBF16, kFN},
      {"1x128_f16_e4m3fnuz_pow2", G::k1x128, false, 140, 256, kF16, kFNUZ, true},
      {"1x128_f32_e5m2_kbm", G::k1x128, false, 150, 256, kF32, kE5, false, kKbm},
      {"1x128_eps_1e-3", G::k1x128, false, 136, 256, kBF16, kFN},
      {"1x128_t_bf16_e4m3fn", G::k1x128, true, 256, 200, kBF16, kFN},
      {"1x128_t_f32_e5m2_kbm_pow2", G::k1x128, true, 384, 136, kF32, kE5, true, kKbm},
      {"128x1_bf16_e4m3fn_partial_rows", G::k128x1, false, 300, 72, kBF16, kFN},
      {"128x1_t_f16_e4m3fnuz_pow2", G::k128x1, true, 200, 300, kF16, kFNUZ, true},
      {"128x128_bf16_e4m3fn_partial_rows", G::k128x128, false, 300, 256, kBF16, kFN},
      {"128x128_t_f32_e5m2", G::k128x128, true, 256, 300, kF32, kE5},
      {"128x128_f16_e4m3fnuz_pow2", G::k128x128, false, 140, 128, kF16, kFNUZ, true},
      {"per_row_f32_e4m3fn", G::kPerRow, false, 140, 100, kF32, kFN},
      {"per_row_t_bf16_e4m3fnuz_pow2", G::kPerRow, true, 150, 140, kBF16, kFNUZ, true},
      {"per_tensor_bf16_e4m3fn_with_nan", G::kPerTensor, false, 140, 200, kBF16, kFN},
      {"per_tensor_t_f16_e5m2", G::kPerTensor, true, 140, 200, kF16, kE5},
      {"mx_bf16_e4m3fn_floor", G::kMx1x32, false, 140, 192, kBF16, kFN},
      {"mx_f32_e5m2_rceil", G::kMx1x32, false, 140, 160, kF32, kE5, false, ScaleLayout::kRowMajor,
       MxRounding::kRceil},
      {"mx_t_bf16_e4m3fn_rceil", G::kMx1x32, true, 160, 136, kBF16, kFN, false,
       ScaleLayout::kRowMajor, MxRounding::kRceil},
      {"mx_f16_e4m3fn_rceil", G::kMx1x32, false, 140, 96, kF16, kFN, false, ScaleLayout::kRowMajor,
       MxRounding::kRceil},
      {"jagged_rowwise_bf16_kbm",
       G::kJaggedRowwise,
       false,
       300,
       256,
       kBF16,
       kFN,
       false,
       kKbm,
       MxRounding::kFloor,
       {100, 100, 260, 300}},
      {"jagged_colwise_bf16_empty_groups",
       G::kJaggedColwise,
       true,
       300,
       136,
       kBF16,
       kFN,
       false,
       ScaleLayout::kRowMajor,
       MxRounding::kFloor,
       {0, 37, 37, 200, 300}},
      {"jagged_colwise_f32_e5m2_pow2_i32",
       G::kJaggedColwise,
       true,
       257,
       40,
       kF32,
       kE5,
       true,
       ScaleLayout::kRowMajor,
       MxRounding::kFloor,
       {128, 129, 257}},
      {"dual_bf16_e4m3fn",
       G::k1x128,
       false,
       256,
       384,
       kBF16,
       kFN,
       false,
       ScaleLayout::kRowMajor,
       MxRounding::kFloor,
       {},
       true},
      {"dual_f16_e4m3fnuz_kbm_pow2",
       G::k1x128,
       false,
       384,
       256,
       kF16,
       kFNUZ,
       true,
       kKbm,
       MxRounding::kFloor,
       {},
       true},
      // The 128x128 dual pass (W and Wᵀ from one read): several tiles both ways, each format.
      {"dual_128x128_bf16_e4m3fn",
       G::k128x128,
       false,
       256,
       384,
       kBF16,
       kFN,
       false,
       ScaleLayout::kRowMajor,
       MxRounding::kFloor,
       {},
       true},
      {"dual_128x128_f32_e5m2_pow2",
       G::k128x128,
       false,
       384,
       256,
       kF32,
       kE5,
       true,
       ScaleLayout::kRowMajor,
       MxRounding::kFloor,
       {},
       true},
      {"dual_128x128_f16_e4m3fnuz",
       G::k128x128,
       false,
       128,
       128,
       kF16,
       kFNUZ,
       false,
       ScaleLayout::kRowMajor,
       MxRounding::kFloor,
       {},
       true},
  };
  v[3].eps = 1e-3f;
  v[14].edge_cases = false;
  v[21].ends_dtype = DType::kI32;
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllVariants, QuantizeCpuTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = info.param.name;
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

// ---------------------------------------------------------------------------------------------
// The edge cases of the contract, one by one, on 1x128 e4m3fn with f32 input.

struct OneBlock {
  HostTensor input{DType::kF32, {1, 128}};
  HostTensor output{DType::kE4M3FN, {1, 128}};
  HostTensor scales{DType::kF32, {1, 1}};
  float* x() { return input.as<float>(); }
  uint8_t code(int i) { return output.as<uint8_t>()[i]; }
  float scale() { return scales.as<float>()[0]; }
  absl::Status Run(float eps = 1e-12f, ScaleFormat format = ScaleFormat::kFp32) {
    QuantizeArgs a;
    a.input = input.t;
    a.output = output.t;
    a.scales = scales.t;
    a.granularity = QuantGranularity::k1x128;
    a.eps = eps;
    a.scale_format = format;
    return Runner().Run(a);
  }
};

TEST(QuantizeEdgeCaseTest, AllZeroBlockGivesZeroCodesAndTheEpsScale) {
  OneBlock b;
  for (int i = 0; i < 128; ++i) b.x()[i] = (i % 2) ? -0.0f : 0.0f;
  ASSERT_TRUE(b.Run().ok());
  for (int i = 0; i < 128; ++i) EXPECT_EQ(b.code(i), (i % 2) ? 0x80 : 0x00) << i;
  const volatile float eps = 1e-12f;
  EXPECT_EQ(b.scale(), 1.0f / (448.0f / eps));
  EXPECT_TRUE(std::isfinite(b.scale()));
}

TEST(QuantizeEdgeCaseTest, NanMakesEveryCodeAndTheScaleNan) {
  OneBlock b;
  for (int i = 0; i < 128; ++i) b.x()[i] = static_cast<float>(i);
  b.x()[17] = -std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(b.Run().ok());
  for (int i = 0; i < 128; ++i) EXPECT_EQ(b.code(i), 0x7F) << i;
  EXPECT_EQ(Bits(b.scale()), 0x7FC00000u);
}

TEST(QuantizeEdgeCaseTest, InfMakesItsElementNanOthersZeroAndTheScaleInf) {
  OneBlock b;
  for (int i = 0; i < 128; ++i) b.x()[i] = i - 64.0f;
  b.x()[3] = HUGE_VALF;
  b.x()[4] = -HUGE_VALF;
  ASSERT_TRUE(b.Run().ok());
  EXPECT_EQ(b.code(3), 0x7F);
  EXPECT_EQ(b.code(4), 0x7F);
  EXPECT_EQ(b.code(0), 0x80);  // -64 * 0 = -0
  EXPECT_EQ(b.code(100), 0x00);
  EXPECT_TRUE(std::isinf(b.scale()) && b.scale() > 0);
}

TEST(QuantizeEdgeCaseTest, ValueAtFp8MaxWithUnitScaleGivesTheMaxCode) {
  OneBlock b;
  for (int i = 0; i < 128; ++i) b.x()[i] = 1.0f;
  b.x()[9] = 448.0f;
  b.x()[10] = -448.0f;
  ASSERT_TRUE(b.Run().ok());
  EXPECT_EQ(b.scale(), 1.0f);
  EXPECT_EQ(b.code(9), 0x7E);
  EXPECT_EQ(b.code(10), 0xFE);
  EXPECT_EQ(b.code(0), 0x38);
}

// amax * (448 / amax) rounds above 448 for some amax; those products must saturate to 0x7e.
TEST(QuantizeEdgeCaseTest, ProductRoundingAboveFp8MaxSaturates) {
  float amax = 1.0f;
  const volatile float max = 448.0f;
  while (!(amax * (max / amax) > 448.0f)) amax = std::nextafter(amax, 2.0f);
  ASSERT_LT(amax, 2.0f);
  OneBlock b;
  for (int i = 0; i < 128; ++i) b.x()[i] = 0.5f;
  b.x()[0] = amax;
  b.x()[1] = -amax;
  ASSERT_TRUE(b.Run().ok());
  EXPECT_EQ(b.code(0), 0x7E);
  EXPECT_EQ(b.code(1), 0xFE);
}

TEST(QuantizeEdgeCaseTest, SubnormalInputsFollowTheRecipe) {
  OneBlock b;
  const float tiny = std::ldexp(1.0f, -140);  // an fp32 subnormal
  for (int i = 0; i < 128; ++i) b.x()[i] = tiny * (i + 1);
  // amax is under any valid eps (FP8_MAX/eps must be finite), so the scale is FP8_MAX/eps.
  const volatile float eps = 2e-36f;
  ASSERT_TRUE(b.Run(eps).ok());
  const float scale = 448.0f / eps;
  EXPECT_EQ(b.scale(), 1.0f / scale);
  for (int i = 0; i < 128; ++i)
    EXPECT_EQ(b.code(i), fp8::Encode<fp8::E4M3FN>(b.x()[i] * scale)) << i;
  EXPECT_NE(b.code(127), 0);
  EXPECT_EQ(b.code(0), 0);
}

TEST(QuantizeEdgeCaseTest, Pow2ScaleIsTheScaleRoundedDown) {
  OneBlock b;
  for (int i = 0; i < 128; ++i) b.x()[i] = 1.0f;
  b.x()[0] = 3.0f;  // scale 149.33 -> 128, stored 1/128
  ASSERT_TRUE(b.Run(1e-12f, ScaleFormat::kPow2).ok());
  EXPECT_EQ(b.scale(), 1.0f / 128);
  EXPECT_EQ(b.code(0), fp8::Encode<fp8::E4M3FN>(384.0f));
}

TEST(QuantizeEdgeCaseTest, MxNanOrInfBlockGetsNanScaleAndNanCodes) {
  for (float special : {std::numeric_limits<float>::quiet_NaN(), HUGE_VALF}) {
    HostTensor input(DType::kF32, {1, 64}), output(DType::kE4M3FN, {1, 64}),
        scales(DType::kE8M0, {1, 2});
    for (int i = 0; i < 64; ++i) input.as<float>()[i] = 1.0f + i;
    input.as<float>()[40] = special;
    QuantizeArgs a;
    a.input = input.t;
    a.output = output.t;
    a.scales = scales.t;
    a.granularity = QuantGranularity::kMx1x32;
    ASSERT_TRUE(Runner().Run(a).ok());
    EXPECT_EQ(scales.as<uint8_t>()[1], 0xFF);
    for (int i = 32; i < 64; ++i) EXPECT_EQ(output.as<uint8_t>()[i], 0x7F) << i;
    // The first block is untouched: amax 32 = 2^5, FLOOR gives S = 127 + 5 - 8.
    EXPECT_EQ(scales.as<uint8_t>()[0], 124);
    EXPECT_EQ(output.as<uint8_t>()[31], fp8::Encode<fp8::E4M3FN>(32.0f * 8));
  }
}

TEST(QuantizeEdgeCaseTest, MxAllZeroBlockGetsScaleCodeZeroAndZeroCodes) {
  for (MxRounding r : {MxRounding::kFloor, MxRounding::kRceil}) {
    HostTensor input(DType::kBF16, {2, 32}), output(DType::kE5M2, {2, 32}),
        scales(DType::kU8, {2, 1});
    QuantizeArgs a;
    a.input = input.t;
    a.output = output.t;
    a.scales = scales.t;
    a.granularity = QuantGranularity::kMx1x32;
    a.mx_rounding = r;
    ASSERT_TRUE(Runner().Run(a).ok());
    EXPECT_EQ(scales.as<uint8_t>()[0], 0);
    for (int i = 0; i < 64; ++i) EXPECT_EQ(output.as<uint8_t>()[i], 0);
  }
}

// A large 1x128 run (many rows per thread, both threads) still matches the reference.
TEST(QuantizeCpuLargeTest, Bf16OneByOneTwentyEightOverManyRows) {
  HostTensor input = testing_ref::MakeInput(DType::kBF16, 2048, 1024, 7, false);
  HostTensor output(DType::kE4M3FN, {2048, 1024}), scales(DType::kF32, {8, 2048});
  QuantizeArgs a;
  a.input = input.t;
  a.output = output.t;
  a.scales = scales.t;
  a.granularity = QuantGranularity::k1x128;
  a.scale_layout = ScaleLayout::kKBlockMajor;
  ASSERT_TRUE(Runner().Run(a).ok());
  const testing_ref::EncoderRef enc(DType::kE4M3FN);
  for (int64_t r = 0; r < 2048; r += 97) {
    for (int64_t b = 0; b < 8; ++b) {
      float amax = 0;
      for (int64_t c = b * 128; c < b * 128 + 128; ++c) {
        amax = std::max(amax, std::fabs(testing_ref::InputValue(input, r * 1024 + c)));
      }
      const float scale = 448.0f / std::max(amax, 1e-12f);
      ASSERT_EQ(Bits(scales.as<float>()[b * 2048 + r]), Bits(1.0f / scale));
      for (int64_t c = b * 128; c < b * 128 + 128; ++c) {
        ASSERT_EQ(output.as<uint8_t>()[r * 1024 + c],
                  enc(testing_ref::InputValue(input, r * 1024 + c) * scale));
      }
    }
  }
}

}  // namespace
}  // namespace kd
