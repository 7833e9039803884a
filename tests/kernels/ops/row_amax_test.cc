// The row_amax op on the CPU backend: every row's largest magnitude against a reference written
// here, for f32, bf16 and f16 rows, rows holding zeros, infinities and NaN, strided rows, and the
// rules Validate applies.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/fp8.h"
#include "kerneld/kernels/ops.h"
#include "tests/kernels/quantize_reference.h"
#include "tests/support/run_op.h"

namespace kd {
namespace {

using ::testing::HasSubstr;
using testing_ref::HostTensor;

class RowAmaxTest : public ::testing::Test {
 protected:
  RowAmaxTest() : backend_(CreateCpuBackend(2)) { stream_ = backend_->CreateStream(0).value(); }

  absl::Status Run(Op op) { return RunOp(*backend_, std::move(op), *stream_); }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Stream> stream_;
};

// The bits of `v` as `dtype` stores them: f32 as is, bf16 truncated to its upper half, f16 by
// the nearest-even conversion of testing_ref (fp8_reference.h has the decoders).
uint32_t StoredBits(float v, DType dtype) {
  const uint32_t u = testing_ref::Bits(v);
  if (dtype == DType::kF32) return u;
  if (dtype == DType::kBF16) return u >> 16;
  // f16: sign, then the magnitude rebased from 127 to 15 (values here are in f16's normal
  // range, powers of two times small integers), infinities and NaN kept.
  const uint32_t sign = (u >> 16) & 0x8000u;
  if (std::isnan(v)) return sign | 0x7E00u;
  if (std::isinf(v) || std::fabs(v) >= 65536.0f) return sign | 0x7C00u;
  if (v == 0.0f) return sign;
  const int exp = static_cast<int>((u >> 23) & 0xFF) - 127 + 15;
  return sign | (static_cast<uint32_t>(exp) << 10) | ((u >> 13) & 0x3FFu);
}

// `values` (rows, cols) stored as `dtype`, and each row's largest |x| of the stored values.
HostTensor Store(const std::vector<float>& values, int64_t rows, int64_t cols, DType dtype,
                 std::vector<float>* expected) {
  HostTensor t(dtype, {rows, cols});
  expected->assign(rows, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    double best = 0;
    bool nan = false;
    for (int64_t c = 0; c < cols; ++c) {
      const uint32_t bits = StoredBits(values[r * cols + c], dtype);
      float v;
      if (dtype == DType::kF32) {
        t.as<uint32_t>()[r * cols + c] = bits;
        v = testing_ref::FromBits(bits);
      } else {
        t.as<uint16_t>()[r * cols + c] = static_cast<uint16_t>(bits);
        v = dtype == DType::kBF16 ? testing_ref::Bf16Ref(bits) : testing_ref::F16Ref(bits);
      }
      nan = nan || std::isnan(v);
      best = std::max(best, std::fabs(static_cast<double>(v)));
    }
    (*expected)[r] = nan ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(best);
  }
  return t;
}

TEST_F(RowAmaxTest, EveryRowsLargestMagnitudeExactly) {
  std::mt19937 rng(5);
  const int64_t rows = 67, cols = 300;
  std::vector<float> values(rows * cols);
  // Small integers times powers of two: exact in all three dtypes.
  for (float& v : values) {
    v = std::ldexp(static_cast<float>(static_cast<int>(rng() % 255) - 127),
                   static_cast<int>(rng() % 16) - 8);
  }
  for (int64_t c = 0; c < cols; ++c) values[3 * cols + c] = 0.0f;  // an all-zero row
  values[5 * cols + 7] = -std::numeric_limits<float>::infinity();
  values[9 * cols + 299] = std::numeric_limits<float>::quiet_NaN();
  values[11 * cols] = -70000.0f;  // past f16's range: -inf there
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    std::vector<float> expected;
    HostTensor x = Store(values, rows, cols, dtype, &expected);
    HostTensor out(DType::kF32, {rows});
    ASSERT_TRUE(Run(RowAmaxArgs{x.t, out.t}).ok());
    for (int64_t r = 0; r < rows; ++r) {
      const float got = out.as<float>()[r];
      if (std::isnan(expected[r])) {
        EXPECT_TRUE(std::isnan(got)) << "row " << r;
      } else {
        EXPECT_EQ(got, expected[r]) << "row " << r;
      }
    }
    EXPECT_EQ(out.as<float>()[3], 0.0f);
    EXPECT_TRUE(std::isinf(out.as<float>()[5]));
  }
}

TEST_F(RowAmaxTest, StridedRows) {
  std::vector<float> values(8 * 64);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 97) - 48.0f;
  std::vector<float> full;
  HostTensor x = Store(values, 8, 64, DType::kF32, &full);
  // Every other row, its first 40 columns.
  Tensor view = x.t;
  view.shape[0] = 4;
  view.shape[1] = 40;
  view.strides[0] = 128;
  HostTensor out(DType::kF32, {4});
  ASSERT_TRUE(Run(RowAmaxArgs{view, out.t}).ok());
  for (int64_t r = 0; r < 4; ++r) {
    float best = 0;
    for (int64_t c = 0; c < 40; ++c) best = std::max(best, std::fabs(values[2 * r * 64 + c]));
    EXPECT_EQ(out.as<float>()[r], best) << r;
  }
}

TEST_F(RowAmaxTest, RulesNameTheField) {
  HostTensor x(DType::kBF16, {4, 8});
  HostTensor out(DType::kF32, {4});
  HostTensor wrong_len(DType::kF32, {5});
  HostTensor wrong_dtype(DType::kBF16, {4});
  HostTensor codes(DType::kE4M3FN, {4, 8});
  auto status = Run(RowAmaxArgs{x.t, wrong_len.t});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("output.shape"));
  status = Run(RowAmaxArgs{x.t, wrong_dtype.t});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("output.dtype"));
  status = Run(RowAmaxArgs{codes.t, out.t});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input.dtype"));
}

}  // namespace
}  // namespace kd
