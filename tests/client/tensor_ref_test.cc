#include "kerneld/client/tensor_ref.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace kd {
namespace client {
namespace {

TEST(DTypeSizeTest, EveryWireDtypeHasItsSize) {
  EXPECT_EQ(DTypeSize(v1::DTYPE_F32), 4u);
  EXPECT_EQ(DTypeSize(v1::DTYPE_BF16), 2u);
  EXPECT_EQ(DTypeSize(v1::DTYPE_F16), 2u);
  EXPECT_EQ(DTypeSize(v1::DTYPE_E4M3FN), 1u);
  EXPECT_EQ(DTypeSize(v1::DTYPE_E4M3FNUZ), 1u);
  EXPECT_EQ(DTypeSize(v1::DTYPE_E5M2), 1u);
  EXPECT_EQ(DTypeSize(v1::DTYPE_E8M0), 1u);
  EXPECT_EQ(DTypeSize(v1::DTYPE_I32), 4u);
  EXPECT_EQ(DTypeSize(v1::DTYPE_I64), 8u);
  EXPECT_EQ(DTypeSize(v1::DTYPE_U8), 1u);
  EXPECT_EQ(DTypeSize(v1::DTYPE_UNSPECIFIED), 0u);
  EXPECT_EQ(DTypeSize(static_cast<v1::DType>(99)), 0u);
}

TEST(TensorRefBuilderTest, SetsEveryField) {
  const v1::TensorRef ref =
      TensorRefBuilder(7).Offset(256).Dtype(v1::DTYPE_BF16).Shape({4, 8}).Strides({16, 1}).Build();
  EXPECT_EQ(ref.buffer_id(), 7u);
  EXPECT_EQ(ref.byte_offset(), 256u);
  EXPECT_EQ(ref.dtype(), v1::DTYPE_BF16);
  ASSERT_EQ(ref.shape_size(), 2);
  EXPECT_EQ(ref.shape(0), 4);
  EXPECT_EQ(ref.shape(1), 8);
  ASSERT_EQ(ref.strides_size(), 2);
  EXPECT_EQ(ref.strides(0), 16);
  EXPECT_EQ(ref.strides(1), 1);
}

TEST(TensorRefBuilderTest, ShapeCalledTwiceReplacesTheShape) {
  const v1::TensorRef ref = TensorRefBuilder(1).Shape({1, 2, 3}).Shape({5}).Build();
  ASSERT_EQ(ref.shape_size(), 1);
  EXPECT_EQ(ref.shape(0), 5);
}

TEST(MakeTensorRefTest, IsContiguousWithNoStrides) {
  const v1::TensorRef ref = MakeTensorRef(3, v1::DTYPE_F32, {2, 128}, 64);
  EXPECT_EQ(ref.buffer_id(), 3u);
  EXPECT_EQ(ref.dtype(), v1::DTYPE_F32);
  EXPECT_EQ(ref.byte_offset(), 64u);
  EXPECT_EQ(ref.shape_size(), 2);
  EXPECT_EQ(ref.strides_size(), 0);
}

TEST(RowMajorStridesTest, InnermostIsOne) {
  EXPECT_EQ(RowMajorStrides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(RowMajorStrides({5}), (std::vector<int64_t>{1}));
}

TEST(TensorEndByteTest, ContiguousIsOffsetPlusBytes) {
  EXPECT_EQ(*TensorEndByte(MakeTensorRef(1, v1::DTYPE_BF16, {8, 128}, 256)), 256u + 8 * 128 * 2);
}

TEST(TensorEndByteTest, StridedEndsAfterTheLastElement) {
  // Rows of 8 f32 at a pitch of 16: the last element is at 3*16 + 7.
  const v1::TensorRef ref =
      TensorRefBuilder(1).Dtype(v1::DTYPE_F32).Shape({4, 8}).Strides({16, 1}).Build();
  EXPECT_EQ(*TensorEndByte(ref), (3u * 16 + 7 + 1) * 4);
}

TEST(TensorEndByteTest, ZeroDimensionTouchesNothing) {
  EXPECT_EQ(*TensorEndByte(MakeTensorRef(1, v1::DTYPE_F32, {0, 128}, 64)), 64u);
}

TEST(TensorEndByteTest, UnknownDtypeIsInvalidArgument) {
  const auto r = TensorEndByte(MakeTensorRef(1, v1::DTYPE_UNSPECIFIED, {4}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("dtype"), absl::string_view::npos);
}

TEST(TensorEndByteTest, RankOutsideOneToFourIsInvalidArgument) {
  EXPECT_EQ(TensorEndByte(TensorRefBuilder(1).Dtype(v1::DTYPE_U8).Build()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TensorEndByte(MakeTensorRef(1, v1::DTYPE_U8, {1, 1, 1, 1, 1})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TensorEndByteTest, NegativeDimensionIsInvalidArgumentNamingIt) {
  const auto r = TensorEndByte(MakeTensorRef(1, v1::DTYPE_U8, {4, -2}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("shape[1]=-2"), absl::string_view::npos);
}

TEST(TensorEndByteTest, MisalignedOffsetIsInvalidArgument) {
  const auto r = TensorEndByte(MakeTensorRef(1, v1::DTYPE_F32, {4}, 6));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("byte_offset=6"), absl::string_view::npos);
}

TEST(TensorEndByteTest, StridesNotOnePerDimensionIsInvalidArgument) {
  const v1::TensorRef ref =
      TensorRefBuilder(1).Dtype(v1::DTYPE_F32).Shape({4, 8}).Strides({1}).Build();
  EXPECT_EQ(TensorEndByte(ref).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorEndByteTest, LastStrideOtherThanOneIsInvalidArgument) {
  const v1::TensorRef ref =
      TensorRefBuilder(1).Dtype(v1::DTYPE_F32).Shape({4, 8}).Strides({16, 2}).Build();
  const auto r = TensorEndByte(ref);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("strides[1]=2"), absl::string_view::npos);
}

TEST(TensorEndByteTest, OuterStrideInsideTheInnerExtentIsInvalidArgument) {
  const v1::TensorRef ref =
      TensorRefBuilder(1).Dtype(v1::DTYPE_F32).Shape({4, 8}).Strides({7, 1}).Build();
  const auto r = TensorEndByte(ref);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("strides[0]=7"), absl::string_view::npos);
}

TEST(TensorEndByteTest, OverflowIsInvalidArgument) {
  EXPECT_EQ(TensorEndByte(MakeTensorRef(1, v1::DTYPE_I64, {int64_t{1} << 61, 4})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TensorEndByte(MakeTensorRef(1, v1::DTYPE_U8, {16}, ~uint64_t{0} - 4)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ContiguousBytesTest, IsElementsTimesSize) {
  EXPECT_EQ(*ContiguousBytes(v1::DTYPE_E4M3FN, {128, 128}), 128u * 128);
  EXPECT_EQ(*ContiguousBytes(v1::DTYPE_F32, {8, 1}), 32u);
}

}  // namespace
}  // namespace client
}  // namespace kd
