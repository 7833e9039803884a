#include "kerneld/client/tensor_ref.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kd {
namespace client {
namespace {

constexpr int kMaxRank = 4;

bool MulOverflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}
bool AddOverflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_add_overflow(a, b, out);
}

}  // namespace

size_t DTypeSize(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_F32:
    case v1::DTYPE_I32:
      return 4;
    case v1::DTYPE_BF16:
    case v1::DTYPE_F16:
      return 2;
    case v1::DTYPE_E4M3FN:
    case v1::DTYPE_E4M3FNUZ:
    case v1::DTYPE_E5M2:
    case v1::DTYPE_E8M0:
    case v1::DTYPE_U8:
      return 1;
    case v1::DTYPE_I64:
      return 8;
    default:
      return 0;
  }
}

TensorRefBuilder& TensorRefBuilder::Shape(absl::Span<const int64_t> shape) {
  ref_.mutable_shape()->Assign(shape.begin(), shape.end());
  return *this;
}

TensorRefBuilder& TensorRefBuilder::Strides(absl::Span<const int64_t> strides) {
  ref_.mutable_strides()->Assign(strides.begin(), strides.end());
  return *this;
}

v1::TensorRef MakeTensorRef(uint64_t buffer_id, v1::DType dtype,
                            std::initializer_list<int64_t> shape, uint64_t byte_offset) {
  return TensorRefBuilder(buffer_id).Dtype(dtype).Shape(shape).Offset(byte_offset).Build();
}

std::vector<int64_t> RowMajorStrides(absl::Span<const int64_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * shape[i + 1];
  }
  return strides;
}

absl::StatusOr<uint64_t> TensorEndByte(const v1::TensorRef& ref) {
  const size_t elem = DTypeSize(ref.dtype());
  if (elem == 0) {
    return absl::InvalidArgumentError(absl::StrCat("dtype=", v1::DType_Name(ref.dtype()), " (",
                                                   static_cast<int>(ref.dtype()),
                                                   ") is not a known tensor dtype"));
  }
  const int rank = ref.shape_size();
  if (rank < 1 || rank > kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape has rank ", rank, "; it must be 1..", kMaxRank));
  }
  for (int i = 0; i < rank; ++i) {
    if (ref.shape(i) < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape[", i, "]=", ref.shape(i), " is negative"));
    }
  }
  if (ref.byte_offset() % elem != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "byte_offset=", ref.byte_offset(), " is not a multiple of the element size ", elem));
  }
  std::vector<int64_t> strides;
  if (ref.strides_size() == 0) {
    strides = RowMajorStrides(ref.shape());
  } else {
    if (ref.strides_size() != rank) {
      return absl::InvalidArgumentError(absl::StrCat("strides has ", ref.strides_size(),
                                                     " entries; it must have one per dimension (",
                                                     rank, ") or none"));
    }
    strides.assign(ref.strides().begin(), ref.strides().end());
    if (strides[rank - 1] != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("strides[", rank - 1, "]=", strides[rank - 1], " must be 1"));
    }
  }
  // Extent in elements: 1 + sum((shape[i] - 1) * stride[i]); each outer stride must cover the
  // extent of the dimensions inside it so that no two elements alias.
  uint64_t extent = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (ref.shape(i) == 0) return ref.byte_offset();
    if (i < rank - 1 && ref.strides_size() != 0 &&
        (strides[i] < 0 || static_cast<uint64_t>(strides[i]) < extent)) {
      return absl::InvalidArgumentError(absl::StrCat("strides[", i, "]=", strides[i],
                                                     " is smaller than the extent ", extent,
                                                     " of the dimensions inside it"));
    }
    uint64_t span;
    if (MulOverflows(static_cast<uint64_t>(ref.shape(i) - 1), static_cast<uint64_t>(strides[i]),
                     &span) ||
        AddOverflows(extent, span, &extent)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape[", i, "]=", ref.shape(i), " with its strides overflows 64 bits"));
    }
  }
  uint64_t bytes, end;
  if (MulOverflows(extent, elem, &bytes) || AddOverflows(bytes, ref.byte_offset(), &end)) {
    return absl::InvalidArgumentError("byte_offset + extent overflows 64 bits");
  }
  return end;
}

absl::StatusOr<uint64_t> ContiguousBytes(v1::DType dtype, absl::Span<const int64_t> shape) {
  return TensorEndByte(TensorRefBuilder(0).Dtype(dtype).Shape(shape).Build());
}

}  // namespace client
}  // namespace kd
