// The pad and unpad ops on the CPU backend (the reference every backend is compared with): the
// rows each group keeps, the zero rows padding adds, the padded group ends, the round trip, and
// the rules Validate and the kernel apply to shapes, alignment and group ends.
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kerneld/kernels/cpu_backend.h"
#include "kerneld/kernels/ops.h"
#include "tests/kernels/quantize_reference.h"
#include "tests/support/run_op.h"

namespace kd {
namespace {

using ::testing::HasSubstr;
using testing_ref::HostTensor;

class PadTest : public ::testing::Test {
 protected:
  PadTest() : backend_(CreateCpuBackend(2)) { stream_ = backend_->CreateStream(0).value(); }

  absl::Status Run(Op op) { return RunOp(*backend_, std::move(op), *stream_); }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Stream> stream_;
};

// Rows of `hidden` bf16 elements whose every element names its row (row + 1), so a misplaced or
// missing row is visible in any element.
HostTensor Rows(int64_t rows, int64_t hidden) {
  HostTensor t(DType::kBF16, {rows, hidden});
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < hidden; ++c) t.as<uint16_t>()[r * hidden + c] = r + 1;
  }
  return t;
}

HostTensor Ends(const std::vector<int64_t>& ends, DType dtype) {
  HostTensor t(dtype, {static_cast<int64_t>(ends.size())});
  for (size_t g = 0; g < ends.size(); ++g) {
    if (dtype == DType::kI64) {
      t.as<int64_t>()[g] = ends[g];
    } else {
      t.as<int32_t>()[g] = static_cast<int32_t>(ends[g]);
    }
  }
  return t;
}

// What pad must write, computed here: each group's rows, then zero rows up to a multiple of
// `alignment`; rows past the last padded group are zero as well.
std::vector<uint16_t> ExpectedPadded(const std::vector<int64_t>& ends, int64_t alignment,
                                     int64_t out_rows, int64_t hidden,
                                     std::vector<int32_t>* padded_ends) {
  std::vector<uint16_t> out(out_rows * hidden, 0);
  int64_t start = 0, padded_start = 0;
  for (int64_t end : ends) {
    for (int64_t i = 0; i < end - start; ++i) {
      for (int64_t c = 0; c < hidden; ++c) out[(padded_start + i) * hidden + c] = start + i + 1;
    }
    padded_start += (end - start + alignment - 1) / alignment * alignment;
    padded_ends->push_back(static_cast<int32_t>(padded_start));
    start = end;
  }
  return out;
}

TEST_F(PadTest, EachGroupStartsOnAnAlignedRowAndPaddingIsZero) {
  // Empty groups, a group already aligned, one of a single row, the last one ragged.
  const std::vector<int64_t> ends = {0, 5, 21, 21, 22, 40};
  const int64_t hidden = 24, alignment = 16;
  for (DType ends_dtype : {DType::kI32, DType::kI64}) {
    SCOPED_TRACE(DTypeName(ends_dtype));
    HostTensor input = Rows(40, hidden);
    HostTensor group_ends = Ends(ends, ends_dtype);
    const int64_t out_rows = 40 + 6 * (alignment - 1);
    HostTensor output(DType::kBF16, {out_rows, hidden});
    std::memset(output.storage.data(), 0xff, output.storage.size() * 8);  // no stale zero passes
    HostTensor padded_ends(DType::kI32, {6});
    PadArgs pad{input.t, group_ends.t, output.t, padded_ends.t, static_cast<int32_t>(alignment)};
    ASSERT_TRUE(Run(pad).ok());
    std::vector<int32_t> want_ends;
    const std::vector<uint16_t> want =
        ExpectedPadded(ends, alignment, out_rows, hidden, &want_ends);
    EXPECT_EQ(std::vector<int32_t>(padded_ends.as<int32_t>(), padded_ends.as<int32_t>() + 6),
              want_ends);
    EXPECT_EQ(std::memcmp(output.storage.data(), want.data(), want.size() * 2), 0);
  }
}

TEST_F(PadTest, UnpadInvertsPad) {
  std::mt19937 rng(7);
  for (int32_t alignment : {1, 16, 32, 128}) {
    SCOPED_TRACE(alignment);
    std::vector<int64_t> ends;
    int64_t rows = 0;
    for (int g = 0; g < 8; ++g) ends.push_back(rows += rng() % 300);
    const int64_t hidden = 136;  // not a multiple of 128: rows are copied whole
    HostTensor input = Rows(rows, hidden);
    HostTensor group_ends = Ends(ends, DType::kI32);
    HostTensor padded(DType::kBF16, {rows + 8 * (alignment - 1), hidden});
    HostTensor padded_ends(DType::kI32, {8});
    ASSERT_TRUE(Run(PadArgs{input.t, group_ends.t, padded.t, padded_ends.t, alignment}).ok());
    HostTensor back(DType::kBF16, {rows, hidden});
    ASSERT_TRUE(Run(UnpadArgs{padded.t, group_ends.t, back.t, alignment}).ok());
    EXPECT_EQ(std::memcmp(back.storage.data(), input.storage.data(), rows * hidden * 2), 0);
  }
}

TEST_F(PadTest, ShapesAndAlignmentAreCheckedBeforeAnyRowMoves) {
  HostTensor input = Rows(32, 8);
  HostTensor group_ends = Ends({10, 32}, DType::kI32);
  HostTensor output(DType::kBF16, {32 + 2 * 15, 8});
  HostTensor padded_ends(DType::kI32, {2});
  const PadArgs good{input.t, group_ends.t, output.t, padded_ends.t, 16};

  PadArgs a = good;
  a.alignment = 24;
  absl::Status s = Run(a);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("alignment=24 must be a power of two"));

  a = good;
  a.output.shape[0] = 32 + 2 * 15 - 1;  // one row short of the worst case
  s = Run(a);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("output.shape[0]=61 must be >="));

  a = good;
  a.output.shape[1] = 4;
  s = Run(a);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("output.shape[1]=4 must equal input.shape[1]=8"));

  a = good;
  a.padded_group_ends.shape[0] = 1;
  s = Run(a);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("padded_group_ends"));

  UnpadArgs u{output.t, group_ends.t, input.t, 16};
  u.input.shape[0] = 31;  // fewer rows than the unpadded tensor
  s = Run(u);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input.shape[0]=31 must be >= output.shape[0]=32"));
}

TEST_F(PadTest, GroupEndsAreCheckedAsTheKernelReadsThem) {
  HostTensor input = Rows(32, 8);
  HostTensor output(DType::kBF16, {32 + 3 * 15, 8});
  HostTensor padded_ends(DType::kI32, {3});

  HostTensor decreasing = Ends({10, 5, 32}, DType::kI64);
  absl::Status s = Run(PadArgs{input.t, decreasing.t, output.t, padded_ends.t, 16});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("group_ends[1]=5 is less than group_ends[0]=10"));

  HostTensor short_total = Ends({10, 20, 30}, DType::kI32);
  s = Run(PadArgs{input.t, short_total.t, output.t, padded_ends.t, 16});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("group_ends[2]=30 must equal the row count 32"));

  // Unpad: ends that pad to more rows than the padded input holds.
  HostTensor ends = Ends({1, 2, 32}, DType::kI32);
  HostTensor small(DType::kBF16, {40, 8});
  HostTensor out(DType::kBF16, {32, 8});
  s = Run(UnpadArgs{small.t, ends.t, out.t, 16});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("is less than the padded row count 64"));
}

}  // namespace
}  // namespace kd
